#!/usr/bin/env python3
"""gpipe beside PyTorch on one GPU, in one run: the transformer block and whole training steps.

  python3 bench/torch_gpu_compare.py [--device cuda|cpu] [--precision fp32|bf16|both]
      [--repeats N] [--warmup N] [--quick] [--gpipe-bin DIR] [--workloads block,char,gpt2]
      [--block B,T,D,H] [--no-compile] [--no-launches] [--peak-bf16 TFLOPS]
      [--peak-fp32 TFLOPS] [--cublaslt] [--cudnn-attention] [--graphs]
      [--out FILE]

Rows, each in fp32 and bf16:
  - the transformer block (default 4 x T 2048 x d 2048, 16 heads; fwd+bwd of one call):
    `gpipe-bench-kernels --block --json` against the same block in PyTorch, eager and
    torch.compile'd;
  - a training step of examples/char_transformer at K = 1 (one micro-batch, remat NEVER) against
    the same model in plain PyTorch (eager and compiled, AdamW, same batch);
  - a training step of bench/gpt2_small (GPT-2 small's shape) at K = 1 and at K = 4 with the 4
    ranks sharing the GPU (runtime.cuda.share_gpu, M = 4), beside PyTorch at K = 1.
Times: PyTorch's are CUDA events around each call (perf_counter on the CPU); gpipe's block is the
profiler's median of wall times after the device finished each call; gpipe's steps are
`step_ms` of --metrics-out. All after warm-up, medians of --repeats. MFU = the workload's model
FLOPs (bench/torch_gpu/workloads.py says how they are counted) / time / the peak. Kernel
launches per step: torch.profiler on PyTorch's side; nsys (two runs, the difference) on gpipe's,
"n/a" without nsys. A failing cell (a compile error, a crashed run) is written as such and the
run goes on. The markdown goes to stdout and to --out.
"""
import argparse
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "torch_gpu"))

import gpipe_side  # noqa: E402
import workloads  # noqa: E402

# NVIDIA's data-sheet peaks, dense (H100 SXM; the H200 has the same compute).
PEAKS = {"bf16": 989.0, "fp32": 67.0}
TF32_PEAK = 494.7


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: a smoke run (small block, one thread, no MFU)")
    parser.add_argument("--precision", choices=["fp32", "bf16", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed calls or steps per cell, the median kept (default 20, "
                             "--quick 5)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed calls or steps first (default 5, --quick 2)")
    parser.add_argument("--quick", action="store_true",
                        help="few repeats, torch.compile on the block only, no nsys (a few "
                             "minutes of GPU time)")
    parser.add_argument("--gpipe-bin", default=os.path.join(REPO, "build", "bin"),
                        help="where gpipe-run and gpipe-bench-kernels are (default build/bin)")
    parser.add_argument("--workloads", default=None,
                        help="comma-separated of block, char, gpt2 (default all; on the CPU "
                             "block,char)")
    parser.add_argument("--block", default=None,
                        help="B,T,D,H of the block (default 4,2048,2048,16; on the CPU "
                             "2,128,128,4)")
    parser.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    parser.add_argument("--no-launches", action="store_true",
                        help="leave out the kernel launch counts")
    parser.add_argument("--peak-bf16", type=float, default=None,
                        help="the device's bf16 dense peak in TFLOP/s (default: 989 on an "
                             "H100/H200, otherwise none)")
    parser.add_argument("--peak-fp32", type=float, default=None,
                        help="fp32 peak without tensor cores in TFLOP/s (default: 67 on an "
                             "H100/H200)")
    parser.add_argument("--cublaslt", action="store_true",
                        help="gpipe's products on cuBLASLt, bias and bf16 rounding in their "
                             "epilogues (runtime.cuda.cublaslt_gemm)")
    parser.add_argument("--cudnn-attention", action="store_true",
                        help="gpipe's bf16 attention on cuDNN's flash-attention engines "
                             "(runtime.cuda.cudnn_attention)")
    parser.add_argument("--graphs", action="store_true",
                        help="gpipe's training steps with runtime.cuda.graphs (captured once, "
                             "replayed)")
    parser.add_argument("--out", default=None, help="also write the markdown here")
    args = parser.parse_args()
    args.repeats = args.repeats or (5 if args.quick else 20)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    if args.repeats < 1 or args.warmup < 0:
        parser.error("--repeats must be >= 1 and --warmup >= 0")
    default = "block,char,gpt2" if args.device == "cuda" else "block,char"
    args.workloads = (args.workloads or default).split(",")
    if any(w not in ("block", "char", "gpt2") for w in args.workloads):
        parser.error(f"--workloads takes block, char, gpt2; got {','.join(args.workloads)}")
    try:
        args.block = (workloads.parse_block(args.block) if args.block else
                      workloads.BLOCK_GPU if args.device == "cuda" else workloads.BLOCK_CPU)
    except ValueError as e:
        parser.error(str(e))
    args.precisions = ["fp32", "bf16"] if args.precision == "both" else [args.precision]
    return args


def cuda_options(args):
    """The runtime.cuda options the flags give gpipe's side."""
    return gpipe_side.CudaOptions(cublaslt=args.cublaslt, cudnn_attention=args.cudnn_attention,
                                  graphs=args.graphs)


def progress(message):
    print(f"torch_gpu_compare: {message}", file=sys.stderr, flush=True)


class Row:
    """One line of the table; a cell is a number, None (not run) or an error text."""

    def __init__(self, workload, shape, precision, flops, tokens=None):
        self.workload, self.shape, self.precision = workload, shape, precision
        self.flops, self.tokens = flops, tokens
        self.gpipe = self.eager = self.compiled = None
        self.gpipe_launches = self.eager_launches = None
        self.ratio_to = None  # a row whose eager time this row's gpipe time is compared with


class Report:
    def __init__(self, args):
        self.args = args
        self.rows = []
        self.notes = []

    def cell(self, row, field, what, compute):
        """Runs `compute`; its value goes to row.<field>, or a short error text and a note."""
        progress(f"{row.workload} {row.precision}: {what}")
        try:
            setattr(row, field, compute())
        except Exception as e:  # a cell, never a crash
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
            setattr(row, field, f"failed: {type(e).__name__}")
            self.notes.append(f"{row.workload} {row.precision}, {what}: {type(e).__name__}: "
                              f"{first}")
            detail = e if isinstance(e, gpipe_side.GpipeError) else traceback.format_exc()
            progress(f"{what} failed:\n{detail}")


def load_torch(args):
    """The torch_side module and the device, or (None, reason)."""
    try:
        import torch
        import torch_side
    except Exception as e:
        return None, None, f"PyTorch does not import ({type(e).__name__}: {e})"
    if args.device == "cuda" and not torch.cuda.is_available():
        return None, None, "PyTorch sees no CUDA device"
    device = torch.device(args.device)
    torch_side.configure(device)
    return torch_side, device, None


def run_block(report, ts, device, workdir):
    args = report.args
    for precision in args.precisions:
        row = Row("transformer block fwd+bwd", str(args.block), precision,
                  workloads.block_step_flops(args.block),
                  tokens=args.block.batch * args.block.positions)
        report.rows.append(row)

        def gpipe_block():
            ms, flops = gpipe_side.block_ms(args.gpipe_bin, args.block, args.device, precision,
                                            args.repeats, workdir, cuda_options(args))
            if precision == args.precisions[0]:
                report.notes.append(
                    f"block: gpipe's ForwardFlopsPerSample x 3 gives {flops:.4g} FLOPs per call "
                    f"(layer norms and GELU counted nominally), the products alone "
                    f"{row.flops:.4g}; MFU uses the latter on both sides.")
            return ms

        report.cell(row, "gpipe", "gpipe-bench-kernels", gpipe_block)
        if ts is None:
            continue
        for compiled, field in ((False, "eager"), (True, "compiled")):
            if compiled and args.no_compile:
                continue

            def torch_block():
                ms, first_s = ts.time_step(
                    lambda: ts.block_step(args.block, device, precision, compiled), device,
                    args.repeats, args.warmup)
                if compiled:
                    report.notes.append(f"block {precision}: torch.compile's first call took "
                                        f"{first_s:.1f} s")
                return ms

            report.cell(row, field, f"torch {'compiled' if compiled else 'eager'}", torch_block)
            ts.release(device)
        if not args.no_launches and args.device == "cuda":
            def eager_launches():
                step, _ = ts.block_step(args.block, device, precision, False)
                return ts.kernel_launches(step, device)
            report.cell(row, "eager_launches", "torch.profiler launches", eager_launches)
            ts.release(device)


def check_parameters(report, ts, model):
    """A note saying whether both sides built the same number of parameters."""
    if ts is None:
        return
    try:
        gpipe_count = gpipe_side.plan_parameters(report.args.gpipe_bin, REPO, model)
        torch_count = ts.parameter_count(ts.Gpt(model))
    except Exception as e:
        report.notes.append(f"{model.name}: parameters not compared ({type(e).__name__}: {e})")
        return
    verdict = ("same on both sides" if torch_count == gpipe_count else
               "**MISMATCH: the sides do not run the same model**")
    report.notes.append(f"{model.name}: gpipe {gpipe_count:,} parameters (`gpipe-plan show`, the "
                        f"tied matrix once), PyTorch {torch_count:,}: {verdict}.")


def run_model(report, ts, device, workdir, model, four_stages):
    args = report.args
    for precision in args.precisions:
        flops = workloads.model_step_flops(model)
        tokens = model.batch * model.positions
        shape = (f"{model.layers} blocks, d {model.width}, {model.heads} heads, T "
                 f"{model.positions}, vocab {model.vocab}, batch {model.batch}")
        row = Row(f"{model.name} step, K=1", shape, precision, flops, tokens)
        report.rows.append(row)
        if precision == args.precisions[0]:
            check_parameters(report, ts, model)
        report.cell(row, "gpipe", "gpipe-run K=1", lambda: gpipe_side.model_step_ms(
            args.gpipe_bin, REPO, model, 1, 1, args.device, precision, args.repeats,
            args.warmup, workdir, cuda_options(args)))
        if ts is not None:
            compile_model = not args.no_compile and not args.quick
            for compiled, field in ((False, "eager"), (True, "compiled")):
                if compiled and not compile_model:
                    continue

                def torch_model():
                    ms, first_s = ts.time_step(
                        lambda: ts.model_step(model, device, precision, compiled), device,
                        args.repeats, args.warmup)
                    if compiled:
                        report.notes.append(f"{model.name} {precision}: torch.compile's first "
                                            f"step took {first_s:.1f} s")
                    return ms

                report.cell(row, field, f"torch {'compiled' if compiled else 'eager'}",
                            torch_model)
                ts.release(device)
            if not args.no_launches and args.device == "cuda":
                def eager_launches():
                    step, module = ts.model_step(model, device, precision, False)
                    return ts.kernel_launches(step, device)
                report.cell(row, "eager_launches", "torch.profiler launches", eager_launches)
                ts.release(device)
        if not args.no_launches and not args.quick and args.device == "cuda":
            report.cell(row, "gpipe_launches", "nsys launches", lambda: gpipe_side.model_launches(
                args.gpipe_bin, REPO, model, precision, workdir, cuda=cuda_options(args)))
        if four_stages:
            k4 = Row(f"{model.name} step, K=4 M=4 on one GPU" if args.device == "cuda" else
                     f"{model.name} step, K=4 M=4", shape, precision, flops, tokens)
            k4.ratio_to = row
            report.rows.append(k4)
            report.cell(k4, "gpipe", "gpipe-run K=4", lambda: gpipe_side.model_step_ms(
                args.gpipe_bin, REPO, model, 4, 4, args.device, precision, args.repeats,
                args.warmup, workdir, cuda_options(args)))


def fmt_ms(v):
    return "—" if v is None else v if isinstance(v, str) else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def fmt_mfu(row, v, peak):
    if not isinstance(v, (int, float)) or not peak:
        return "—"
    return f"{100 * row.flops / (v * 1e-3) / (peak * 1e12):.1f}%"


def fmt_tokens(row, v):
    if not isinstance(v, (int, float)) or row.tokens is None:
        return "—"
    return f"{row.tokens / (v * 1e-3):,.0f}"


def fmt_count(v):
    return "n/a" if v is None else v if isinstance(v, str) else f"{v:.0f}"


def print_report(report, facts, out):
    args = report.args
    lines = []
    say = lines.append
    say("## gpipe beside PyTorch on one GPU" if args.device == "cuda" else
        "## gpipe beside PyTorch (CPU smoke run)")
    say("")
    peaks = facts["peaks"]
    peak = lambda p: f"{peaks[p]:g} TFLOP/s" if peaks[p] else "unknown (no MFU)"
    peak_text = (f"peaks used for MFU (dense): bf16 {peak('bf16')}, fp32 {peak('fp32')} (no "
                 f"tensor cores; TF32 tensor would be {TF32_PEAK:g} dense on an H100, but both "
                 f"sides run fp32 with TF32 off)"
                 if peaks["bf16"] or peaks["fp32"] else "no peak known for this device: no MFU")
    say(f"Device: {facts['device_name']}; PyTorch {facts['torch']}, CUDA {facts['cuda']}; gpipe "
        f"{facts['commit']} (`{args.gpipe_bin}`); {peak_text}. Medians of {args.repeats} timed "
        f"calls or steps after {args.warmup} warm-up ones. PyTorch: CUDA events around each call "
        f"(perf_counter on the CPU); bf16 = `torch.autocast(bfloat16)` over f32 parameters, "
        f"attention through `scaled_dot_product_attention(is_causal=True)`, AdamW "
        f"(`torch.optim.AdamW` defaults otherwise). gpipe: the block by `gpipe-bench-kernels "
        f"--block --json` (wall time after the device finished each call), steps by `gpipe-run "
        f"--metrics-out` `step_ms` (K=1: one micro-batch of the whole batch; remat NEVER), bf16 = "
        f"`training.precision: BF16`"
        f"{'; products on cuBLASLt (`runtime.cuda.cublaslt_gemm`)' if args.cublaslt else ''}"
        f"{'; bf16 attention on cuDNN (`runtime.cuda.cudnn_attention`)' if args.cudnn_attention else ''}"
        f"{'; training steps with `runtime.cuda.graphs`' if args.graphs else ''}. "
        f"MFU counts model FLOPs of the matrix products, attention "
        f"over the full T×T, fwd+bwd = 3 × fwd (bench/torch_gpu/workloads.py); the block is "
        f"{workloads.block_step_flops(args.block) / 1e9:,.1f} GFLOP per call. gpipe / eager < 1 "
        f"means gpipe is faster; the K=4 rows' ratio is against PyTorch's K=1 step. Launches: "
        f"kernels per call or step, torch.profiler's GPU kernel records on PyTorch's side; "
        f"gpipe's from nsys at K=1 (the launch calls of an 8-step run minus those of a 3-step "
        f"run, over 5; a graph launch counts once), n/a where nsys is not installed or was not "
        f"run.")
    say("")
    say("| workload | shape | precision | gpipe ms | torch eager ms | torch compiled ms | "
        "gpipe / eager | MFU gpipe | MFU eager | MFU compiled | tokens/s gpipe | "
        "tokens/s eager | launches gpipe | launches eager |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in report.rows:
        peak = peaks[row.precision]
        base = row.ratio_to.eager if row.ratio_to else row.eager
        ratio = (f"{row.gpipe / base:.2f}" if isinstance(row.gpipe, (int, float))
                 and isinstance(base, (int, float)) and base > 0 else "—")
        say(f"| {row.workload} | {row.shape} | {row.precision} | {fmt_ms(row.gpipe)} | "
            f"{fmt_ms(row.eager)} | {fmt_ms(row.compiled)} | {ratio} | "
            f"{fmt_mfu(row, row.gpipe, peak)} | {fmt_mfu(row, row.eager, peak)} | "
            f"{fmt_mfu(row, row.compiled, peak)} | {fmt_tokens(row, row.gpipe)} | "
            f"{fmt_tokens(row, row.eager)} | {fmt_count(row.gpipe_launches)} | "
            f"{fmt_count(row.eager_launches)} |")
    say("")
    if args.device == "cuda" and "block" in args.workloads:
        say("Targets (issue 28): the bf16 block at >= 50% MFU and <= 0.9 × PyTorch eager's time.")
        say("")
    for note in report.notes:
        say(f"- {note}")
    if report.notes:
        say("")
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def gpipe_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def main():
    args = parse_args()
    args.gpipe_bin = os.path.abspath(args.gpipe_bin)
    report = Report(args)
    ts, device, torch_missing = load_torch(args)
    facts = {"commit": gpipe_commit(), "torch": "not importable", "cuda": "—",
             "device_name": args.device}
    if torch_missing:
        report.notes.append(f"PyTorch side not run: {torch_missing}")
        progress(torch_missing)
    else:
        facts.update(ts.environment(device))
    known_gpu = any(n in facts["device_name"] for n in ("H100", "H200"))
    facts["peaks"] = {"bf16": args.peak_bf16 or (PEAKS["bf16"] if known_gpu else None),
                      "fp32": args.peak_fp32 or (PEAKS["fp32"] if known_gpu else None)}
    workdir = gpipe_side.make_workdir()
    progress(f"logs in {workdir}")
    if "block" in args.workloads:
        run_block(report, ts, device, workdir)
    if "char" in args.workloads:
        run_model(report, ts, device, workdir, workloads.CHAR, four_stages=False)
    if "gpt2" in args.workloads:
        run_model(report, ts, device, workdir, workloads.GPT2, four_stages=True)
    print_report(report, facts, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
