#!/usr/bin/env python3
"""Independent expected values for tests/layers (run once; the numbers are pasted into tests).

Plain Python (math only), written from the definitions (PyTorch semantics, Philox-4x32-10 as
published by Salmon et al. 2011), not from gpipe's C++. Backward values come from central
differences in double precision, so they do not share the analytic derivations either.

    python3 tests/layers/oracles/layer_oracles.py
"""
import math

H = 1e-6  # double-precision central differences


def fmt(values):
    return "{" + ", ".join("%.9g" % v for v in values) + "}"


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


# ---- Linear: x [2, 3], W [2, 3], b [2].
lx = [1.0, 2.0, 3.0, -1.0, 0.5, 2.0]
lw = [0.1, -0.2, 0.3, 0.4, 0.5, -0.6]
lb = [0.01, -0.02]
ldy = [1.0, -1.0, 0.5, 2.0]


def linear(x, w, b):
    return [sum(x[r * 3 + k] * w[o * 3 + k] for k in range(3)) + b[o]
            for r in range(2) for o in range(2)]


print("linear y  =", fmt(linear(lx, lw, lb)))
print("linear dx =", fmt(fd_grad(lambda v: linear(v, lw, lb), lx, ldy)))
print("linear dW =", fmt(fd_grad(lambda v: linear(lx, v, lb), lw, ldy)))
print("linear db =", fmt(fd_grad(lambda v: linear(lx, lw, v), lb, ldy)))

# ---- Elementwise activations.
ax = [-2.0, -0.5, 0.25, 0.5, 3.0]
ady = [1.0, 2.0, 3.0, 4.0, 5.0]
acts = {
    "relu": lambda v: [max(t, 0.0) for t in v],
    "tanh": lambda v: [math.tanh(t) for t in v],
    "gelu": lambda v: [t * 0.5 * (1.0 + math.erf(t / math.sqrt(2.0))) for t in v],
}
for name, f in acts.items():
    print(name, "y  =", fmt(f(ax)))
    print(name, "dx =", fmt(fd_grad(f, ax, ady)))
gx = [-10.0, -6.0, 6.0, 10.0]
print("gelu tails y  =", fmt(acts["gelu"](gx)))
print("gelu tails dx =", fmt(fd_grad(acts["gelu"], gx, [1.0] * 4)))

# ---- LayerNorm over D = 4, eps 1e-5, with affine.
nx = [1.0, 2.0, 3.0, 4.0, -1.0, 0.0, 3.0, 10.0]
nw = [1.0, 0.5, -1.0, 2.0]
nb = [0.0, 0.1, 0.2, -0.3]
ndy = [0.1, -0.2, 0.3, 0.4, 1.0, -1.0, 0.5, 0.25]
EPS = 1e-5


def layer_norm(x, w, b, d=4):
    y = []
    for r in range(len(x) // d):
        row = x[r * d:(r + 1) * d]
        mean = sum(row) / d
        var = sum((t - mean) ** 2 for t in row) / d
        y += [(t - mean) / math.sqrt(var + EPS) * w[i] + b[i] for i, t in enumerate(row)]
    return y


print("layer_norm y  =", fmt(layer_norm(nx, nw, nb)))
print("layer_norm dx =", fmt(fd_grad(lambda v: layer_norm(v, nw, nb), nx, ndy)))
print("layer_norm dw =", fmt(fd_grad(lambda v: layer_norm(nx, v, nb), nw, ndy)))
print("layer_norm db =", fmt(fd_grad(lambda v: layer_norm(nx, nw, v), nb, ndy)))
# Large common offset: the normalized values of [1000.5, 1001, 1001.5, 1002] without affine.
ox = [1000.5, 1001.0, 1001.5, 1002.0]
print("layer_norm offset y =", fmt(layer_norm(ox, [1.0] * 4, [0.0] * 4)))

# ---- Softmax cross-entropy: logits [3, 4], targets [2, 0, 3], global batch 6.
cl = [0.5, -1.0, 2.0, 0.0, 3.0, 1.0, -2.0, 0.5, 0.1, 0.2, 0.3, 0.4]
ct = [2, 0, 3]
CG = 6


def cross_entropy(logits, targets, classes=4, global_batch=CG):
    total = 0.0
    for r, t in enumerate(targets):
        row = logits[r * classes:(r + 1) * classes]
        m = max(row)
        lse = m + math.log(sum(math.exp(v - m) for v in row))
        total += lse - row[t]
    return [total / global_batch]


print("cross_entropy loss =", fmt(cross_entropy(cl, ct)))
print("cross_entropy grad =", fmt(fd_grad(lambda v: cross_entropy(v, ct), cl, [1.0])))
big = [1000.0, 1002.0, 999.0, -1000.0, 0.0, 1000.0]
print("cross_entropy big-logit loss =",
      fmt(cross_entropy(big, [0, 2], classes=3, global_batch=2)))

# ---- MSE: output [2, 3], global batch 4 (mean over 4 * 3 elements).
my = [0.5, -1.0, 2.0, 0.0, 3.0, 1.5]
mt = [1.0, -1.0, 0.0, 0.25, 2.0, -0.5]


def mse(y, t=mt, global_batch=4, per_sample=3):
    return [sum((a - b) ** 2 for a, b in zip(y, t)) / (global_batch * per_sample)]


print("mse loss =", fmt(mse(my)))
print("mse grad =", fmt(fd_grad(mse, my, [1.0])))

# ---- Philox-4x32-10 and gpipe's stream keying.
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF


def philox(c, k):
    c = list(c)
    k = list(k)
    for _ in range(10):
        p0 = M0 * c[0]
        p1 = M1 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & MASK32, p1 & MASK32,
             ((p0 >> 32) ^ c[3] ^ k[1]) & MASK32, p0 & MASK32]
        k = [(k[0] + W0) & MASK32, (k[1] + W1) & MASK32]
    return c


# Known-answer vectors from Random123 (kat_vectors).
assert philox([0, 0, 0, 0], [0, 0]) == [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
assert philox([MASK32] * 4, [MASK32] * 2) == [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
assert philox([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0]) == \
    [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def mix_key(words):
    h = 0x6A09E667F3BCC909
    for w in words:
        h = splitmix64(h ^ splitmix64(w & MASK64))
    return h


def uniforms(seed, key, n):
    stream = mix_key(key)
    k = [seed & MASK32, (seed >> 32) & MASK32]
    out = []
    block = 0
    while len(out) < n:
        words = philox([block & MASK32, block >> 32, stream & MASK32, stream >> 32], k)
        out += [(w >> 8) / 16777216.0 for w in words]
        block += 1
    return out[:n]


DROPOUT_TAG = int.from_bytes(b"dropout", "little")
INIT_TAG = int.from_bytes(b"init", "little")
# Dropout p = 0.5 on 10 ones, seed 42, step 3, layer 2, samples 1..2 of 5 elements (offset 5).
u = uniforms(42, [DROPOUT_TAG, 3, 2], 15)[5:]
print("dropout y =", fmt([2.0 if v >= 0.5 else 0.0 for v in u]))
# Dropout p = 0.25 on x = 1..8, seed 7, step 0, layer 0, first sample of the mini-batch.
u = uniforms(7, [DROPOUT_TAG, 0, 0], 8)
print("dropout p=0.25 y =", fmt([(i + 1) / 0.75 if v >= 0.25 else 0.0 for i, v in enumerate(u)]))
# Uniform init, bound 0.5, seed 7, layer 1, parameter 0: the first 6 values.
u = uniforms(7, [INIT_TAG, 1, 0], 6)
print("init uniform =", fmt([-0.5 + 1.0 * v for v in u]))
