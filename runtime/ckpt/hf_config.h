// The Hugging Face `config.json` of a plan whose model is a LlamaForCausalLM: what
// `from_pretrained` needs beside the weights that `--export` writes under the plan's names.
// A plan is one when its layers are, in order, an embedding `model.embed_tokens`, llama blocks
// `model.layers.0` ... `model.layers.{L-1}` that agree on every setting, an rms_norm
// `model.norm` with the blocks' eps, and a linear `lm_head` without bias onto the vocabulary,
// over an INT64 input of seq_len ids; `model.embed_tokens.weight` tied to `lm_head.weight` sets
// tie_word_embeddings. Anything else is INVALID_ARGUMENT naming the layer and what differs.
#ifndef GPIPE_RUNTIME_CKPT_HF_CONFIG_H_
#define GPIPE_RUNTIME_CKPT_HF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"

namespace gpipe {

// `torch_dtype` names the dtype the weights are stored in ("float32" or "bfloat16", as
// --export-dtype F32 or BF16 writes them). Returns the JSON text, two-space indented, with a
// trailing newline.
absl::StatusOr<std::string> LlamaHfConfigJson(const pb::Model& model,
                                              const std::string& torch_dtype);

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CKPT_HF_CONFIG_H_
