#!/usr/bin/env python3
"""Writes the fixtures of tests/ckpt/safetensors_test.cc with the reference `safetensors`
package, so gpipe's reader is checked against files it did not write itself.

Run once from the repository root (needs `pip install safetensors numpy`; the tests do not):
    python3 tests/ckpt/testdata/make_safetensors_fixtures.py
"""
import os

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    tensors = {
        "fc1.weight": (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.25 - 0.5),
        "fc1.bias": np.array([1.5, -2.0], dtype=np.float32),
        "fc2.weight": np.array([[3.0, -1.0]], dtype=np.float32),
        "scale": np.array(0.125, dtype=np.float32),        # shape []
        "empty": np.zeros((0, 3), dtype=np.float32),       # no elements
    }
    save_file(tensors, os.path.join(HERE, "reference_f32.safetensors"),
              metadata={"format": "pt", "note": "made by safetensors"})
    save_file({"w": np.array([1.0, 2.0], dtype=np.float16),
               "b": np.array([0.5], dtype=np.float32)},
              os.path.join(HERE, "reference_f16.safetensors"))


if __name__ == "__main__":
    main()
