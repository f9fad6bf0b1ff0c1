#!/usr/bin/env bash
# How much of the boundary transfers the compute hides, per stage: examples/mlp at K = 4, M = 8
# under each training schedule, traced (runtime.trace), on the simulated device and on the CPU
# backend over MPI. Prints markdown: per stage the bytes received per step, the time the
# transfers were in flight (from the later of send and receive post to the observed
# completion, an upper bound: completions are seen between instructions), the part of it the
# receiving instructions were blocked (exposed, exact), and the hidden fraction.
#   bench/transfer_overlap.sh [steps] [SIM|CPU]...
# GPIPE_PRECISION=BF16 runs them in bf16 mixed precision (training.precision), whose boundary
# tensors travel in half the bytes.
# CPU: 4 ranks on this machine's cores (on 2 cores they share them, so transfers wait for the
# sender's core as well as for the wire); the figures come from the ranks' aligned clocks,
# good to the trace's clock_uncertainty_us (printed).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
shift || true
devices=("${@:-SIM}")
precision=${GPIPE_PRECISION:-FP32}
[ $# -gt 0 ] || devices=(SIM CPU)
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for device in "${devices[@]}"; do
  echo "### $device: examples/mlp, 4 stages x 8 micro-batches of 16 samples, $steps steps, $precision"
  echo
  echo "| schedule | stage | received per step | in flight ms/step | exposed ms/step | hidden | clock uncertainty us |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  for schedule in GPIPE ONE_F_ONE_B ZERO_BUBBLE_H1; do
    "$bin/gpipe-run" examples/mlp/plan.pbtxt \
      --override "training { steps: $steps precision: $precision } pipeline { schedule: $schedule }" \
      --override "runtime { device: $device log_every: 0 }" \
      --trace "$out/trace.json" < /dev/null > "$out/run.log" 2>&1 ||
      { tail -5 "$out/run.log" >&2; exit 1; }
    python3 - "$out/trace.json" "$schedule" "$steps" <<'PY'
import json, sys
other = json.load(open(sys.argv[1]))["otherData"]
steps = int(sys.argv[3])
for r in other["transfer_overlap"]:
    u = other["clock_uncertainty_us"][r["rank"]] or 0
    print(f"| {sys.argv[2]} | {r['stage']} | {r['bytes_received'] / steps / 1024:.0f} KiB | "
          f"{r['in_flight_ms'] / steps:.3f} | {r['exposed_ms'] / steps:.3f} | "
          f"{100 * r['hidden_fraction']:.1f}% | {u:.0f} |")
PY
  done
  echo
done
