"""Writes the PyTorch reference run that e2e_torch_reference_test compares gpipe against.

Run once (needs torch, numpy, safetensors; the test itself needs none of them):
    python3 tests/e2e/oracles/torch_reference.py tests/e2e/testdata/torch_reference

It trains, in PyTorch on one process, the MLP of testdata/torch_reference/plan.pbtxt from the
initial weights it writes (init.safetensors) on the data it writes (data/x.npy, data/y.npy):
mini-batch mean cross-entropy, steps taking samples [s*B, (s+1)*B) modulo N in order, with
torch.optim.SGD (momentum, nesterov, weight decay) and torch.optim.AdamW. The final weights are
written as sgd_final.safetensors and adamw_final.safetensors.
"""
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

OUT = sys.argv[1]
STEPS, BATCH, N, IN, CLASSES = 5, 32, 64, 10, 4

torch.manual_seed(1234)
rng = np.random.default_rng(99)
x = rng.standard_normal((N, IN)).astype(np.float32)
y = rng.integers(0, CLASSES, size=N).astype(np.int64)
os.makedirs(os.path.join(OUT, "data"), exist_ok=True)
np.save(os.path.join(OUT, "data", "x.npy"), x)
np.save(os.path.join(OUT, "data", "y.npy"), y)


def model():
    return torch.nn.ModuleDict({
        "fc1": torch.nn.Linear(IN, 32),
        "act1": torch.nn.GELU(),
        "fc2": torch.nn.Linear(32, 24),
        "norm2": torch.nn.LayerNorm(24),
        "act2": torch.nn.Tanh(),
        "fc3": torch.nn.Linear(24, 16, bias=False),
        "act3": torch.nn.ReLU(),
        "fc4": torch.nn.Linear(16, CLASSES),
    })


def forward(m, inputs):
    h = inputs
    for layer in m.values():
        h = layer(h)
    return h


init = model()
with torch.no_grad():  # non-trivial LayerNorm parameters, so they are exercised too
    init["norm2"].weight.uniform_(0.5, 1.5)
    init["norm2"].bias.uniform_(-0.2, 0.2)
init_state = {k: v.detach().clone().contiguous() for k, v in init.state_dict().items()}
save_file(init_state, os.path.join(OUT, "init.safetensors"))

for name, make_optimizer in [
    ("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("adamw", lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
]:
    m = model()
    m.load_state_dict(init_state)
    opt = make_optimizer(m.parameters())
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for step in range(STEPS):
        idx = [(step * BATCH + i) % N for i in range(BATCH)]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(m, xt[idx]), yt[idx])
        loss.backward()
        opt.step()
        print(name, "step", step, "loss", float(loss))
    final = {k: v.detach().clone().contiguous() for k, v in m.state_dict().items()}
    save_file(final, os.path.join(OUT, f"{name}_final.safetensors"))
