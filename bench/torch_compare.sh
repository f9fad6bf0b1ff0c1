#!/usr/bin/env bash
# gpipe against what users would otherwise run: the same MLP pipeline in PyTorch's
# torch.distributed.pipelining (ScheduleGPipe and Schedule1F1B over gloo, one CPU process per
# stage, one thread each) and in gpipe-run, at the same K, M, batch and threads. Prints a
# markdown section: step time per cell and the ratio, then the runtime overhead with zero-cost
# layers (gpipe's SIM device with every cost zero). The product never needs Python; this bench
# installs its own PyTorch from PyPI into a venv (bench/torch_compare/install_torch.py says how).
#   bench/torch_compare.sh [--quick] [--stages 2,4] [--micro-batches 4,8] [--steps N]
#                          [--warmup N] [--overhead-steps N] [--overhead-warmup N]
#                          [--schedules GPIPE,1F1B] [--repeats 2] [--batch 64] [--width 1024]
#                          [--layers 8] [--loss ce|mse]
#   The issue-11 target cell (16 x (Linear 1024 + ReLU), batch 256, M = 8, MSE, K = 1 and 2):
#   bench/torch_compare.sh --stages 1,2 --micro-batches 8 --batch 256 --layers 16 --loss mse
#   GPIPE_BIN=DIR          gpipe-run / gpipe-plan from DIR (default build/bin)
#   GPIPE_BENCH_VENV=DIR   the venv (default ~/.cache/gpipe-bench-venv; reused when it imports)
# Exit 0 with the section on stdout (progress on stderr); 1 when a run failed or the sides built
# different models; 3 when PyTorch could not be installed (the reason on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GPIPE_BIN:-build/bin}
venv=${GPIPE_BENCH_VENV:-$HOME/.cache/gpipe-bench-venv}

args=()
while [ $# -gt 0 ]; do
  case "$1" in
    # A smoke run: one cell per schedule, a few steps.
    --quick) args+=(--stages 2 --micro-batches 4 --steps 3 --warmup 1 --overhead-steps 10
                    --overhead-warmup 2 --repeats 1) ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done

die() { echo "torch_compare: $*" >&2; exit 1; }
for program in gpipe-run gpipe-plan gpipe-worker; do
  [ -x "$bin/$program" ] || die "no $bin/$program: build first (scripts/build.sh)"
done
command -v python3 > /dev/null || die "python3 is needed (scripts/setup.sh installs it)"
command -v timeout > /dev/null || die "timeout (coreutils) is needed"

python3 bench/torch_compare/install_torch.py "$venv" || exit $?
note=$(cat "$venv/gpipe-bench-install.txt" 2> /dev/null || true)
# compare.py's later --args override these defaults (argparse keeps the last value).
exec timeout --kill-after=30 7200 "$venv/bin/python" bench/torch_compare/compare.py \
    --bin "$(cd "$bin" && pwd)" --install-note "$note" "${args[@]}"
