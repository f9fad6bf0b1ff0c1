"""Writes the Hugging Face reference runs that e2e_llama_hf_reference_test compares gpipe against.

Run once by a developer (the test itself needs no Python). It needs torch, transformers,
safetensors and numpy, which it does not install; put them into a virtual environment with the
repository's light PyTorch installer, then add the rest:
    python3 bench/torch_compare/install_torch.py ~/.cache/gpipe-oracle-venv
    ~/.cache/gpipe-oracle-venv/bin/pip install transformers safetensors numpy
    ~/.cache/gpipe-oracle-venv/bin/python tests/e2e/oracles/llama_hf_oracle.py \
        tests/e2e/testdata/llama_hf
and check that what is committed is what this script computes (it writes nothing; every tensor
bit for bit and every metadata value equal, the initial files regenerated from the seeds and the
references recomputed from the committed init.safetensors and tokens.u16, loaded into models made
from other random values; not byte for byte, since safetensors orders the header's metadata as it
likes):
    ~/.cache/gpipe-oracle-venv/bin/python tests/e2e/oracles/llama_hf_oracle.py --check \
        tests/e2e/testdata/llama_hf
Written with torch 2.15.0 and transformers 5.24.0 (each reference file's metadata names them).

What it writes into OUT:
  init.safetensors     a tiny LlamaForCausalLM (float32) as transformers initializes it
                       (initializer_range 0.2, so attention is far from uniform and RoPE shows),
                       with its RMSNorm weights then drawn from U(0.5, 1.5) so that they are not
                       all ones; the model's parameters under their Hugging Face names.
  tokens.u16           NUM_TOKENS little-endian uint16 token ids drawn from a seeded generator.
  llama_{sgd,adamw}.pbtxt, embed_head_{sgd,adamw}.pbtxt
                       the gpipe plans: the Llama model (model.embed_tokens, model.layers.N,
                       model.norm, lm_head, so gpipe's parameter names are transformers') and the
                       same embedding and head without the decoder (layers gpipe already has: it
                       checks this harness — data order, loss, schedule, clipping, optimizer —
                       apart from the Llama layers).
  llama_{sgd,adamw}_expected.safetensors, embed_head_{sgd,adamw}_expected.safetensors
                       the parameters after STEPS steps; metadata "lr", "loss" and "grad_norm":
                       each step's learning rate, mini-batch loss (before that step's update) and
                       gradient norm before clipping, comma-separated, as Python's repr.
  llama_first_step.safetensors, embed_head_first_step.safetensors
                       the logits [BATCH, SEQ_LEN, VOCAB] of the first mini-batch under the initial
                       weights; metadata "loss" (their mean cross-entropy) and "token_ids" (the
                       mini-batch's inputs, row-major, comma-separated).

Before writing, the script stops when a reference would be weak or fragile: transformers' logits
must match plan.proto's llama_block formula computed here in float64 NumPy (RoPE rotate-half,
query head h reading key/value head h // 2, causal softmax, SiLU gating; measured 4.2e-7 of the
largest logit; using h % 2, rope_theta 10000, eps 1e-6 or interleaved pairs instead moves the
logits by 1.3, 5.8e-2, 3.0e-4 and 0.96 of it); every tensor must move by over 100 times the test's
tolerance; each clip_grad_norm must act on some steps and not on all; and the same run in float64
(as far as transformers goes: it keeps RMSNorm, the softmax and the RoPE tables in float32) must
end within 1e-6 (a tenth of the test's tolerance) of the float32 one, which is why the
learning rates are moderate: at SGD lr 0.5 or AdamW lr 0.01 float32 rounding alone moved the
weights by 2.6e-6 to 7.5e-6 of their largest value.

The forward and backward are transformers' LlamaForCausalLM (eager attention), the optimizers
torch.optim's, the clipping torch.nn.utils.clip_grad_norm_. What gpipe defines is reproduced
exactly from its code:
  samples   (runtime/data/batch_sampler.cc, data.shuffle false) step s uses samples
            (s * BATCH + j) % N for j = 0..BATCH-1, in that order; (runtime/data/token_windows.cc,
            tokens_dataset.cc) with eval_fraction 0 the training split is every token and N =
            NUM_TOKENS - SEQ_LEN; sample i's input is tokens [i, i + SEQ_LEN), its target tokens
            [i + 1, i + SEQ_LEN + 1). NUM_TOKENS is chosen so that the last step wraps around.
  loss      (layers/softmax_cross_entropy.cc) the mean over every sample and position of the
            mini-batch: F.cross_entropy(logits.view(-1, V), targets.view(-1)) (not the model's
            own shifted-label loss).
  lr        (runtime/train/lr_schedule.cc) update u (all updates apply): peak * (u + 1) / warmup
            while u < warmup, then peak * (min + (1 - min) * 0.5 * (1 + cos(pi * progress))) with
            progress = (u - warmup) / (decay_steps - warmup), decay_steps = training.steps; set in
            every param group before the step.
  clipping  (runtime/coord/coordinator_gate.cc, runtime/exec/gradient_norm_terms.cc) the L2 norm
            over every gradient; when C / (norm + 1e-6) < 1 every gradient is multiplied by it:
            torch.nn.utils.clip_grad_norm_(params, C).
  optimizer (runtime/train/sgd.cc, adam.cc) torch.optim.SGD / AdamW; AdamW's
            decay_only_matrices: parameters of rank >= 2 decay, the rank-1 norm weights form a
            second param group with weight_decay 0.
"""
import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

# The model: every count small, so each fixture file stays within tens of KB, yet 4 query heads
# share 2 key/value heads (query head h reads key/value head h // 2, which h % 2 would not give),
# and rope_theta and eps are not gpipe's defaults (10000, 1e-6), so the plan's values must be used.
VOCAB = 32
HIDDEN = 16
LAYERS = 4  # with the embedding, the norm and the head: 7 layers; at K = 4 one block per stage
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 32
ROPE_THETA = 500.0
EPS = 1e-5
INIT_RANGE = 0.2
# The data and the run.
SEQ_LEN = 8
BATCH = 4
STEPS = 4
NUM_TOKENS = 22  # N = 14 windows: step 3 takes samples 12, 13, 0, 1
MODEL_SEED = 1234
TOKEN_SEED = 29
TRAIN_SEED = 5  # training.seed: no randomness left in these runs (no dropout, no shuffle)
LR_SCHEDULE = dict(warmup_steps=2, min_lr_ratio=0.1)  # COSINE, decay_steps = STEPS

# Each scenario: the plan's optimizer, its clip_grad_norm for each model, and the same optimizer in
# torch. Each clip_grad_norm is active on some steps and not on others (the script checks it).
SCENARIOS = {
    "sgd": dict(
        optimizer="sgd { lr: 0.05 momentum: 0.9 weight_decay: 0.01 }",
        peak_lr=0.05,
        clip={"llama": 3.0, "embed_head": 0.34},
        make=lambda groups: torch.optim.SGD(groups, lr=0.05, momentum=0.9, weight_decay=0.01,
                                            foreach=False),
        decay_only_matrices=False,
    ),
    "adamw": dict(
        optimizer=("adamw { lr: 0.002 beta1: 0.9 beta2: 0.95 eps: 1e-08 weight_decay: 0.1 "
                   "decay_only_matrices: true }"),
        peak_lr=0.002,
        clip={"llama": 3.5, "embed_head": 0.34},
        make=lambda groups: torch.optim.AdamW(groups, lr=0.002, betas=(0.9, 0.95), eps=1e-8,
                                              weight_decay=0.1, foreach=False),
        decay_only_matrices=True,
    ),
}


def fail(message):
    print(f"llama_hf_oracle: {message}", file=sys.stderr)
    sys.exit(1)


# ------------------------------------------------------------------------------------------------
# What gpipe defines: samples, learning rate.


def lr_at(peak, applied):
    """runtime/train/lr_schedule.cc's LrAt for COSINE, operation for operation in double."""
    warmup = LR_SCHEDULE["warmup_steps"]
    decay_steps = STEPS
    minimum = LR_SCHEDULE["min_lr_ratio"]
    if applied < warmup:
        return peak * float(applied + 1) / float(warmup)
    if applied >= decay_steps:
        return peak * minimum
    progress = float(applied - warmup) / float(decay_steps - warmup)
    return peak * (minimum + (1.0 - minimum) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def batch(tokens, step):
    """Inputs and targets [BATCH, SEQ_LEN] (int64) of training step `step`."""
    windows = len(tokens) - SEQ_LEN  # eval_fraction 0: the whole file is the training split
    starts = [(step * BATCH + j) % windows for j in range(BATCH)]
    x = np.stack([tokens[i:i + SEQ_LEN] for i in starts]).astype(np.int64)
    y = np.stack([tokens[i + 1:i + SEQ_LEN + 1] for i in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


# ------------------------------------------------------------------------------------------------
# The models.


def llama_config():
    from transformers import LlamaConfig
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM, hidden_act="silu", max_position_embeddings=2 * SEQ_LEN,
        initializer_range=INIT_RANGE, rms_norm_eps=EPS, tie_word_embeddings=False,
        attention_bias=False, mlp_bias=False, attention_dropout=0.0, rope_theta=ROPE_THETA,
        rope_scaling=None, pretraining_tp=1)
    config._attn_implementation = "eager"
    return config


def new_llama(seed):
    from transformers import LlamaForCausalLM
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config()).to(torch.float32)
    model.config._attn_implementation = "eager"
    model.train()  # no dropout is configured; train mode as in gpipe's training forward
    # RoPE as plan.proto states it: inv_freq_i = rope_theta^(-2i/head_dim).
    expected = ROPE_THETA ** (-np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM)
    inv_freq = model.model.rotary_emb.inv_freq.double().numpy()
    if not np.allclose(inv_freq, expected, rtol=1e-6, atol=0):
        fail(f"transformers' rotary inv_freq {inv_freq} is not rope_theta^(-2i/d) {expected}: "
             "this transformers version did not take rope_theta")
    return model


def parameters_of(model):
    """The trainable parameters by Hugging Face name (no buffers such as rotary inv_freq)."""
    return {name: p.detach().clone().contiguous() for name, p in model.named_parameters()}


def llama_logits(model, x):
    return model(input_ids=x, use_cache=False).logits


class EmbedHead(torch.nn.Module):
    """The Llama model without its decoder: model.embed_tokens then lm_head."""

    def __init__(self):
        super().__init__()
        self.model = torch.nn.Module()
        self.model.embed_tokens = torch.nn.Embedding(VOCAB, HIDDEN)
        self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, x):
        return self.lm_head(self.model.embed_tokens(x))


def embed_head_logits(model, x):
    return model(x)


# ------------------------------------------------------------------------------------------------
# An independent check of the semantics: plan.proto's llama_block formula in float64 NumPy.


def proto_forward(weights, x):
    """Logits [B, T, V] in float64 of the formulas written in proto/plan.proto."""
    w = {k: v.double().numpy() for k, v in weights.items()}

    def rms(h, weight):
        return h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + EPS) * weight

    def rope(t):  # t [B, T, heads, d]: pairs (i, i + d/2) rotated by position * inv_freq_i
        half = HEAD_DIM // 2
        inv_freq = ROPE_THETA ** (-2.0 * np.arange(half) / HEAD_DIM)
        angle = np.arange(t.shape[1])[:, None] * inv_freq[None, :]  # [T, half]
        cos, sin = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
        a, b = t[..., :half], t[..., half:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    ids = x.numpy()
    b, t = ids.shape
    h = w["model.embed_tokens.weight"][ids]
    causal = np.triu(np.full((t, t), -np.inf), k=1)
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        z = rms(h, w[p + "input_layernorm.weight"])
        q = rope((z @ w[p + "self_attn.q_proj.weight"].T).reshape(b, t, HEADS, HEAD_DIM))
        k = rope((z @ w[p + "self_attn.k_proj.weight"].T).reshape(b, t, KV_HEADS, HEAD_DIM))
        v = (z @ w[p + "self_attn.v_proj.weight"].T).reshape(b, t, KV_HEADS, HEAD_DIM)
        heads = []
        for head in range(HEADS):
            kv = head // (HEADS // KV_HEADS)
            scores = np.einsum("btd,bsd->bts", q[:, :, head], k[:, :, kv]) / np.sqrt(HEAD_DIM)
            scores = scores + causal
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            heads.append(np.einsum("bts,bsd->btd", probs, v[:, :, kv]))
        h = h + np.concatenate(heads, axis=-1) @ w[p + "self_attn.o_proj.weight"].T
        u = rms(h, w[p + "post_attention_layernorm.weight"])
        gate = u @ w[p + "mlp.gate_proj.weight"].T
        up = u @ w[p + "mlp.up_proj.weight"].T
        h = h + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    return rms(h, w["model.norm.weight"]) @ w["lm_head.weight"].T


# ------------------------------------------------------------------------------------------------
# Training as gpipe does it.


def param_groups(model, decay_only_matrices):
    params = list(model.parameters())
    if not decay_only_matrices:
        return [{"params": params}]
    return [{"params": [p for p in params if p.dim() >= 2]},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def train(model, logits_of, scenario, clip, tokens):
    """STEPS steps of `scenario` clipped at `clip`; returns the final parameters and each step's
    records."""
    opt = scenario["make"](param_groups(model, scenario["decay_only_matrices"]))
    params = list(model.parameters())
    lrs, losses, norms = [], [], []
    for step in range(STEPS):
        x, y = batch(tokens, step)
        lr = lr_at(scenario["peak_lr"], step)  # every step applies: `step` updates came before
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        logits = logits_of(model, x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, clip, foreach=False)
        if not (torch.isfinite(loss) and torch.isfinite(norm)):
            fail(f"step {step}: non-finite loss or gradient norm")
        opt.step()
        lrs.append(lr)
        losses.append(float(loss.detach()))
        norms.append(float(norm))
    return parameters_of(model), dict(lr=lrs, loss=losses, grad_norm=norms)


def csv(values):
    return ",".join(repr(float(v)) for v in values)


# ------------------------------------------------------------------------------------------------
# Plans.

HEADER = """\
# Written by tests/e2e/oracles/llama_hf_oracle.py: do not edit, change the script and rerun it.
# PyTorch trained {what}
# from init.safetensors on tokens.u16; {expected} holds where it ended.
# e2e_llama_hf_reference_test trains this plan at several stage counts with --init-from and
# compares.
"""


def plan_text(model_name, scenario_name, with_decoder):
    scenario = SCENARIOS[scenario_name]
    clip = scenario["clip"][model_name]
    layers = [f'  layers {{ name: "model.embed_tokens" embedding {{ num_embeddings: {VOCAB} '
              f'embedding_dim: {HIDDEN} init_std: {INIT_RANGE!r} }} }}']
    if with_decoder:
        for layer in range(LAYERS):
            layers.append(
                f'  layers {{ name: "model.layers.{layer}" llama_block {{ num_heads: {HEADS} '
                f'num_kv_heads: {KV_HEADS} intermediate_size: {INTERMEDIATE} '
                f'rope_theta: {ROPE_THETA!r} eps: {EPS!r} }} }}')
        layers.append(f'  layers {{ name: "model.norm" rms_norm {{ eps: {EPS!r} }} }}')
    layers.append(f'  layers {{ name: "lm_head" linear {{ out_features: {VOCAB} bias: false }} }}')
    what = ("transformers' LlamaForCausalLM" if with_decoder else
            "the embedding and head of that LlamaForCausalLM alone (no decoder)")
    expected = f"{model_name}_{scenario_name}_expected.safetensors"
    return HEADER.format(what=what, expected=expected) + (
        f'name: "{model_name}-{scenario_name}"\n'
        "model {\n"
        f"  input {{ shape: [{SEQ_LEN}] type: INT64 }}\n" + "\n".join(layers) + "\n"
        "  loss { softmax_cross_entropy {} }\n"
        "}\n"
        "pipeline { stages: 1 micro_batches: 1 }\n"
        "training {\n"
        f"  global_batch: {BATCH}\n"
        f"  steps: {STEPS}\n"
        f"  seed: {TRAIN_SEED}\n"
        f"  optimizer {{ {scenario['optimizer']} }}\n"
        f"  lr_schedule {{ warmup_steps: {LR_SCHEDULE['warmup_steps']} decay: COSINE "
        f"min_lr_ratio: {LR_SCHEDULE['min_lr_ratio']!r} }}\n"
        f"  clip_grad_norm: {clip!r}\n"
        "}\n"
        'data { tokens { path: "tokens.u16" dtype: UINT16 eval_fraction: 0 } shuffle: false }\n'
        "runtime { log_every: 0 timeouts { wait_seconds: 60 } }\n")


# ------------------------------------------------------------------------------------------------
# The fixtures.


def make_initial(out):
    """Writes init.safetensors and tokens.u16 into `out`."""
    model = new_llama(MODEL_SEED)
    generator = torch.Generator().manual_seed(MODEL_SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                p.copy_(torch.rand(p.shape, generator=generator) + 0.5)
    save_file(parameters_of(model), os.path.join(out, "init.safetensors"),
              metadata={"format": "pt"})
    tokens = np.random.default_rng(TOKEN_SEED).integers(0, VOCAB, size=NUM_TOKENS)
    tokens.astype("<u2").tofile(os.path.join(out, "tokens.u16"))


def versions():
    import transformers
    return {"torch": torch.__version__, "transformers": transformers.__version__}


def make_references(source, out):
    """From source/init.safetensors and source/tokens.u16, writes everything else into `out`."""
    torch.set_num_threads(1)
    init = load_file(os.path.join(source, "init.safetensors"))
    tokens = np.fromfile(os.path.join(source, "tokens.u16"), dtype="<u2").astype(np.int64)
    if len(tokens) != NUM_TOKENS or tokens.max() >= VOCAB:
        fail("tokens.u16 does not hold the ids this script writes")

    def fresh_llama():
        model = new_llama(MODEL_SEED + 7)  # other random values, then the file's
        model.load_state_dict(init, strict=True)
        return model

    def fresh_embed_head():
        model = EmbedHead()
        model.load_state_dict({k: init[k] for k in ("model.embed_tokens.weight",
                                                    "lm_head.weight")}, strict=True)
        return model

    # The first mini-batch's logits and loss under the initial weights.
    x, y = batch(tokens, 0)
    for model_name, make_model, logits_of in [("llama", fresh_llama, llama_logits),
                                              ("embed_head", fresh_embed_head, embed_head_logits)]:
        with torch.no_grad():
            logits = logits_of(make_model(), x).contiguous()
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        print(f"{model_name} first mini-batch: loss {float(loss)!r}")
        if model_name == "llama":
            reference = proto_forward(init, x)
            gap = np.abs(logits.double().numpy() - reference).max() / np.abs(reference).max()
            print(f"  max |transformers - plan.proto's formula in float64| / max |logits| = "
                  f"{gap:.2e}")
            if gap > 1e-6:
                fail("transformers' LlamaForCausalLM does not compute plan.proto's llama_block "
                     "formula")
        save_file({"logits": logits}, os.path.join(out, f"{model_name}_first_step.safetensors"),
                  metadata={"loss": repr(float(loss)), "token_ids": csv(x.reshape(-1).tolist()),
                            **versions()})

    for model_name, make_model, logits_of, with_decoder in [
            ("llama", fresh_llama, llama_logits, True),
            ("embed_head", fresh_embed_head, embed_head_logits, False)]:
        for scenario_name, scenario in SCENARIOS.items():
            name = f"{model_name}_{scenario_name}"
            clip = scenario["clip"][model_name]
            final, records = train(make_model(), logits_of, scenario, clip, tokens)
            moved = min(float((final[k] - init[k]).abs().max() / final[k].abs().max())
                        for k in final)
            # The same run in float64 (where transformers allows: it keeps RMSNorm, the attention
            # softmax and the RoPE tables in float32): how far float32 rounding alone moves the
            # result, against the test's 1e-5.
            final64, records64 = train(make_model().double(), logits_of, scenario, clip, tokens)
            rounding, worst = max((float((final[k].double() - final64[k]).abs().max() /
                                         final64[k].abs().max()), k) for k in final)
            scalars = max(abs(a - b) / abs(b) for key in ("loss", "grad_norm")
                          for a, b in zip(records[key], records64[key]))
            print(f"{name}: loss {records['loss']}, grad norm {records['grad_norm']}, "
                  f"clip {clip}, lr {records['lr']}; every tensor moved >= {moved:.2e} of its "
                  f"max; float32 against float64: weights {rounding:.1e} ({worst}), loss and norms "
                  f"{scalars:.1e}")
            if moved < 100 * 1e-5:
                fail(f"{name}: a tensor moved less than 100x the test's tolerance")
            if max(rounding, scalars) > 1e-6:
                fail(f"{name}: float32 rounding alone moves the result by over a tenth of the "
                     "test's tolerance")
            clipped = [n > clip for n in records["grad_norm"]]
            if all(clipped) or not any(clipped):
                fail(f"{name}: clip_grad_norm {clip} should act on some steps, not on all")
            save_file(final, os.path.join(out, f"{name}_expected.safetensors"),
                      metadata={"lr": csv(records["lr"]), "loss": csv(records["loss"]),
                                "grad_norm": csv(records["grad_norm"]), **versions()})
            with open(os.path.join(out, f"{name}.pbtxt"), "w") as f:
                f.write(plan_text(model_name, scenario_name, with_decoder))


FILES = ["init.safetensors", "tokens.u16"] + [
    f"{m}_{name}" for m in ("llama", "embed_head")
    for name in ["first_step.safetensors"] + [f"{s}{suffix}" for s in SCENARIOS
                                              for suffix in ("_expected.safetensors", ".pbtxt")]]


def same_safetensors(a, b):
    with safe_open(a, "pt") as fa, safe_open(b, "pt") as fb:
        if set(fa.keys()) != set(fb.keys()) or fa.metadata() != fb.metadata():
            return False
        return all(torch.equal(fa.get_tensor(k).view(torch.int32),
                               fb.get_tensor(k).view(torch.int32)) for k in fa.keys())


def check(directory):
    """Recomputes every reference from the committed init and tokens; compares bit for bit."""
    with tempfile.TemporaryDirectory() as scratch:
        make_initial(scratch)  # the generator is deterministic: the same initial files again
        make_references(directory, scratch)
        bad = []
        for name in FILES:
            ours, theirs = os.path.join(scratch, name), os.path.join(directory, name)
            if not os.path.exists(theirs):
                bad.append(f"{name} (missing)")
            elif name.endswith(".safetensors"):
                if not same_safetensors(ours, theirs):
                    bad.append(name)
            elif open(ours, "rb").read() != open(theirs, "rb").read():
                bad.append(name)
    if bad:
        fail("differs from what this script computes: " + ", ".join(bad))
    print(f"check: all {len(FILES)} files in {directory} are what this script computes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the fixture directory, e.g. tests/e2e/testdata/llama_hf")
    parser.add_argument("--check", action="store_true",
                        help="recompute everything and compare with the files in OUT")
    args = parser.parse_args()
    if args.check:
        check(args.out)
        return
    os.makedirs(args.out, exist_ok=True)
    make_initial(args.out)
    make_references(args.out, args.out)


if __name__ == "__main__":
    main()
