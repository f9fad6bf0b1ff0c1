#!/usr/bin/env python3
"""Writes the binary half of gpipe's hostile-input corpus (tests/hostile/). Run once; the
outputs are committed. The plans beside them are written by hand; CASES lists every input with
the error gpipe must give for it (tests/e2e/hostile_input_test.cc feeds each to the real
programs)."""
import gzip
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(relative, data):
    path = os.path.join(HERE, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def npy(header_dict_text, payload, magic=b"\x93NUMPY", version=b"\x01\x00"):
    header = header_dict_text.encode()
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + b" " * pad + b"\n"
    return magic + version + struct.pack("<H", len(header)) + header + payload


def safetensors(header, payload, length=None):
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text) if length is None else length) + text + payload


def idx(dims, payload, type_code=0x08, magic=b"\x00\x00"):
    return magic + bytes([type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


rng = random.Random(15)
garbage = bytes(rng.randrange(256) for _ in range(4096))

# .npy (the plan npy_inputs.pbtxt reads npy/inputs.npy: 64 x 12 float32)
good = struct.pack("<768f", *[0.5] * 768)
write("npy/truncated.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (64, 12), }", good[:1000]))
write("npy/wrong_dtype.npy", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (64, 12), }", good[:1536]))
write("npy/huge_shape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000000, 12), }", good))
write("npy/overflow_shape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807, 9223372036854775807), }", good))
write("npy/fortran.npy", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (64, 12), }", good))
write("npy/garbage.npy", garbage)
write("npy/bad_header.npy", npy("{'descr': '<f4', 'shape': (64, 12)", good))

# IDX (the plan idx_images.pbtxt reads idx/images and idx/labels)
write("idx/bad_magic.idx", idx([4, 28, 28], bytes(4 * 784), magic=b"\x01\x02"))
write("idx/truncated.idx", idx([4, 28, 28], bytes(1000)))
write("idx/wrong_type.idx", idx([4, 28, 28], bytes(4 * 784 * 4), type_code=0x0D))
write("idx/huge_dims.idx", idx([65535, 65535, 65535], bytes(2 << 20)))
write("idx/trailing.idx", idx([4, 28, 28], bytes(4 * 784 + 7)))
write("idx/gzip_cut.idx.gz", gzip.compress(idx([4, 28, 28], bytes(4 * 784)))[:-12])
write("idx/garbage.idx", garbage)

# safetensors (--init-from against tests/hostile/plans/base.pbtxt: fc1 [32, 12], fc2 [5, 32])
fc1 = {"dtype": "F32", "shape": [32, 12], "data_offsets": [0, 1536]}
write("safetensors/truncated.safetensors", safetensors({"fc1.weight": fc1}, bytes(100)))
write("safetensors/huge_header.safetensors", safetensors({"fc1.weight": fc1}, bytes(1536), length=1 << 62))
write("safetensors/not_json.safetensors", struct.pack("<Q", 16) + b"{not json at all" + bytes(8))
write("safetensors/f64.safetensors", safetensors({"fc1.weight": {"dtype": "F64", "shape": [32, 12], "data_offsets": [0, 3072]}}, bytes(3072)))
write("safetensors/overlap.safetensors", safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, bytes(24)))
write("safetensors/huge_shape.safetensors", safetensors({"fc1.weight": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}}, bytes(16)))
write("safetensors/wrong_shape.safetensors", safetensors({
    "fc1.weight": {"dtype": "F32", "shape": [12, 32], "data_offsets": [0, 1536]},
    "fc1.bias": {"dtype": "F32", "shape": [32], "data_offsets": [1536, 1664]},
    "fc2.weight": {"dtype": "F32", "shape": [5, 32], "data_offsets": [1664, 2304]},
    "fc2.bias": {"dtype": "F32", "shape": [5], "data_offsets": [2304, 2324]}}, bytes(2324)))
write("safetensors/garbage.safetensors", garbage)

# text (data.text paths)
write("text/empty.txt", b"")

# checkpoints (--resume): each a step directory or a checkpoint directory
write("checkpoints/garbage_manifest/manifest.pbtxt", garbage)
write("checkpoints/future_version/manifest.pbtxt", b"format_version: 9 step: 1\n")
write("checkpoints/escaping_shard/manifest.pbtxt",
      b'format_version: 1 step: 1 shards { file: "../../../etc/passwd.safetensors" bytes: 1 }\n')
write("checkpoints/huge_tensor/manifest.pbtxt",
      b'format_version: 1 step: 1 shards { file: "s.safetensors" bytes: 8 }\n'
      b'tensors { name: "fc1.weight" shape: 4611686018427387904 shape: 4 kind: PARAMETER shard: 0 }\n')
write("checkpoints/bad_latest/latest", b"../../../../tmp\n")
write("checkpoints/empty_manifest/manifest.pbtxt", b"")
write("checkpoints/edited_manifest/manifest.pbtxt", b"format_version: 1 step: 1 manifest_crc32: 1\n")
write("checkpoints/missing_shard/manifest.pbtxt",
      b'format_version: 1 step: 1 applied_steps: 1 global_batch: 8 seed: 0 shuffle: false dataset_size: 64\n'
      b'plan { training { optimizer { sgd { lr: 0.1 } } } }\n'
      b'shards { file: "stage-000-of-001.safetensors" bytes: 100 crc32: 1 stage: 0 }\n'
      b'tensors { name: "fc1.weight" shape: 32 shape: 12 kind: PARAMETER shard: 0 }\n'
      b'tensors { name: "fc1.bias" shape: 32 kind: PARAMETER shard: 0 }\n'
      b'tensors { name: "fc2.weight" shape: 5 shape: 32 kind: PARAMETER shard: 0 }\n'
      b'tensors { name: "fc2.bias" shape: 5 kind: PARAMETER shard: 0 }\n')

# Companions the bad files are read beside (valid).
write("npy/inputs.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (64, 12), }", good))
write("npy/targets.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (64,), }",
                             struct.pack("<64q", *[i % 5 for i in range(64)])))
write("idx/labels.idx", idx([4], bytes([0, 1, 2, 3])))

# Plans at protobuf's limits: nesting deeper than its parser allows, and a long flat model.
def residual(depth):
    if depth == 0:
        return 'layers { name: "fc%d" linear { out_features: 12 } }' % depth
    return 'layers { name: "res%d" residual { %s } }' % (depth, residual(depth - 1))

BASE_TAIL = """  loss { softmax_cross_entropy {} }
}
pipeline { stages: 1 micro_batches: 2 }
training { global_batch: 8 steps: 2 optimizer { sgd { lr: 0.1 } } }
data { synthetic { num_samples: 64 } }
runtime { log_every: 0 timeouts { wait_seconds: 30 } }
"""
write("plans/deep_nesting.pbtxt", ("# 150 nested residual blocks: deeper than protobuf's text parser goes.\n"
                                   "model {\n  input { shape: [12] }\n  " + residual(150) +
                                   '\n  layers { name: "head" linear { out_features: 5 } }\n' + BASE_TAIL).encode())
write("plans/many_layers.pbtxt", ("# 2000 layers: large but valid; it must run.\nmodel {\n  input { shape: [12] }\n" +
                                  "".join('  layers { name: "l%d" linear { out_features: 12 } }\n' % i for i in range(2000)) +
                                  '  layers { name: "head" linear { out_features: 5 } }\n' + BASE_TAIL).encode())
write("plans/binary_garbage.pbtxt", garbage)
