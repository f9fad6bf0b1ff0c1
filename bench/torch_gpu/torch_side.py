"""The PyTorch side: the same transformer block and models written plainly, and their timings.

The block is gpipe's transformer_block (layers/transformer_block.h) exactly: pre-LayerNorm
(eps 1e-5, affine), a fused qkv Linear with bias (queries, keys, values in that order, head h
the columns h·dh..(h+1)·dh of each), causal softmax(q kᵀ / sqrt(dh)) v through
scaled_dot_product_attention(is_causal=True), an output Linear with bias, residual; then
LayerNorm, Linear d -> 4d, exact GELU (approximate='none'), Linear 4d -> d, residual; no
dropout. bf16 is torch.autocast(bfloat16) over f32 parameters, as gpipe's training.precision BF16
keeps f32 master weights; fp32 runs with TF32 off (gpipe's CUDA default, runtime.cuda.allow_tf32).

Times are CUDA events around each call (time.perf_counter on the CPU), after `warmup` untimed
calls; the median is kept.
"""
import gc
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width, heads, eps=1e-5):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width, eps=eps)
        self.qkv = nn.Linear(width, 3 * width)
        self.attn_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width, eps=eps)
        self.fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        batch, positions, width = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(width, dim=-1)
        heads = lambda t: t.view(batch, positions, self.heads, width // self.heads).transpose(1, 2)
        o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        h = x + self.attn_proj(o.transpose(1, 2).reshape(batch, positions, width))
        return h + self.mlp_proj(F.gelu(self.fc(self.ln_2(h)), approximate="none"))


class Gpt(nn.Module):
    """embedding, learned positions, blocks, LayerNorm, head tied to the embedding."""

    def __init__(self, model):
        super().__init__()
        self.wte = nn.Embedding(model.vocab, model.width)
        self.wpe = nn.Parameter(torch.empty(model.positions, model.width))
        self.blocks = nn.ModuleList(Block(model.width, model.heads) for _ in range(model.layers))
        self.ln_f = nn.LayerNorm(model.width)
        self.head = nn.Linear(model.width, model.vocab, bias=False)
        self.head.weight = self.wte.weight
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe, std=0.02)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


class Timer:
    """Times calls on `device`: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def median_ms(self, call, repeats, warmup):
        for _ in range(warmup):
            call()
        self.sync()
        times = []
        for _ in range(repeats):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                call()
                times.append(1e3 * (time.perf_counter() - t0))
        return statistics.median(times)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


def _autocast(device, precision):
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                          enabled=precision == "bf16")


def configure(device):
    """fp32 without TF32 on both sides; one thread on the CPU, as gpipe's runtime.threads 1."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if device.type == "cpu":
        torch.set_num_threads(1)


def block_step(block_shape, device, precision, compiled):
    """A function running the block's forward and backward (every input and parameter gradient)
    on fixed random inputs, and the module (for a parameter count)."""
    torch.manual_seed(1)
    module = Block(block_shape.width, block_shape.heads).to(device)
    run = torch.compile(module) if compiled else module
    shape = (block_shape.batch, block_shape.positions, block_shape.width)
    x = torch.randn(shape, device=device, requires_grad=True)
    dy = torch.randn(shape, device=device)

    def step():
        module.zero_grad(set_to_none=True)
        x.grad = None
        with _autocast(device, precision):
            y = run(x)
        y.backward(dy)

    return step, module


def model_step(model, device, precision, compiled):
    """A function running one training step of `model` (zero_grad, forward, loss, backward,
    AdamW) on a fixed batch, and the module."""
    torch.manual_seed(1)
    module = Gpt(model).to(device)
    run = torch.compile(module) if compiled else module
    optimizer = torch.optim.AdamW(module.parameters(), lr=model.lr,
                                  weight_decay=model.weight_decay)
    ids = torch.randint(0, 256, (model.batch, model.positions + 1), device=device)
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step():
        optimizer.zero_grad(set_to_none=True)
        with _autocast(device, precision):
            loss = run(inputs, targets)
        loss.backward()
        optimizer.step()

    return step, module


def time_step(make, device, repeats, warmup):
    """(median ms, compile-and-first-call seconds) of the step `make()` returns."""
    timer = Timer(device)
    step, _ = make()
    t0 = time.perf_counter()
    step()  # compiles, when compiled
    timer.sync()
    first_s = time.perf_counter() - t0
    return timer.median_ms(step, repeats, max(0, warmup - 1)), first_s


def kernel_launches(step, device):
    """Kernels one call of `step` launches, counted by torch.profiler (the step runs once before,
    so lazy set-up is not counted): GPU kernel records, memcpy and memset excluded; None on the
    CPU."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA
               and not e.name.startswith(("Memcpy", "Memset", "[memory]"))]
    if kernels:
        return len(kernels)
    # Some builds list only the runtime calls: count the launches themselves.
    return sum(1 for e in prof.events() if "LaunchKernel" in e.name) or None


def parameter_count(module):
    return sum(p.numel() for p in module.parameters())  # tied weights once


def environment(device):
    facts = {"torch": torch.__version__, "cuda": torch.version.cuda or "none"}
    facts["device_name"] = (torch.cuda.get_device_name(device) if device.type == "cuda"
                            else "CPU (1 thread)")
    return facts


def release(device):
    """Frees what the last workload left: compiled graphs (they hold their modules) and, on a
    GPU, the caching allocator's blocks, so that gpipe's runs that follow find the memory."""
    torch._dynamo.reset()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
