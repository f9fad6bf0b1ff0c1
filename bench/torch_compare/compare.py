"""Runs the comparison grid (K x M x schedule) on both sides and prints the markdown section.

Two models, each run by PyTorch's torch.distributed.pipelining and by gpipe-run in turn, cell by
cell, --repeats times alternating (so a change of machine load hits both sides of a ratio alike;
each side's lowest run median counts, the run least disturbed by the shared machine):
  - the real MLP (8 x Linear 1024 -> 1024, ReLU between, batch 64): step time ratio;
  - zero-cost layers: the same structure at width 1 (8 x Linear 1 -> 1, the last 1 -> 2), whose
    ops cost PyTorch about one dispatch each, against gpipe's simulated device with every cost
    zero (and gpipe's CPU device on the same width-1 layers, the like-for-like row; that row is
    the only gpipe figure when this build has no SIM device).
Run by bench/torch_compare.sh with the venv's python; see that script for the options.
"""
import argparse
import collections
import os
import platform
import re
import shutil
import subprocess
import sys
import time

import mlp_model
import report
import runners

Cell = collections.namedtuple("Cell", "stages micro_batches schedule")
Cell.__str__ = lambda c: f"K={c.stages} M={c.micro_batches} {c.schedule}"
Model = collections.namedtuple("Model", "layers width classes batch loss")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", required=True, help="directory of gpipe-run and gpipe-plan")
    parser.add_argument("--stages", default="2,4", help="comma-separated K values")
    parser.add_argument("--micro-batches", default="4,8", help="comma-separated M values")
    parser.add_argument("--schedules", default="GPIPE,1F1B")
    parser.add_argument("--steps", type=int, default=20, help="timed steps, real layers")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    parser.add_argument("--overhead-steps", type=int, default=100,
                        help="timed steps, zero-cost layers")
    parser.add_argument("--overhead-warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs per cell and side, alternating; the lowest median counts")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--loss", choices=["ce", "mse"], default="ce",
                        help="ce: softmax cross-entropy head; mse: Linear+ReLU everywhere, MSE "
                             "on regression targets")
    parser.add_argument("--install-note", default="", help="how torch was installed")
    return parser.parse_args()


def progress(message):
    print(f"torch_compare: {message}", file=sys.stderr, flush=True)


def gpipe_commit(repo):
    def git(*args):
        done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " + uncommitted changes"
    return commit


def gpipe_total_parameters(bin_dir, plan_path, workdir):
    text = runners.gpipe_parameters(bin_dir, plan_path, workdir)
    found = re.search(r"([0-9][0-9,]*) parameters", text)
    if not found:
        raise runners.RunError(f"no parameter count in `gpipe-plan check {plan_path}`:\n{text}")
    return int(found.group(1).replace(",", ""))


def main():
    args = parse_args()
    ints = lambda text: [int(v) for v in text.split(",") if v]
    cells = [Cell(k, m, s) for k in ints(args.stages) for m in ints(args.micro_batches)
             for s in args.schedules.split(",")]
    for cell in cells:
        if args.batch % cell.micro_batches or args.layers % cell.stages:
            sys.exit(f"torch_compare: {cell}: batch {args.batch} must divide by M and "
                     f"{args.layers} layers by K (even stages on both sides)")
    mlp = Model(args.layers, args.width, args.width, args.batch, args.loss)
    tiny = Model(args.layers, 1, 2, args.batch, "ce")
    workdir = runners.new_workdir()
    # A private copy of the programs: a build running beside the bench (a shared tree) would
    # otherwise relink them halfway through, or mix two versions in one table.
    bin_dir = os.path.join(workdir, "bin")
    os.mkdir(bin_dir)
    for program in ("gpipe-run", "gpipe-worker", "gpipe-plan"):
        shutil.copy2(os.path.join(args.bin, program), bin_dir)
    args.bin = bin_dir
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    facts = {
        "python": platform.python_version(), "commit": gpipe_commit(repo),
        "cores": os.cpu_count(), "load_start": os.getloadavg()[0], "install": args.install_note,
        "mlp": mlp, "tiny": tiny, "steps": args.steps, "warmup": args.warmup,
        "overhead_steps": args.overhead_steps, "overhead_warmup": args.overhead_warmup,
        "repeats": args.repeats,
        "parameters": {"mlp": mlp_model.parameter_count(mlp.layers, mlp.width, mlp.classes,
                                                         mlp.loss),
                       "tiny": mlp_model.parameter_count(tiny.layers, tiny.width, tiny.classes,
                                                         tiny.loss)},
        "counted": collections.defaultdict(set),  # (model, side) -> totals seen
        "sim_error": None,
    }
    real_rows, overhead_rows = [], []
    started = time.time()
    try:
        for cell in cells:
            progress(f"real layers, {cell}")
            torch_ms, gpipe_ms = [], []
            for _ in range(args.repeats):
                ms, result = runners.torch_run(cell, mlp, args.steps, args.warmup, workdir)
                torch_ms.append(ms)
                facts["torch"] = result["torch"]
                facts["counted"]["mlp", "torch"].add(sum(result["parameters_per_stage"]))
                ms, plan = runners.gpipe_run(cell, mlp, args.steps, args.warmup, workdir,
                                             args.bin, "CPU")
                gpipe_ms.append(ms)
            facts["counted"]["mlp", "gpipe"].add(gpipe_total_parameters(args.bin, plan, workdir))
            real_rows.append((cell, min(torch_ms), min(gpipe_ms)))
        for cell in cells:
            progress(f"zero-cost layers, {cell}")
            steps, warmup = args.overhead_steps, args.overhead_warmup
            torch_ms, sim_ms, cpu_ms = [], [], []
            for _ in range(args.repeats):
                ms, result = runners.torch_run(cell, tiny, steps, warmup, workdir)
                torch_ms.append(ms)
                facts["counted"]["tiny", "torch"].add(sum(result["parameters_per_stage"]))
                if facts["sim_error"] is None:
                    try:
                        ms, _ = runners.gpipe_run(cell, tiny, steps, warmup, workdir, args.bin,
                                                  "SIM")
                        sim_ms.append(ms)
                    except runners.RunError as error:
                        # A build without the simulated device: say so, keep the CPU row.
                        facts["sim_error"] = str(error).strip().splitlines()[-1][:300]
                        progress(f"no SIM device in this build, CPU tiny layers only: "
                                 f"{facts['sim_error']}")
                ms, plan = runners.gpipe_run(cell, tiny, steps, warmup, workdir, args.bin, "CPU")
                cpu_ms.append(ms)
            facts["counted"]["tiny", "gpipe"].add(gpipe_total_parameters(args.bin, plan, workdir))
            overhead_rows.append((cell, min(torch_ms), min(sim_ms) if sim_ms else None,
                                  min(cpu_ms)))
    except runners.RunError as error:
        print(f"torch_compare: a run failed (logs in {workdir}):\n{error}", file=sys.stderr)
        sys.exit(1)
    facts["load_end"] = os.getloadavg()[0]
    facts["minutes"] = (time.time() - started) / 60
    ok = report.print_section(facts, real_rows, overhead_rows)
    shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
