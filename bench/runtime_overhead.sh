#!/usr/bin/env bash
# The runtime's own cost per instruction: a pipeline of zero-cost layers on the simulated device
# (runtime { device: SIM } with every op, transfer and update costing nothing), so a step is
# nothing but the executor, the MPI transfers (headers only) and the gradient-sync barrier.
# Prints markdown: per K and M, the step time, instructions per stage per step (counted in a
# traced run), µs per instruction on the critical stage and µs per micro-batch per stage; and,
# from the trace, the time a rank spends per instruction outside waits (its CPU-side overhead).
#   bench/runtime_overhead.sh [steps]
# Target: <= 20 µs per instruction. With more ranks than cores (K=4 on 2 cores) the ranks share
# cores, so compare K <= 2 with the target.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# 8 narrow linear layers; every cost is zero.
cat > "$out/plan.pbtxt" <<'PLAN'
name: "zero-cost"
model {
  input { shape: [16] }
  layers { name: "l0" linear { out_features: 16 } }
  layers { name: "l1" linear { out_features: 16 } }
  layers { name: "l2" linear { out_features: 16 } }
  layers { name: "l3" linear { out_features: 16 } }
  layers { name: "l4" linear { out_features: 16 } }
  layers { name: "l5" linear { out_features: 16 } }
  layers { name: "l6" linear { out_features: 16 } }
  layers { name: "l7" linear { out_features: 4 } }
  loss { softmax_cross_entropy {} }
}
pipeline { remat: NEVER }
training { global_batch: 64 seed: 1 optimizer { sgd { lr: 0.01 } } }
data { synthetic { num_samples: 1024 } }
runtime {
  device: SIM
  log_every: 0
  sim { peak_gflops: 1e15 link_latency_us: 0 link_gbps: 1e9 loss_us: 0 optimizer_us: 0 }
}
PLAN

echo "## Runtime overhead with zero-cost layers"
echo
echo "8 linear layers on \`device: SIM\` with every op, transfer and update costing 0, so a step"
echo "is only the runtime: the executor's bookkeeping, MPI messages (headers), the gradient-sync"
echo "barrier with rank 0 and the step command. Step time: median of $((steps - 5)) steps after 5"
echo "warm-up steps. Instructions: counted per stage and step in a traced run (loads, forwards,"
echo "backwards, sends, receives, optimizer step). µs/instruction = step time / instructions of"
echo "the stage with the most. CPU-side µs/instruction (from the trace): a rank's step time minus"
echo "the time it waited in receives and in the barrier, per instruction, mean over ranks."
echo
echo "| schedule | K | M | step µs | instructions/stage | µs/instruction | µs per micro-batch per stage | CPU-side µs/instruction |"
echo "|---|---|---|---|---|---|---|---|"
for schedule in GPIPE ONE_F_ONE_B; do
  for k in 1 2 4; do
    for m in 4 16 64; do
      o="pipeline { stages: $k micro_batches: $m schedule: $schedule } training { steps: $steps }"
      timeout 600 "$bin/gpipe-run" "$out/plan.pbtxt" -n "$k" --override "$o" \
          --metrics-out "$out/m.jsonl" > "$out/run.log" 2>&1 || { cat "$out/run.log" >&2; exit 1; }
      timeout 600 "$bin/gpipe-run" "$out/plan.pbtxt" -n "$k" --override "$o" \
          --override "training { steps: 4 }" --trace "$out/trace.json" > "$out/run.log" 2>&1 ||
          { cat "$out/run.log" >&2; exit 1; }
      python3 - "$out/m.jsonl" "$out/trace.json" "$schedule" "$k" "$m" <<'PY'
import collections, json, statistics, sys
metrics, trace_path, schedule, k, m = sys.argv[1:]
k, m = int(k), int(m)
records = [json.loads(l) for l in open(metrics) if l.strip()]
step_us = 1000 * statistics.median(r["step_ms"] for r in records[5:])
events = [e for e in json.load(open(trace_path))["traceEvents"] if e["ph"] == "X"]
last = max(e["args"]["step"] for e in events)
count = collections.Counter()
span, waited = {}, collections.Counter()
for e in events:
    if e["args"]["step"] != last or e["args"]["eval"]:
        continue
    if e["cat"] == "step":
        span[e["pid"]] = e["dur"]
        continue
    if e["cat"] in ("recv_wait", "sync"):
        waited[e["pid"]] += e["dur"]
    # OptimizerStep records a sync span and an optimizer span: one instruction, counted once.
    if e["cat"] != "sync":
        count[e["pid"]] += 1
most = max(count.values())
cpu = statistics.mean((span[p] - waited[p]) / count[p] for p in count)
print(f"| {schedule} | {k} | {m} | {step_us:.0f} | {most} | {step_us / most:.1f} | "
      f"{step_us / m:.1f} | {cpu:.1f} |")
PY
    done
  done
done
