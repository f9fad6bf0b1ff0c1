#!/usr/bin/env bash
# Pipeline x data parallelism on 4 processes: K=4 stages x D=1, K=2 x D=2 and K=1 x D=4 on the
# same global batch and micro-batch size, each D > 1 with one gradient bucket per stage (the
# all-reduce starts when the backward ends) and with small buckets (each starts as soon as the
# backward has finished its layers, overlapping the rest). Prints markdown: median step time,
# samples/s, the gradient all-reduce's span (first bucket's start to last one's end) and the part
# of it the step waited for at its end (exposed), the slowest rank's.
#   bench/data_parallel.sh [steps] [device]
# device SIM (default): op and link times from the cost table (sim.peak_gflops,
# sim.link_gbps), set low here so that communication matters; CPU: real arithmetic and MPI over
# shared memory, 4 ranks on this machine's cores (on 2 cores read the times as relative).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8}
device=${2:-SIM}
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
plan=examples/mlp/plan.pbtxt
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sim="sim { peak_gflops: 2 link_gbps: 0.5 }"

run() {  # run STAGES REPLICAS BUCKET_BYTES -> a table row
  local k=$1 d=$2 bucket=$3 m=$((8 / $2))
  "$bin/gpipe-run" "$plan" \
    --override "pipeline { stages: $k data_parallel: $d micro_batches: $m }" \
    --override "training { steps: $steps }" \
    --override "runtime { device: $device log_every: 0 gradient_bucket_bytes: $bucket $sim }" \
    --metrics-out "$out/m.jsonl" < /dev/null > "$out/run.log" 2>&1 ||
    { tail -5 "$out/run.log" >&2; return 1; }
  python3 - "$out/m.jsonl" "$k" "$d" "$bucket" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = rows[1:] or rows
k, d, bucket = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
med = lambda f: statistics.median(f(r) for r in rows)
span = med(lambda r: max(r.get('all_reduce_ms', [0]))) if d > 1 else 0
exposed = med(lambda r: max(r.get('all_reduce_exposed_ms', [0]))) if d > 1 else 0
label = '-' if d == 1 else ('one per stage' if bucket >= 2**30 else f'{bucket // 1024} KiB')
print(f"| {k} | {d} | {label} | {med(lambda r: r['step_ms']):.1f} | "
      f"{med(lambda r: r['samples_per_s']):.0f} | {span:.2f} | {exposed:.2f} |")
PY
}

echo "### $device: examples/mlp, global batch 128, micro-batches of 16 samples, $steps steps"
echo
echo "| K stages | D replicas | gradient buckets | step ms | samples/s | all-reduce ms | exposed ms |"
echo "| ---: | ---: | --- | ---: | ---: | ---: | ---: |"
run 4 1 1073741824
for d in 2 4; do
  k=$((4 / d))
  run "$k" "$d" 1073741824
  run "$k" "$d" 65536
done
