#!/usr/bin/env bash
# The benchmark report: one command, one markdown document on stdout (progress and errors on
# stderr). Sections, in order (each is also its own script):
#   1. CPU kernels against the measured single-thread GEMM peak   (gpipe-bench-kernels)
#   2. runtime overhead with zero-cost layers on SIM               (bench/runtime_overhead.sh)
#   3. pipeline scaling on SIM, GPipe Table 2 format, and the
#      step time against the schedule's ideal at M = 4K           (bench/sim_scaling.sh)
#   4. peak memory per stage, schedule and remat vs prediction     (bench/memory.sh)
#   5. the comparison with PyTorch's pipelining                    (bench/torch_compare.sh;
#      installs PyTorch from PyPI into a venv; skipped with --no-torch)
#   bench/report.sh [--quick] [--no-torch] > report.md
# Nothing here is a pass/fail test; the machine is noisy, so compare numbers within one report.
# About 15 minutes on 2 cores (--quick: a few), plus the PyTorch download the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
torch=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-torch) torch=0 ;;
    *) echo "usage: bench/report.sh [--quick] [--no-torch]" >&2; exit 2 ;;
  esac
done
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-run" ] && [ -x "$bin/gpipe-bench-kernels" ] ||
  { echo "build first: scripts/build.sh" >&2; exit 1; }
export GPIPE_BIN=$bin

section() { echo "report: $1" >&2; }

echo "# gpipe benchmark report"
echo
echo "Commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d)," \
     "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))," \
     "no accelerator: the pipeline scaling runs on simulated accelerators."
echo
section "CPU kernels"
if [ "$quick" = 1 ]; then "$bin/gpipe-bench-kernels" --quick; else "$bin/gpipe-bench-kernels"; fi
echo
section "runtime overhead"
bash bench/runtime_overhead.sh "$([ "$quick" = 1 ] && echo 10 || echo 30)"
echo
section "scaling on SIM"
bash bench/sim_scaling.sh "$([ "$quick" = 1 ] && echo 2 || echo 3)"
echo
section "memory"
bash bench/memory.sh
echo
if [ "$torch" = 1 ]; then
  section "PyTorch comparison"
  if [ "$quick" = 1 ]; then bash bench/torch_compare.sh --quick; else bash bench/torch_compare.sh; fi
fi
