#!/usr/bin/env python3
"""Independent expected values for rms_norm and llama_block (llama_block_test.cc; run once, the
numbers are pasted into the test).

Plain Python (math only), written from Hugging Face transformers' definitions (LlamaRMSNorm,
LlamaRotaryEmbedding with rope_type "default", apply_rotary_pos_emb's rotate_half, repeat_kv,
eager causal attention, LlamaMLP with SiLU, LlamaDecoderLayer's two pre-norm residuals), not from
gpipe's C++. Everything is double precision; backward values are central differences, so they
share none of the analytic derivations.

Inputs are Pattern(n, salt, scale): element i is (((7 i + 3 salt) mod 17) - 8) * scale, which
the tests compute the same way.

    python3 tests/layers/oracles/llama_oracles.py
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


def rms_norm(rows, w, eps):
    out = []
    for r in rows:
        ms = sum(v * v for v in r) / len(r)
        out.append([v / math.sqrt(ms + eps) * w[i] for i, v in enumerate(r)])
    return out


def linear(rows, w, n_out, n_in):
    """x W^T without bias, W [n_out, n_in] row-major."""
    return [[sum(r[i] * w[o * n_in + i] for i in range(n_in)) for o in range(n_out)] for r in rows]


def split_rows(x, rows, width):
    return [x[r * width:(r + 1) * width] for r in range(rows)]


# ---- rms_norm: rows 4 of width 5, eps 1e-6.
RR, RD, REPS = 4, 5, 1e-6
rx = pattern(RR * RD, 1, 0.3)
rw = pattern(RD, 2, 0.2)
rdy = pattern(RR * RD, 3, 0.1)


def rms(x, w):
    return sum(rms_norm(split_rows(x, RR, RD), w, REPS), [])


print("rms_norm y       =", fmt(rms(rx, rw)))
print("rms_norm dx      =", fmt(fd_grad(lambda v: rms(v, rw), rx, rdy)))
print("rms_norm dweight =", fmt(fd_grad(lambda v: rms(rx, v), rw, rdy)))

# ---- llama_block: batch 2, T 3, D 8, num_heads 2 (head_dim 4: two rotated pairs per head),
# num_kv_heads 1 (both query heads share it), intermediate 6, rope_theta 100 (so the two pairs'
# angles differ visibly), eps 1e-5.
B, T, D, NH, NKV, I, THETA, EPS = 2, 3, 8, 2, 1, 6, 100.0, 1e-5
DH = D // NH
KVW = NKV * DH
SHAPES = [  # parameter name, element count, pattern salt, scale
    ("input_layernorm.weight", D, 20, 0.1),
    ("self_attn.q_proj.weight", D * D, 21, 0.05),
    ("self_attn.k_proj.weight", KVW * D, 22, 0.05),
    ("self_attn.v_proj.weight", KVW * D, 23, 0.05),
    ("self_attn.o_proj.weight", D * D, 24, 0.05),
    ("post_attention_layernorm.weight", D, 25, 0.1),
    ("mlp.gate_proj.weight", I * D, 26, 0.05),
    ("mlp.up_proj.weight", I * D, 27, 0.05),
    ("mlp.down_proj.weight", D * I, 28, 0.05),
]
# Norm weights around 1 (pattern + 1), so the block is not degenerate.
params = []
for name, n, salt, scale in SHAPES:
    values = pattern(n, salt, scale)
    if name.endswith("layernorm.weight"):
        values = [1.0 + v for v in values]
    params.append(values)
lx = pattern(B * T * D, 29, 0.1)
ldy = pattern(B * T * D, 30, 0.1)


def rope(vec, pos):
    """apply_rotary_pos_emb on one head: x * cos + rotate_half(x) * sin."""
    half = DH // 2
    out = [0.0] * DH
    for i in range(half):
        inv_freq = 1.0 / (THETA ** (2 * i / DH))
        c, s = math.cos(pos * inv_freq), math.sin(pos * inv_freq)
        out[i] = vec[i] * c - vec[i + half] * s
        out[i + half] = vec[i + half] * c + vec[i] * s
    return out


def silu(g):
    return g / (1.0 + math.exp(-g))


def block(x, p):
    ln1, wq, wk, wv, wo, ln2, wg, wu, wd = p
    y = []
    for b in range(B):
        rows = split_rows(x[b * T * D:(b + 1) * T * D], T, D)
        z = rms_norm(rows, ln1, EPS)
        q = linear(z, wq, D, D)
        k = linear(z, wk, KVW, D)
        v = linear(z, wv, KVW, D)
        heads = [[0.0] * D for _ in range(T)]
        for h in range(NH):
            g = h // (NH // NKV)  # repeat_kv: query head h reads key/value head g
            qh = [rope(q[t][h * DH:(h + 1) * DH], t) for t in range(T)]
            kh = [rope(k[t][g * DH:(g + 1) * DH], t) for t in range(T)]
            vh = [v[t][g * DH:(g + 1) * DH] for t in range(T)]
            for t in range(T):
                scores = [sum(qh[t][j] * kh[s][j] for j in range(DH)) / math.sqrt(DH)
                          for s in range(t + 1)]
                m = max(scores)
                e = [math.exp(sc - m) for sc in scores]
                total = sum(e)
                for j in range(DH):
                    heads[t][h * DH + j] = sum(e[s] / total * vh[s][j] for s in range(t + 1))
        attn = linear(heads, wo, D, D)
        hidden = [[rows[t][i] + attn[t][i] for i in range(D)] for t in range(T)]
        u = rms_norm(hidden, ln2, EPS)
        gate = linear(u, wg, I, D)
        up = linear(u, wu, I, D)
        act = [[silu(gate[t][i]) * up[t][i] for i in range(I)] for t in range(T)]
        mlp = linear(act, wd, D, I)
        for t in range(T):
            y += [hidden[t][i] + mlp[t][i] for i in range(D)]
    return y


print("llama_block y =", fmt(block(lx, params)))
print("llama_block dx =", fmt(fd_grad(lambda v: block(v, params), lx, ldy)))
for index, (name, _, _, _) in enumerate(SHAPES):
    def with_param(v, index=index):
        changed = list(params)
        changed[index] = v
        return block(lx, changed)
    print("llama_block d%s =" % name, fmt(fd_grad(with_param, params[index], ldy)))
