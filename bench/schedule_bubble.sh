#!/usr/bin/env bash
# Predicted (simulator) against measured (real runtime) bubble for every training schedule, for
# K in {2, 4, 8} stages and M in {K, 4K} micro-batches, on a model of equal blocks (so every
# partition is balanced and the simulator's equal-cost assumption holds). Prints a markdown
# table. One run per cell, in one sitting: compare within a run, not across machines.
#   bench/schedule_bubble.sh [steps] [width]
# STAGES="4 8" MICRO="8 16 32" (absolute micro-batch counts) and SCHEDULES="..." narrow or widen
# the sweep; ZERO_BUBBLE_V and DUALPIPE_V run two chunks per rank in a V. DEVICE=SIM runs the
# simulated device (every op sleeps its FLOPs at PEAK_GFLOPS, default 20), so ranks that share a
# core still measure their bubble: use it for K beyond the core count.
# Measured bubble = mean over stages of 1 - busy/step time, the median over steps after warm-up
# (what the metrics file's "bubble" holds). With more ranks than cores the ranks share cores,
# which inflates busy time and hides idle time: read K=8 on a 2-core machine with that in mind.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-12}
width=${2:-512}
bin=${GPIPE_BIN:-build/bin}  # where gpipe-plan and gpipe-run are
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
# More ranks than cores (K=8 here) needs oversubscription.
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# 16 blocks of linear + tanh: 32 layers, enough for 8 stages x 2 chunks; 16 classes, so that
# loading a micro-batch (cheap synthetic clusters) costs next to nothing, as the simulator
# assumes.
python3 - "$out/plan.pbtxt" "$width" <<'PY'
import sys
path, width = sys.argv[1], int(sys.argv[2])
layers = []
for b in range(16):
    layers.append(f'layers {{ name: "fc{b}" linear {{ out_features: {width} }} }}')
    layers.append(f'layers {{ name: "act{b}" tanh {{}} }}')
layers[-2] = 'layers { name: "head" linear { out_features: 16 } }'
open(path, "w").write(f"""name: "schedule-bubble"
model {{
  input {{ shape: [{width}] }}
  {chr(10).join('  ' + l for l in layers)}
  loss {{ softmax_cross_entropy {{}} }}
}}
pipeline {{ balance: FLOPS remat: NEVER }}
training {{ global_batch: 16 steps: 1 seed: 1 optimizer {{ sgd {{ lr: 0.001 }} }} }}
data {{ synthetic {{ num_samples: 4096 }} }}
runtime {{ log_every: 0 threads: 1 timeouts {{ wait_seconds: 120 }} }}
""")
PY

echo "| K | M | schedule | predicted bubble | measured bubble | predicted step (units, or ms on SIM) | measured step ms |"
echo "|---|---|---|---|---|---|---|"
schedules=${SCHEDULES:-GPIPE ONE_F_ONE_B INTERLEAVED_1F1B ZERO_BUBBLE_H1 ZERO_BUBBLE_H2 ZERO_BUBBLE_V DUALPIPE_V}
for k in ${STAGES:-2 4 8}; do
  for m in ${MICRO:-$k $((4 * k))}; do
    for schedule in $schedules; do
      v=1
      case "$schedule" in INTERLEAVED_1F1B | ZERO_BUBBLE_V | DUALPIPE_V) v=2 ;; esac
      pipeline="pipeline { stages: $k micro_batches: $m schedule: $schedule virtual_stages: $v }"
      training="training { global_batch: $((16 * m)) steps: $steps }"
      if [ "${DEVICE:-CPU}" = SIM ]; then
        training="$training runtime { device: SIM sim { peak_gflops: ${PEAK_GFLOPS:-20} } }"
      fi
      predicted=$("$bin/gpipe-plan" show "$out/plan.pbtxt" --override "$pipeline" \
                  --override "$training" | sed -n 's/^predicted step time \([0-9.]*\)[^,]*, bubble \([0-9.]*%\).*/\1 \2/p')
      "$bin/gpipe-run" "$out/plan.pbtxt" -n "$k" --override "$pipeline" --override "$training" \
          --metrics-out "$out/m.jsonl" > "$out/run.log" 2>&1 || { cat "$out/run.log" >&2; exit 1; }
      python3 - "$out/m.jsonl" "$k" "$m" "$schedule" $predicted <<'PY'
import json, statistics, sys
path, k, m, schedule, step, bubble = sys.argv[1:7]
rows = [json.loads(line) for line in open(path)][2:]  # skip warm-up steps
measured = statistics.median(r["bubble"] for r in rows)
ms = statistics.median(r["step_ms"] for r in rows)
print(f"| {k} | {m} | {schedule} | {bubble} | {100 * measured:.1f}% | {float(step):.1f} | {ms:.2f} |")
PY
    done
  done
done
echo
echo "machine: $(nproc) cores; one compute thread per rank (oneDNN); micro-batches of 16 samples, width $width."
