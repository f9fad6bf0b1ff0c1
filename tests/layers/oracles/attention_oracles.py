#!/usr/bin/env python3
"""Independent expected values for the transformer layers' tests (embedding_test.cc and
attention_test.cc; run once, the numbers are pasted into the tests).

Plain Python (math only), written from the definitions (torch.nn.Embedding, GPT-2's wpe and its
causal self-attention: c_attn, split into q, k, v, view(B, T, H, D/H).transpose(1, 2), masked
softmax(q k^T / sqrt(D/H)) v, heads concatenated, c_proj), not from gpipe's C++. Backward values
come from central differences in double precision, so they do not share the analytic
derivations either.

Inputs are Pattern(n, salt, scale): element i is (((7 i + 3 salt) mod 17) - 8) * scale, which
the tests compute the same way.

    python3 tests/layers/oracles/attention_oracles.py
"""
import math

H = 1e-6  # double-precision central differences


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


# ---- Embedding: num_embeddings 5, embedding_dim 3, ids [2, 3].
EV, ED = 5, 3
ids = [1, 4, 1, 0, 2, 4]
ew = pattern(EV * ED, 1, 0.1)
edy = pattern(len(ids) * ED, 2, 0.1)


def embedding(w):
    return [w[i * ED + j] for i in ids for j in range(ED)]


print("embedding y       =", fmt(embedding(ew)))
print("embedding dweight =", fmt(fd_grad(embedding, ew, edy)))

# ---- PositionalEmbedding: max_positions 4, input [2, 3, 2].
PB, PT, PD, PMAX = 2, 3, 2, 4
px = pattern(PB * PT * PD, 3, 0.1)
pw = pattern(PMAX * PD, 4, 0.1)
pdy = pattern(PB * PT * PD, 5, 0.1)


def positional(x, w):
    return [x[(b * PT + t) * PD + j] + w[t * PD + j]
            for b in range(PB) for t in range(PT) for j in range(PD)]


print("positional y       =", fmt(positional(px, pw)))
print("positional dx      =", fmt(fd_grad(lambda v: positional(v, pw), px, pdy)))
print("positional dweight =", fmt(fd_grad(lambda v: positional(px, v), pw, pdy)))

# ---- CausalSelfAttention: batch 2, T 3, D 4, 2 heads, with biases.
B, T, D, NH = 2, 3, 4, 2
DH = D // NH
ax = pattern(B * T * D, 6, 0.1)
aw_qkv = pattern(3 * D * D, 7, 0.05)
ab_qkv = pattern(3 * D, 8, 0.05)
aw_proj = pattern(D * D, 9, 0.05)
ab_proj = pattern(D, 10, 0.05)
ady = pattern(B * T * D, 11, 0.1)


def linear(rows, w, b, n_out, n_in):
    return [[sum(r[i] * w[o * n_in + i] for i in range(n_in)) + b[o] for o in range(n_out)]
            for r in rows]


def attention(x, w_qkv, b_qkv, w_proj, b_proj):
    y = []
    for b in range(B):
        rows = [x[(b * T + t) * D:(b * T + t + 1) * D] for t in range(T)]
        qkv = linear(rows, w_qkv, b_qkv, 3 * D, D)
        heads = [[0.0] * D for _ in range(T)]
        for h in range(NH):
            q = [r[h * DH:(h + 1) * DH] for r in qkv]
            k = [r[D + h * DH:D + (h + 1) * DH] for r in qkv]
            v = [r[2 * D + h * DH:2 * D + (h + 1) * DH] for r in qkv]
            for t in range(T):
                # Position t attends to s <= t only.
                scores = [sum(q[t][j] * k[s][j] for j in range(DH)) / math.sqrt(DH)
                          for s in range(t + 1)]
                m = max(scores)
                e = [math.exp(sc - m) for sc in scores]
                z = sum(e)
                p = [ei / z for ei in e]
                for j in range(DH):
                    heads[t][h * DH + j] = sum(p[s] * v[s][j] for s in range(t + 1))
        for r in linear(heads, w_proj, b_proj, D, D):
            y += r
    return y


print("attention y     =", fmt(attention(ax, aw_qkv, ab_qkv, aw_proj, ab_proj)))
print("attention dx    =",
      fmt(fd_grad(lambda v: attention(v, aw_qkv, ab_qkv, aw_proj, ab_proj), ax, ady)))
print("attention dWqkv =",
      fmt(fd_grad(lambda v: attention(ax, v, ab_qkv, aw_proj, ab_proj), aw_qkv, ady)))
print("attention dbqkv =",
      fmt(fd_grad(lambda v: attention(ax, aw_qkv, v, aw_proj, ab_proj), ab_qkv, ady)))
print("attention dWproj =",
      fmt(fd_grad(lambda v: attention(ax, aw_qkv, ab_qkv, v, ab_proj), aw_proj, ady)))
print("attention dbproj =",
      fmt(fd_grad(lambda v: attention(ax, aw_qkv, ab_qkv, aw_proj, v), ab_proj, ady)))
