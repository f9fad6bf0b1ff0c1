"""The gpipe side: the block through `gpipe-bench-kernels --block --json`, the models through
`gpipe-run --metrics-out`, and (where nsys is installed) kernel launches per step.

A failure raises GpipeError with the command and the tail of its output, which the report turns
into a cell and a note; nothing here exits the script.
"""
import csv
import dataclasses
import json
import re
import os
import shutil
import statistics
import subprocess
import tempfile

TIME_LIMIT_S = 900


class GpipeError(Exception):
    pass


def _env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe=env.get("OMPI_MCA_rmaps_base_oversubscribe", "1"))
    return env


def _run(command, log_path):
    with open(log_path, "w") as log:
        try:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=_env(),
                                  timeout=TIME_LIMIT_S).returncode
        except subprocess.TimeoutExpired:
            code = "timed out"
    if code != 0:
        with open(log_path, errors="replace") as f:
            tail = "".join(f.readlines()[-15:])
        raise GpipeError(f"{os.path.basename(command[0])} exited {code} (log {log_path}): "
                         f"`{' '.join(command)}`\n{tail}")


@dataclasses.dataclass(frozen=True)
class CudaOptions:
    """The runtime.cuda options gpipe's side runs with (plan.proto's Cuda)."""
    cublaslt: bool = False          # cublaslt_gemm: products on cuBLASLt
    cudnn_attention: bool = False   # cudnn_attention: bf16 storage's attention on cuDNN
    graphs: bool = False            # graphs: training steps captured once and replayed

    def tag(self):
        return ((("-lt" if self.cublaslt else "") + ("-cudnn" if self.cudnn_attention else "")) +
                ("-graphs" if self.graphs else ""))

    def plan_fields(self):
        return ((" cublaslt_gemm: true" if self.cublaslt else "") +
                (" cudnn_attention: true" if self.cudnn_attention else "") +
                (" graphs: true" if self.graphs else ""))

    def bench_flags(self):
        return ((["--cublaslt"] if self.cublaslt else []) +
                (["--cudnn-attention"] if self.cudnn_attention else []))


def block_ms(bin_dir, block, device, precision, repeats, workdir, cuda=CudaOptions()):
    """(fwd+bwd median ms, gpipe's fwd+bwd FLOPs) of one transformer_block call on the batch,
    with `cuda`'s products and attention paths (graphs do not apply to one layer's call)."""
    log = os.path.join(workdir, f"block-{precision}{cuda.tag()}.log")
    _run([os.path.join(bin_dir, "gpipe-bench-kernels"), "--device", device, "--clock", "wall",
          "--precision", precision, "--repeats", str(repeats), "--json",
          "--block", f"{block.batch},{block.positions},{block.width},{block.heads}"] +
         cuda.bench_flags(), log)
    with open(log) as f:
        rows = [json.loads(line) for line in f if line.startswith("{")]
    layers = [r for r in rows if r.get("kind") == "layer" and r.get("layer") == "transformer_block"]
    if not layers:
        raise GpipeError(f"gpipe-bench-kernels printed no transformer_block row (log {log})")
    row = layers[0]
    return row["fwd_ms"] + row["bwd_ms"], row["fwd_bwd_flops"]


def _overrides(model, stages, micro_batches, steps, device, precision, text_path,
               cuda_options=CudaOptions()):
    cuda = (f"cuda {{ share_gpu: true{cuda_options.plan_fields()} }}" if device == "cuda"
            else "")
    return [
        f"pipeline {{ stages: {stages} micro_batches: {micro_batches} remat: NEVER }}",
        f"training {{ steps: {steps} eval_every: 0 precision: {precision.upper()} }}",
        f"runtime {{ device: {device.upper()} {cuda} log_every: 0 }}",
        # Timing does not depend on the bytes; the README exists wherever the repository does.
        f'data {{ text {{ paths: ["{text_path}"] }} }}',
    ]


def model_command(bin_dir, repo, model, stages, micro_batches, steps, device, precision,
                  metrics, cuda=CudaOptions()):
    command = [os.path.join(bin_dir, "gpipe-run"), os.path.join(repo, model.plan),
               "-n", str(stages)]
    for text in _overrides(model, stages, micro_batches, steps, device, precision,
                           os.path.join(repo, "README.md"), cuda):
        command += ["--override", text]
    return command + ["--metrics-out", metrics]


def model_step_ms(bin_dir, repo, model, stages, micro_batches, device, precision, repeats,
                  warmup, workdir, cuda=CudaOptions()):
    """Median step_ms (rank 0: from the step command to the step's end, update included) over
    `repeats` steps after `warmup` (with cuda.graphs, runtime.cuda.graphs: at least 2 warm-up
    steps, the second being the one that captures)."""
    if cuda.graphs:
        warmup = max(warmup, 2)
    tag = f"{model.name}-k{stages}-{precision}{cuda.tag()}"
    metrics = os.path.join(workdir, f"{tag}.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    _run(model_command(bin_dir, repo, model, stages, micro_batches, warmup + repeats, device,
                       precision, metrics, cuda), os.path.join(workdir, f"{tag}.log"))
    with open(metrics) as f:
        rows = [json.loads(line) for line in f]
    steps = [r for r in rows if not r.get("eval")][warmup:]
    if not steps:
        raise GpipeError(f"{tag}: no metrics after {warmup} warm-up steps ({metrics})")
    return statistics.median(r["step_ms"] for r in steps)


def _nsys_table(report, table):
    """The rows of `nsys stats --report table` as dicts (CSV with a header row)."""
    stats = subprocess.run(["nsys", "stats", "--report", table, "--format", "csv",
                            "--force-export=true", report + ".nsys-rep"],
                           capture_output=True, text=True, timeout=TIME_LIMIT_S)
    lines = [l for l in stats.stdout.splitlines() if l.count(",") >= 2]
    header = next((i for i, l in enumerate(lines) if "Name" in l), None)
    if stats.returncode != 0 or header is None:
        raise GpipeError(f"nsys stats gave no {table} table: {stats.stderr[-500:]}")
    names = [c.strip('"') for c in lines[header].split(",")]
    return [dict(zip(names, next(csv.reader([l])))) for l in lines[header + 1:]]


def _nsys_launch_calls(command, report):
    """Launches the host made over the whole run of `command` (all processes), as nsys records
    them: calls of the CUDA runtime and driver APIs that launch a kernel or a graph
    (cudaLaunchKernel, cuLaunchKernel and their Ex forms, cudaGraphLaunch), so a graph's
    kernels count once, as its launch."""
    _run(["nsys", "profile", "--trace=cuda", "--sample=none", "--cpuctxsw=none",
          "--force-overwrite=true", "-o", report] + command, report + ".profile.log")
    return sum(int(row["Num Calls"]) for row in _nsys_table(report, "cuda_api_sum")
               if "Launch" in row.get("Name", "") and "Host" not in row.get("Name", ""))


def model_launches(bin_dir, repo, model, precision, workdir, few=3, more=8, cuda=CudaOptions()):
    """Launches per training step at K = 1, M = 1: nsys counts two runs of `few` and `more`
    steps and the difference is divided by `more - few`, so start-up work cancels (with
    cuda.graphs, both runs capture in their second step). None when nsys is not installed."""
    if shutil.which("nsys") is None:
        return None
    counts = []
    for steps in (few, more):
        tag = f"nsys-{model.name}-{steps}{cuda.tag()}"
        metrics = os.path.join(workdir, f"{tag}.jsonl")
        command = model_command(bin_dir, repo, model, 1, 1, steps, "cuda", precision, metrics,
                                cuda)
        counts.append(_nsys_launch_calls(command, os.path.join(workdir, tag)))
    return (counts[1] - counts[0]) / (more - few)


def make_workdir():
    return tempfile.mkdtemp(prefix="gpipe-torch-gpu-")


def plan_parameters(bin_dir, repo, model):
    """The model's parameters as `gpipe-plan show` counts them, the tied head's matrix once (show
    counts each layer's own, so the tied [vocab, width] matrix twice)."""
    shown = subprocess.run([os.path.join(bin_dir, "gpipe-plan"), "show",
                            os.path.join(repo, model.plan)],
                           capture_output=True, text=True, timeout=120)
    match = re.search(r"([\d,]+) parameters", shown.stdout)
    if shown.returncode != 0 or not match:
        raise GpipeError(f"gpipe-plan show {model.plan} failed: {shown.stderr[-300:]}")
    return int(match.group(1).replace(",", "")) - model.vocab * model.width
