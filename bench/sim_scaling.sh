#!/usr/bin/env bash
# Pipeline scaling on simulated accelerators (runtime { device: SIM }): the GPipe paper's Table 2
# for a Transformer-48-like model (examples/sim_transformer48: 48 equal transformer blocks),
# K in {1, 2, 4, 8, 16} stages x M in {1, 4, 32} micro-batches, with the same global batch
# everywhere. Every op sleeps for its FLOPs at the simulated peak, so K ranks on a 2-core
# machine behave like K accelerators; everything else (processes, MPI, schedules) is the real
# runtime. Prints markdown:
#   1. normalized throughput (K=2, M=1 = 1, the paper's baseline) measured, beside the ideal
#      K*M/(M+K-1) and the paper's TPU figures, with measured/ideal per cell;
#   2. the target: step time against the schedule's ideal (gpipe-plan show's predicted step
#      time from the same cost table) for GPIPE and 1F1B at M = 4K, K <= 16.
#   bench/sim_scaling.sh [steps] [peak_gflops]
# steps: per run, the first is warm-up (default 3); the median of the rest is reported.
# peak_gflops (default 300): the simulated device's speed; at 300 a K=1 step takes about 12 s and
# the shortest op (K=16) about 8 ms. Sleeping ranks still need a core to wake up on: on a loaded
# machine every op pays the scheduler's wake-up latency, so run this on an idle machine (or raise
# the op times by lowering peak_gflops). About 8 minutes.
# GPIPE_SIM_PROFILE=FILE: cost the layers by a profile of a real device (`gpipe-plan profile`,
# e.g. a GPU's, as bench/gpu_report.sh does) instead of FLOPs at peak_gflops.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
peak=${2:-300}
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
plan=examples/sim_transformer48/plan.pbtxt
batch=32

# run K M SCHEDULE BATCH -> "measured_ms predicted_ms"
run() {
  local k=$1 m=$2 schedule=$3 b=$4
  local o="pipeline { stages: $k micro_batches: $m schedule: $schedule }"
  local t="training { global_batch: $b steps: $steps }"
  local r="runtime { log_every: 0 sim { peak_gflops: $peak } }"
  [ -z "${GPIPE_SIM_PROFILE:-}" ] ||
    r="runtime { log_every: 0 sim { profile: \"$GPIPE_SIM_PROFILE\" } }"
  local predicted
  predicted=$("$bin/gpipe-plan" show "$plan" --override "$o" --override "$t" --override "$r" |
              sed -n 's/^predicted step time \([0-9.]*\) ms.*/\1/p')
  timeout 900 "$bin/gpipe-run" "$plan" -n "$k" --override "$o" --override "$t" --override "$r" \
      --metrics-out "$out/m.jsonl" > "$out/run.log" 2>&1 || { cat "$out/run.log" >&2; exit 1; }
  python3 - "$out/m.jsonl" "$predicted" <<'PY'
import json, statistics, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
records = [r for r in records if not r.get("eval")]
measured = records[1:] if len(records) > 1 else records
print(statistics.median(r["step_ms"] for r in measured), sys.argv[2])
PY
}

declare -A step_ms
for k in 1 2 4 8 16; do
  for m in 1 4 32; do
    result=$(run "$k" "$m" GPIPE "$batch")
    step_ms[$k,$m]=${result%% *}
  done
done

costs="at $peak GFLOP/s per stage"
[ -z "${GPIPE_SIM_PROFILE:-}" ] || costs="costed by the profile $(basename "$GPIPE_SIM_PROFILE")"
python3 - "$batch" "$peak" "$steps" "$costs" <<PY
import sys
batch, peak, steps, costs = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
step = {$(for key in "${!step_ms[@]}"; do printf '(%s): %s, ' "$key" "${step_ms[$key]}"; done)}
paper = {(2, 1): 1, (4, 1): 1.07, (8, 1): 1.3, (2, 4): 1.7, (4, 4): 3.2, (8, 4): 4.8,
         (2, 32): 1.8, (4, 32): 3.4, (8, 32): 6.3}
base = batch / step[(2, 1)]
print("## Pipeline scaling on simulated accelerators (GPipe Table 2 format)\n")
print(f"Transformer-48-like model (examples/sim_transformer48: 48 transformer blocks, d=1024, 32 "
      f"positions, 16 heads) on \`device: SIM\` {costs}, GPIPE schedule, "
      f"remat NEVER, global batch {batch} for every cell, K ranks on this machine's cores. "
      f"Throughput = samples/s from the median step time of {steps - 1} steps after one warm-up, "
      f"normalized to K=2, M=1 (the paper's baseline). Ideal = K·M/(M+K−1). Paper: GPipe "
      f"Table 2, Transformer-48 on TPU (Cloud TPUv3; the paper has no K=1 or K=16 columns).\n")
print("| M | K | step ms | measured | ideal | measured/ideal | paper |")
print("|---|---|---|---|---|---|---|")
for m in (1, 4, 32):
    for k in (1, 2, 4, 8, 16):
        measured = batch / step[(k, m)] / base
        ideal = k * m / (m + k - 1)
        p = paper.get((k, m))
        print(f"| {m} | {k} | {step[(k, m)]:.1f} | {measured:.2f} | {ideal:.2f} | "
              f"{measured / ideal:.3f} | {p if p is not None else '–'} |")
PY

echo
echo "### Step time against the schedule's ideal, M = 4K"
echo
echo "Ideal: \`gpipe-plan show\`'s predicted step time for the same plan and cost table (the"
echo "verifier's simulation of the stage programs: op times plus link latency and bandwidth;"
echo "the optimizer update is not part of it). One sample per micro-batch. Target: within 5%."
echo
echo "| schedule | K | M | ideal ms | measured ms | measured/ideal |"
echo "|---|---|---|---|---|---|"
for schedule in GPIPE ONE_F_ONE_B; do
  for k in 2 4 8 16; do
    m=$((4 * k))
    result=$(run "$k" "$m" "$schedule" "$m")
    read -r ms predicted <<< "$result"
    python3 -c "import sys; s, k, m, p, ms = sys.argv[1:]; print(f'| {s} | {k} | {m} | {float(p):.1f} | {float(ms):.1f} | {float(ms) / float(p):.3f} |')" \
      "$schedule" "$k" "$m" "$predicted" "$ms"
  done
done
