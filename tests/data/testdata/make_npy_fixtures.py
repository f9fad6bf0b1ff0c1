#!/usr/bin/env python3
"""Writes the .npy fixtures of tests/train/npy_test.cc with numpy's own writer.

Run once from the repository root (needs numpy; the tests do not):
    python3 tests/train/testdata/make_npy_fixtures.py
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def main():
    f32 = (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0).astype("<f4")
    np.save(path("f32_2x3.npy"), f32)                                  # version 1.0
    np.save(path("i64_4.npy"), np.array([3, 0, 2, 1], dtype="<i8"))
    np.save(path("i32_4.npy"), np.array([1, -2, 2147483647, -2147483648], dtype="<i4"))
    with open(path("f32_2x3_v2.npy"), "wb") as f:
        np.lib.format.write_array(f, f32, version=(2, 0))
    with open(path("f32_2x3_v3.npy"), "wb") as f:
        np.lib.format.write_array(f, f32, version=(3, 0))
    np.save(path("f32_scalar.npy"), np.array(2.5, dtype="<f4"))       # shape ()
    np.save(path("f32_fortran_2x3.npy"), np.asfortranarray(f32))       # fortran_order: True
    np.save(path("f32_big_endian.npy"), f32.astype(">f4"))
    np.save(path("f64_2x3.npy"), f32.astype("<f8"))


if __name__ == "__main__":
    main()
