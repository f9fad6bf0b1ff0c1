"""The markdown section the comparison prints: a paragraph of conditions, then two tables.

Ratios are torch / gpipe, so > 1 means gpipe is faster. "µs per micro-batch per stage" is the
step time divided by the M x K (micro-batch, stage) pairs of a step, each one forward and one
backward: the cost of moving one micro-batch through one stage when the layers cost nothing.
Returns False (after printing) when the two sides did not build the same parameter count.
"""


def _fmt_ms(ms):
    return "—" if ms is None else f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def _ratio(a, b):
    return "—" if a is None or b is None or b <= 0 else f"{a / b:.2f}×"


def _per_pair_us(ms, cell):
    return "—" if ms is None else f"{1e3 * ms / (cell.micro_batches * cell.stages):.0f}"


def _count_line(facts, model_key, label):
    expected = facts["parameters"][model_key]
    torch_seen = facts["counted"][model_key, "torch"]
    gpipe_seen = facts["counted"][model_key, "gpipe"]
    same = torch_seen == gpipe_seen == {expected}
    show = lambda seen: ", ".join(f"{n:,}" for n in sorted(seen)) or "not run"
    verdict = "same on both sides" if same else "**MISMATCH: the sides do not run the same model**"
    return same, (f"{label}: PyTorch built {show(torch_seen)} parameters (summed over its "
                  f"stage modules), gpipe {show(gpipe_seen)} (`gpipe-plan check`), expected "
                  f"{expected:,}: {verdict}.")


def print_section(facts, real_rows, overhead_rows):
    mlp, tiny = facts["mlp"], facts["tiny"]
    same_mlp, mlp_line = _count_line(facts, "mlp", "Real layers")
    same_tiny, tiny_line = _count_line(facts, "tiny", "Zero-cost layers")
    sim = facts["sim_error"] is None
    print("## Comparison with PyTorch pipelining\n")
    print(
        f"PyTorch {facts.get('torch', '?')} from PyPI (installed: {facts['install'] or 'reused'}), "
        f"`torch.distributed.pipelining` (`PipelineStage` with `ScheduleGPipe` or "
        f"`Schedule1F1B`, gloo over loopback, one process per stage started together as "
        f"torchrun would, `torch.set_num_threads(1)` and OMP/MKL threads 1, CPU), against gpipe "
        f"{facts['commit']} (`gpipe-run`, Open MPI, CPU backend, `runtime {{ threads: 1 }}`, "
        f"`remat: NEVER` so neither side recomputes), Python {facts['python']}. Same K processes "
        f"on the same {facts['cores']}-core machine, none bound to a core; load average "
        f"{facts['load_start']:.1f} at the start and {facts['load_end']:.1f} at the end (the "
        f"machine is shared: read ratios, not absolute times). Model: {mlp.layers} × Linear "
        f"{mlp.width} → {mlp.width} "
        + (f"each followed by ReLU, mean squared error against {mlp.width} regression targets "
           f"(gpipe: synthetic teacher data; PyTorch: one fixed random tensor)"
           if mlp.loss == "mse" else
           f"with ReLU between, softmax cross-entropy over the last layer's {mlp.classes} "
           f"outputs")
        + f", SGD (lr 0.01), global batch {mlp.batch}, fp32, the "
        f"layers cut into K equal contiguous stages on both sides. Each cell runs PyTorch then "
        f"gpipe, {facts['repeats']} run(s) per side alternating, and each side's time is the "
        f"lowest of its runs' medians (the run least disturbed by the shared machine); a run's "
        f"median is over {facts['steps']} steps after "
        f"{facts['warmup']} warm-up step(s) ({facts['overhead_steps']} after "
        f"{facts['overhead_warmup']} for zero-cost layers): PyTorch's is rank 0's wall time "
        f"of `zero_grad` + `schedule.step` + `optimizer.step`; gpipe's is `step_ms` of "
        f"`--metrics-out` (rank 0, from the step command to the step's end, update included). "
        f"PyTorch's inputs are one fixed tensor; gpipe's first stage draws synthetic samples. "
        f"The matrix products are MKL's in PyTorch (its PyPI build) and oneDNN's in gpipe, so "
        f"the real-layer ratio holds the libraries' difference as well as the runtimes'; the "
        f"zero-cost table isolates the runtimes.")
    print()
    zero_torch = (f"on PyTorch, the same {tiny.layers}-layer structure at width {tiny.width} "
                  f"(Linear {tiny.width} → {tiny.width}, the last {tiny.width} → {tiny.classes}, "
                  f"micro-batches of {tiny.batch}/M rows): every op is a real op of next to no "
                  f"arithmetic, so what remains is eager dispatch, autograd, the schedule's "
                  f"bookkeeping and gloo's sends and receives of a few bytes (`nn.Identity` with a "
                  f"dummy parameter would do no better: pipelining needs a stage output that "
                  f"requires grad, and a width-1 Linear is the cheapest such module)")
    if sim:
        zero_gpipe = ("on gpipe, `runtime { device: SIM sim { peak_gflops: 1e12 loss_us: 0 "
                      "optimizer_us: 0 link_latency_us: 0 link_gbps: 1e9 } }` on the same "
                      "layers, so each op, loss, update and transfer costs ~0 and the time is "
                      "the runtime's own (processes, MPI messages, step protocol, schedule); "
                      "the *gpipe CPU* columns run the same width-1 layers for real on the CPU "
                      "backend, the like-for-like counterpart of PyTorch's row")
    else:
        zero_gpipe = ("on gpipe, **this build has no simulated device (`runtime { device: SIM "
                      "}` failed: " + facts["sim_error"].replace("|", "/") + "), so only the "
                      "fallback runs**: the same width-1 layers for real on the CPU backend")
    print(f"Zero-cost layers: {zero_torch}; {zero_gpipe}. µs per micro-batch per stage = step "
          f"time / (M × K).")
    print()
    print(f"{mlp_line} {tiny_line}")
    print()
    print(f"### Real layers ({mlp.layers} × Linear {mlp.width} → {mlp.width}, batch {mlp.batch})")
    print()
    print("| K | M | schedule | torch ms/step | gpipe ms/step | ratio (torch/gpipe) |")
    print("|---|---|---|---|---|---|")
    for cell, torch_ms, gpipe_ms in real_rows:
        print(f"| {cell.stages} | {cell.micro_batches} | {cell.schedule} | {_fmt_ms(torch_ms)} "
              f"| {_fmt_ms(gpipe_ms)} | {_ratio(torch_ms, gpipe_ms)} |")
    print()
    print("### Runtime overhead (zero-cost layers)")
    print()
    if sim:
        print("| K | M | schedule | torch ms/step | torch µs/(mb·stage) | gpipe SIM ms/step "
              "| gpipe SIM µs/(mb·stage) | ratio (torch/gpipe SIM) | gpipe CPU ms/step "
              "| ratio (torch/gpipe CPU) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    else:
        print("| K | M | schedule | torch ms/step | torch µs/(mb·stage) | gpipe CPU ms/step "
              "| gpipe CPU µs/(mb·stage) | ratio (torch/gpipe CPU) |")
        print("|---|---|---|---|---|---|---|---|")
    for cell, torch_ms, sim_ms, cpu_ms in overhead_rows:
        head = (f"| {cell.stages} | {cell.micro_batches} | {cell.schedule} | {_fmt_ms(torch_ms)} "
                f"| {_per_pair_us(torch_ms, cell)} ")
        if sim:
            print(head + f"| {_fmt_ms(sim_ms)} | {_per_pair_us(sim_ms, cell)} "
                  f"| {_ratio(torch_ms, sim_ms)} | {_fmt_ms(cpu_ms)} "
                  f"| {_ratio(torch_ms, cpu_ms)} |")
        else:
            print(head + f"| {_fmt_ms(cpu_ms)} | {_per_pair_us(cpu_ms, cell)} "
                  f"| {_ratio(torch_ms, cpu_ms)} |")
    print()
    print(f"Bench time {facts['minutes']:.1f} min (`bench/torch_compare.sh`).")
    return same_mlp and same_tiny
