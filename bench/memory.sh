#!/usr/bin/env bash
# Measured against predicted peak memory per stage, for every training schedule and
# re-materialization policy, on the main example (examples/mlp/plan.pbtxt: 11 layers) cut into
# 4 stages x 8 micro-batches. For each (schedule, remat) it runs 2 training steps with gpipe-run
# and reads the metrics file's per-stage peak_activation_bytes, peak_boundary_bytes and
# peak_boundary_grad_bytes (the largest over the steps), and takes the prediction from
# `gpipe-plan show` under the same overrides. Prints a markdown section.
#   bench/memory.sh [plan]
# Then, with remat ALWAYS, the device and host peaks with and without activation offload
# (pipeline.offload STAGE_INPUTS) on the CPU and on SIM, measured against predicted.
# GPIPE_BIN=DIR takes gpipe-plan and gpipe-run from DIR instead of build/bin. About a minute on
# 2 cores (23 runs of 4 processes).
set -euo pipefail
cd "$(dirname "$0")/.."
plan=${1:-examples/mlp/plan.pbtxt}
bin=${GPIPE_BIN:-build/bin}  # where gpipe-plan and gpipe-run are
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
# 4 ranks on fewer cores needs oversubscription.
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

stages=4
micro_batches=8
echo "## Peak memory per stage: measured against predicted"
echo
echo "\`$plan\` on $stages stages x $micro_batches micro-batches, 2 training steps per"\
     "(schedule, remat) with \`gpipe-run --metrics-out\`: measured is each stage's largest"\
     "per-step peak of activation (tensors layers save for backward, and stage outputs until"\
     "sent), boundary (stage inputs kept) and boundary_grad (gradients in flight) bytes;"\
     "predicted is \`gpipe-plan show\`'s peak for the same overrides (printed in KiB to 0.1, so"\
     "ratios carry about 0.1% rounding). The prediction models no temporaries inside a layer,"\
     "so activation may measure above it by up to two of a layer's tensors. INTERLEAVED_1F1B"\
     "runs with virtual_stages 2."
echo
echo "| schedule | remat | stage | activation measured | predicted | ratio | boundary measured | predicted | ratio | boundary_grad measured | predicted | ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for schedule in GPIPE ONE_F_ONE_B ZERO_BUBBLE_H1 ZERO_BUBBLE_H2 INTERLEAVED_1F1B; do
  v=1
  [ "$schedule" = INTERLEAVED_1F1B ] && v=2
  for remat in NEVER EXCEPT_LAST ALWAYS; do
    overrides=(--override "pipeline { stages: $stages micro_batches: $micro_batches schedule: $schedule virtual_stages: $v remat: $remat }"
               --override "training { steps: 2 }" --override "runtime { log_every: 0 }")
    if ! "$bin/gpipe-plan" show "$plan" "${overrides[@]}" > "$out/show.txt" 2>&1; then
      echo "| $schedule | $remat | — | not applicable: $(head -n 1 "$out/show.txt") |"
      continue
    fi
    "$bin/gpipe-run" "$plan" -n "$stages" "${overrides[@]}" --metrics-out "$out/m.jsonl" \
        > "$out/run.log" 2>&1 || { cat "$out/run.log" >&2; exit 1; }
    python3 - "$out/show.txt" "$out/m.jsonl" "$schedule" "$remat" <<'PY'
import json, re, sys
show_path, metrics_path, schedule, remat = sys.argv[1:5]
units = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
size = re.compile(r"(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)\b")
# The show table: "stage live bubble parameters optimizer boundary activation boundary_grad total".
lines = open(show_path).read().splitlines()
header = next(i for i, l in enumerate(lines) if re.match(r"stage\s+live\s+bubble", l))
predicted = []
for line in lines[header + 1:]:
    if not re.match(r"\d+\s", line):
        break
    values = [float(v) * units[u] for v, u in size.findall(line)]
    _, _, boundary, activation, boundary_grad, _ = values
    predicted.append({"activation": activation, "boundary": boundary,
                      "boundary_grad": boundary_grad})
records = [json.loads(l) for l in open(metrics_path) if l.strip()]
records = [r for r in records if not r.get("eval")]
def measured(kind, stage):
    return max(r[f"peak_{kind}_bytes"][stage] for r in records)
def kib(b):
    return f"{b / 1024:.1f} KiB"
for stage, pred in enumerate(predicted):
    cells = [schedule, remat, str(stage)]
    for kind in ("activation", "boundary", "boundary_grad"):
        m, p = measured(kind, stage), pred[kind]
        ratio = f"{m / p:.3f}" if p > 0 else ("1.000" if m == 0 else "—")
        cells += [kib(m), kib(p), ratio]
    print("| " + " | ".join(cells) + " |")
PY
  done
done

# Activation offload: the same plan with remat ALWAYS, its stage inputs kept on the device and
# offloaded to host memory (pipeline.offload STAGE_INPUTS), on the CPU and on SIM.
echo
echo "## Activation offload: device and host peaks per stage, measured against predicted"
echo
echo "\`$plan\` on $stages stages x $micro_batches micro-batches, remat ALWAYS, 2 training steps:"\
     "the device's total peak (measured: metrics peak_bytes) and its boundary bytes, and the"\
     "host memory holding offloaded stage inputs (measured: peak_offload_bytes; predicted: the"\
     "host peak of \`gpipe-plan show\`'s offload table), the largest over the steps."
echo
echo "| device | schedule | stage inputs | stage | peak measured | boundary measured | predicted | host measured | predicted |"
echo "|---|---|---|---|---|---|---|---|---|"
for device in CPU SIM; do
  for schedule in GPIPE ONE_F_ONE_B; do
    for offload in KEEP_ON_DEVICE STAGE_INPUTS; do
      overrides=(--override "pipeline { stages: $stages micro_batches: $micro_batches schedule: $schedule remat: ALWAYS offload: $offload }"
                 --override "training { steps: 2 }" --override "runtime { log_every: 0 device: $device }")
      "$bin/gpipe-plan" show "$plan" "${overrides[@]}" > "$out/show.txt" 2>&1 ||
        { cat "$out/show.txt" >&2; exit 1; }
      "$bin/gpipe-run" "$plan" -n "$stages" "${overrides[@]}" --metrics-out "$out/m.jsonl" \
          > "$out/run.log" 2>&1 || { cat "$out/run.log" >&2; exit 1; }
      python3 - "$out/show.txt" "$out/m.jsonl" "$device" "$schedule" "$offload" <<'PY'
import json, re, sys
show_path, metrics_path, device, schedule, offload = sys.argv[1:6]
units = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
size = re.compile(r"(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)\b")
lines = open(show_path).read().splitlines()
def table(starts):
    header = next(i for i, l in enumerate(lines) if re.match(starts, l))
    rows = []
    for line in lines[header + 1:]:
        if not re.match(r"\d+\s", line):
            break
        rows.append([float(v) * units[u] for v, u in size.findall(line)])
    return rows
boundary = [row[2] for row in table(r"stage\s+live\s+bubble")]
host = [row[0] for row in table(r"stage\s+host peak")] if offload == "STAGE_INPUTS" else []
records = [json.loads(l) for l in open(metrics_path) if l.strip() and not json.loads(l).get("eval")]
def most(key, stage):
    return max(r.get(key, [0] * (stage + 1))[stage] for r in records)
def kib(b):
    return f"{b / 1024:.1f} KiB"
inputs = "host" if offload == "STAGE_INPUTS" else "device"
for stage, predicted in enumerate(boundary):
    cells = [device, schedule, inputs, str(stage), kib(most("peak_bytes", stage)),
             kib(most("peak_boundary_bytes", stage)), kib(predicted)]
    if host:
        cells += [kib(most("peak_offload_bytes", stage)), kib(host[stage])]
    else:
        cells += ["–", "–"]
    print("| " + " | ".join(cells) + " |")
PY
    done
  done
done
echo
echo "machine: $(nproc) cores; fp32; one compute thread per rank (oneDNN)."
