#!/usr/bin/env python3
"""Independent expected values for batch_norm_test.cc (run once, the numbers are pasted into
the test).

Plain Python (math only), written from PyTorch's definition of torch.nn.BatchNorm1d /
BatchNorm2d, not from gpipe's C++:
  training:   y = (x - mean) / sqrt(var + eps) * weight + bias, with mean and the BIASED
              variance of channel c over the batch and every position (L, or H x W);
              running = (1 - momentum) * running + momentum * statistic, with the UNBIASED
              variance (n / (n - 1)) for running_var; running_mean starts at 0, running_var at 1.
  evaluation: the same with running_mean and running_var in place of the batch statistics.
Backward values (dx, dweight, dbias of J = sum(y * dy)) come from central differences in
double precision, so they share no analytic derivation with the C++ either.

Inputs are Pattern(n, salt, scale): element i is (((7 i + 3 salt) mod 17) - 8) * scale, which
the test computes the same way; the scales are powers of two, so every input is exact in f32.
A per-sample input [C, P...] of a batch B is laid out row-major as [B, C, P...].

    python3 tests/layers/oracles/batch_norm_oracles.py
"""
import math

H = 1e-6  # double-precision central differences
EPS = 1e-5


def fmt(values):
    return "{" + ", ".join("%.9g" % v for v in values) + "}"


def pattern(n, salt, scale):
    return [(((7 * i + 3 * salt) % 17) - 8) * scale for i in range(n)]


def fd_grad(f, xs, r):
    """d/dx of sum(f(xs) * r) by central differences."""
    out = []
    for i in range(len(xs)):
        plus = list(xs)
        minus = list(xs)
        plus[i] += H
        minus[i] -= H
        jp = sum(a * b for a, b in zip(f(plus), r))
        jm = sum(a * b for a, b in zip(f(minus), r))
        out.append((jp - jm) / (2 * H))
    return out


def channel_values(x, B, C, P, c):
    return [x[(b * C + c) * P + s] for b in range(B) for s in range(P)]


def batch_stats(x, B, C, P):
    """Per channel: (mean, biased variance, unbiased variance)."""
    stats = []
    for c in range(C):
        v = channel_values(x, B, C, P, c)
        n = len(v)
        mean = sum(v) / n
        ss = sum((a - mean) ** 2 for a in v)
        stats.append((mean, ss / n, ss / (n - 1)))
    return stats


def normalize(x, B, C, P, means, variances, w, bias, eps):
    y = [0.0] * len(x)
    for b in range(B):
        for c in range(C):
            for s in range(P):
                i = (b * C + c) * P + s
                v = (x[i] - means[c]) / math.sqrt(variances[c] + eps)
                y[i] = v * (w[c] if w is not None else 1.0) + (bias[c] if bias is not None else 0.0)
    return y


def bn_train(x, B, C, P, w, bias, eps=EPS):
    st = batch_stats(x, B, C, P)
    return normalize(x, B, C, P, [s[0] for s in st], [s[1] for s in st], w, bias, eps)


def update_running(running_mean, running_var, x, B, C, P, momentum):
    st = batch_stats(x, B, C, P)
    rm = [(1 - momentum) * running_mean[c] + momentum * st[c][0] for c in range(C)]
    rv = [(1 - momentum) * running_var[c] + momentum * st[c][2] for c in range(C)]
    return rm, rv


def case(label, B, C, P, xsalt, xscale, affine):
    x = pattern(B * C * P, xsalt, xscale)
    w = [1.0 + v for v in pattern(C, xsalt + 1, 0.0625)] if affine else None
    bias = pattern(C, xsalt + 2, 0.0625) if affine else None
    dy = pattern(B * C * P, xsalt + 3, 0.25)
    print("%s y  =" % label, fmt(bn_train(x, B, C, P, w, bias)))
    print("%s dx =" % label, fmt(fd_grad(lambda v: bn_train(v, B, C, P, w, bias), x, dy)))
    if affine:
        print("%s dweight =" % label,
              fmt(fd_grad(lambda v: bn_train(x, B, C, P, v, bias), w, dy)))
        print("%s dbias   =" % label,
              fmt(fd_grad(lambda v: bn_train(x, B, C, P, w, v), bias, dy)))


# ---- Training forward and backward.
# batch_norm1d on [C] = [3], batch 4 (P = 1); x salt 1 scale 0.25, weight 1 + Pattern(C, 2,
# 0.0625) (never 0), bias salt 3 scale 0.0625, dy salt 4 scale 0.25.
case("bn1d[3] B4", 4, 3, 1, 1, 0.25, True)
# batch_norm1d on [C, L] = [2, 3], batch 2; salts 5..8.
case("bn1d[2,3] B2", 2, 2, 3, 5, 0.25, True)
# batch_norm2d on [C, H, W] = [2, 2, 3], batch 2; salts 9..12.
case("bn2d[2,2,3] B2", 2, 2, 6, 9, 0.25, True)
# batch_norm1d on [C] = [3], batch 4, affine false; salts 13.. (dy salt 16).
case("bn1d[3] B4 plain", 4, 3, 1, 13, 0.25, False)

# ---- Running statistics: batch_norm1d on [3], batch 4, no affine needed for the buffers.
C = 3
xa = pattern(4 * C, 20, 0.25)
xb = pattern(4 * C, 21, 0.5)
rm, rv = [0.0] * C, [1.0] * C
rm, rv = update_running(rm, rv, xa, 4, C, 1, 0.1)
print("running after 1 (m 0.1): mean =", fmt(rm), "var =", fmt(rv))
rm, rv = update_running(rm, rv, xb, 4, C, 1, 0.1)
print("running after 2 (m 0.1): mean =", fmt(rm), "var =", fmt(rv))
rm1, rv1 = update_running([0.0] * C, [1.0] * C, xa, 4, C, 1, 1.0)
print("running after 1 (m 1.0): mean =", fmt(rm1), "var =", fmt(rv1))

# ---- Evaluation with the running statistics after the two momentum-0.1 calls: batch 2 of
# x salt 22 scale 0.25, weight 1 + Pattern(C, 23, 0.0625), bias salt 24 scale 0.0625.
xe = pattern(2 * C, 22, 0.25)
we = [1.0 + v for v in pattern(C, 23, 0.0625)]
be = pattern(C, 24, 0.0625)
print("eval y =", fmt(normalize(xe, 2, C, 1, rm, rv, we, be, EPS)))

# ---- batch_norm2d [2, 2, 2] with eps 0.5, batch 2, affine false: eps enters the variance.
x2 = pattern(2 * 2 * 4, 25, 0.25)
print("bn2d eps 0.5 y =", fmt(bn_train(x2, 2, 2, 4, None, None, 0.5)))
