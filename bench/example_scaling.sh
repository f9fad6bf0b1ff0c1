#!/usr/bin/env bash
# Throughput of the main example (examples/mlp/plan.pbtxt) at K = 1, 2, 4 stages on this
# machine's CPU backend, one run each, in one sitting (compare the ratios, not absolute numbers:
# the machine is shared and noisy). Prints a markdown table.
#   bench/example_scaling.sh [steps] [micro_batches]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-40}
micro_batches=${2:-8}
bin=build/bin
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| stages K | micro-batches M | samples/s (median) | step ms (median) | measured bubble | predicted bubble (K-1)/(M+K-1) | peak memory of fullest stage |"
echo "|---|---|---|---|---|---|---|"
for k in 1 2 4; do
  "$bin/gpipe-run" examples/mlp/plan.pbtxt \
      --override "pipeline { stages: $k micro_batches: $micro_batches }" \
      --override "training { steps: $steps }" --override "runtime { log_every: 0 }" \
      --metrics-out "$out/k$k.jsonl" > "$out/k$k.log" 2>&1 || { cat "$out/k$k.log" >&2; exit 1; }
  python3 - "$out/k$k.jsonl" "$k" "$micro_batches" <<'PY'
import json, statistics, sys
path, k, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(line) for line in open(path)][5:]  # skip warm-up steps
sps = statistics.median(r["samples_per_s"] for r in rows)
ms = statistics.median(r["step_ms"] for r in rows)
bubble = statistics.median(r["bubble"] for r in rows)
peak = max(max(r["peak_bytes"]) for r in rows)
print(f"| {k} | {m} | {sps:.0f} | {ms:.2f} | {100*bubble:.1f}% | {100*(k-1)/(m+k-1):.1f}% | {peak/1024:.0f} KiB |")
PY
done
echo
echo "machine: $(nproc) cores; one compute thread per rank (oneDNN); ranks beyond the core count share cores."
