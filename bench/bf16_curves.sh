#!/usr/bin/env bash
# fp32 against bf16 mixed precision (training.precision BF16) on the examples: the training loss
# at checkpoints, the final held-out evaluation and the median step time, side by side. K = 1 on
# the CPU backend by default (one compute thread, as the plans say); `device` CUDA runs them on
# the first GPU.
#   bench/bf16_curves.sh [steps] [device]      (default: 300 steps, CPU)
# Prints markdown. The evaluation runs once, after the last step, on the plan's held-out split
# (Fashion-MNIST: the 10,000 test images; char-transformer: the last 5% of the text).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
device=${2:-CPU}
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # run EXAMPLE PRECISION -> metrics file $out/EXAMPLE-PRECISION.jsonl
  timeout 3600 "$bin/gpipe-run" "examples/$1/plan.pbtxt" -n 1 \
    --override "pipeline { stages: 1 }" \
    --override "training { steps: $steps eval_every: $steps precision: $2 }" \
    --override "runtime { device: $device log_every: 0 }" \
    --metrics-out "$out/$1-$2.jsonl" < /dev/null > "$out/$1-$2.log" 2>&1 ||
    { echo "$1 $2 failed:" >&2; tail -20 "$out/$1-$2.log" >&2; exit 1; }
}

echo "## fp32 and bf16 mixed precision on the examples ($device, K = 1, $steps steps)"
echo
echo "Training loss (mean of the 10 steps ending at each checkpoint), the held-out evaluation after"
echo "the last step, and the median step time after the first 10% of the steps."
echo
for example in fashion_mnist char_transformer; do
  run "$example" FP32
  run "$example" BF16
  python3 - "$out/$example-FP32.jsonl" "$out/$example-BF16.jsonl" "$example" "$steps" <<'PY'
import json, statistics, sys
def load(path):
    rows = [json.loads(line) for line in open(path)]
    return [r for r in rows if not r.get("eval")], [r for r in rows if r.get("eval")]
(f_steps, f_eval), (b_steps, b_eval) = load(sys.argv[1]), load(sys.argv[2])
example, steps = sys.argv[3], int(sys.argv[4])
def window(rows, end):
    part = [r["loss"] for r in rows[max(0, end - 10):end]]
    return sum(part) / len(part)
def quality(evals):
    if not evals: return "–"
    e = evals[-1]
    if "bits_per_byte" in e: return "%.3f bits/byte" % e["bits_per_byte"]
    if "accuracy" in e: return "%.2f%% accuracy" % (100 * e["accuracy"])
    return "loss %.4f" % e["loss"]
def step_ms(rows):
    rows = rows[max(1, len(rows) // 10):] or rows
    return statistics.median(r["step_ms"] for r in rows)
print(f"### {example}\n")
print("| step | fp32 loss | bf16 loss | bf16 - fp32 |")
print("|---|---|---|---|")
for end in sorted({10, steps // 4, steps // 2, 3 * steps // 4, steps}):
    if end < 1 or end > min(len(f_steps), len(b_steps)): continue
    f, b = window(f_steps, end), window(b_steps, end)
    print(f"| {end} | {f:.4f} | {b:.4f} | {b - f:+.4f} |")
print()
print(f"Held-out after {steps} steps: fp32 {quality(f_eval)}, bf16 {quality(b_eval)}. "
      f"Median step: fp32 {step_ms(f_steps):.1f} ms, bf16 {step_ms(b_steps):.1f} ms.\n")
PY
done
