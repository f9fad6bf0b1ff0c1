#!/usr/bin/env bash
# The GPipe paper's Table 1 on simulated accelerators: under one fixed memory budget per device,
# the largest transformer (blocks of the paper's Transformer layer shape scaled to fit: d_model
# 1024, 16 heads, 256 positions; batch 32 per replica in 8 micro-batches, Adam, GPipe schedule)
# that trains with K = 1, 2, 4, 8, 16 devices, without and with re-materialization, and with
# re-materialization and the optimizer state sharded over D = 8 data-parallel replicas
# (training.shard_optimizer_state: each of the K x 8 devices keeps 1/8 of its stage's Adam
# state), then with the stage inputs offloaded to host memory as well (pipeline.offload
# STAGE_INPUTS), at M = 8 and at M = 32 micro-batches (the paper's M >= 4K at K = 8: the
# micro-batch a re-materializing backward rebuilds is 4x smaller). Each cell's model is found by `gpipe-plan balance --memory-limit BUDGET` (the
# memory-aware partitioner: parameters, gradients, Adam state, the schedule's live activations)
# over a search on the block count, then confirmed by two training steps on `device: SIM` with
# runtime.memory_limit_bytes = BUDGET (the simulated device counts every byte without holding
# it and fails an allocation past the limit; the second step's backward is the peak, with the
# optimizer state allocated by the first update); a sharded cell is confirmed only when its
# K x 8 ranks are at most MAX_RANKS (the others are the balancer's prediction alone). Prints
# markdown beside the paper's figures, then the step-time cost of offload on SIM (a K = 2 model
# timed at 100 TFLOP/s per device, runtime.sim.host_link_gbps 25 (PCIe 4.0 x16) and 2).
#   bench/largest_model.sh [budget_bytes] [max_k] [max_ranks]
# Default budget 16 GiB (the paper's TPUv3 Transformer row); K up to 16; 16 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-17179869184}
max_k=${2:-16}
max_ranks=${3:-16}
replicas=8  # the sharded rows' data-parallel replicas
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-plan" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# A variant: REMAT D OFFLOAD M (D > 1: the optimizer state sharded over D replicas; OFFLOAD
# STAGE_INPUTS or KEEP_ON_DEVICE; M micro-batches of the replica's 32 samples).
plan() {  # plan BLOCKS K REMAT D OFFLOAD M -> writes $out/plan.pbtxt
  python3 - "$out/plan.pbtxt" "$@" <<'PY'
import sys
path, blocks, k, remat, d, offload, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6], int(sys.argv[7])
shard = " shard_optimizer_state: true" if d > 1 else ""
layers = "\n".join(f'  layers {{ name: "h{i}" transformer_block {{ num_heads: 16 }} }}'
                   for i in range(blocks))
open(path, "w").write(f"""name: "largest-transformer"
model {{
  input {{ shape: [256, 1024] }}
{layers}
  layers {{ name: "flat" flatten {{}} }}
  layers {{ name: "head" linear {{ out_features: 10 }} }}
  loss {{ softmax_cross_entropy {{}} }}
}}
pipeline {{ stages: {k} data_parallel: {d} micro_batches: {m} schedule: GPIPE remat: {remat} offload: {offload} }}
training {{ global_batch: {32 * d} steps: 2 seed: 1 optimizer {{ adam {{ lr: 0.001 }} }}{shard} }}
data {{ synthetic {{ num_samples: 64 }} }}
runtime {{ device: SIM log_every: 0 sim {{ peak_gflops: 1000000000 }} }}
""")
PY
}
fits() {  # fits BLOCKS K REMAT D OFFLOAD M -> 0 when the balancer places it within the budget
  [ "$1" -ge 1 ] || return 1
  plan "$@"
  "$bin/gpipe-plan" balance "$out/plan.pbtxt" --memory-limit "$budget" -o "$out/balanced.pbtxt" \
    > "$out/balance.txt" 2>&1 || return 1
  # A row without offload counts only partitions that fit with the inputs on the device (the
  # balancer would otherwise turn offload on by itself).
  [ "$5" = STAGE_INPUTS ] || ! grep -q STAGE_INPUTS "$out/balanced.pbtxt"
}
largest() {  # largest K REMAT D OFFLOAD M -> the most blocks that fit (0: none)
  local lo=0 hi=$1
  while fits "$hi" "$@"; do lo=$hi; hi=$((hi * 2)); done
  while [ $((hi - lo)) -gt 1 ]; do
    local mid=$(((lo + hi) / 2))
    if fits "$mid" "$@"; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}

echo "## Largest transformer per device count, $(python3 -c "print(f'{$budget / 2**30:g}')") GiB per device (GPipe Table 1 on SIM)"
echo
echo "| K | remat | optimizer state | stage inputs | M | blocks | parameters | × naive-1 | predicted fullest stage | SIM step within budget | peak measured | host peak |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
naive=""
for k in 1 2 4 8 16; do
  [ "$k" -le "$max_k" ] || break
  for variant in "NEVER 1 KEEP_ON_DEVICE 8" "ALWAYS 1 KEEP_ON_DEVICE 8" \
      "ALWAYS $replicas KEEP_ON_DEVICE 8" "ALWAYS $replicas STAGE_INPUTS 8" \
      "ALWAYS $replicas KEEP_ON_DEVICE 32" "ALWAYS $replicas STAGE_INPUTS 32"; do
    read -r remat d offload m <<< "$variant"
    state=whole
    [ "$d" = 1 ] || state="1/$d (D = $d)"
    inputs=device
    [ "$offload" = KEEP_ON_DEVICE ] || inputs=host
    blocks=$(largest "$k" "$remat" "$d" "$offload" "$m")
    if [ "$blocks" = 0 ]; then
      echo "| $k | $remat | $state | $inputs | $m | none fits | | | | | | |"
      continue
    fi
    fits "$blocks" "$k" "$remat" "$d" "$offload" "$m"
    params=$("$bin/gpipe-plan" check "$out/balanced.pbtxt" | sed -n 's/.* \([0-9,]*\) parameters.*/\1/p' | tr -d ,)
    fullest=$(sed -n 's/^\* [a-zA-Z ]*  *[0-9.]*  *\([0-9.]* [KMG]iB\).*/\1/p' "$out/balance.txt")
    [ -n "$naive" ] || naive=$params
    ranks=$((k * d))
    host="–"
    if [ "$ranks" -gt "$max_ranks" ]; then
      confirmed="not run ($ranks ranks > $max_ranks)"
      peak="–"
    elif timeout 900 "$bin/gpipe-run" "$out/balanced.pbtxt" -n "$ranks" \
        --override "runtime { memory_limit_bytes: $budget }" --metrics-out "$out/m.jsonl" \
        < /dev/null > "$out/run.log" 2>&1; then
      confirmed=yes
      peak=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(f'{max(max(x[\"peak_bytes\"]) for x in r) / 2**30:.2f} GiB')" "$out/m.jsonl")
      [ "$offload" = KEEP_ON_DEVICE ] ||
        host=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(f'{max(max(x[\"peak_offload_bytes\"]) for x in r) / 2**20:.1f} MiB')" "$out/m.jsonl")
    else
      confirmed="no: $(grep -m1 -o 'exceeds the limit[^;]*' "$out/run.log" || tail -1 "$out/run.log")"
      peak="–"
    fi
    echo "| $k | $remat | $state | $inputs | $m | $blocks | $(python3 -c "print(f'{$params / 1e6:,.0f}M')") | $(python3 -c "print(f'{$params / $naive:.1f}')") | $fullest | $confirmed | $peak | $host |"
  done
done

# The step-time cost of offload: one model on K = 2 devices (no memory limit), timed at 100 TFLOP/s
# per device, with the stage inputs on the device and offloaded over host links of 25 and 2 GB/s.
echo
echo "## Step time of offload on SIM (K = 2, 64 blocks, M = 8 of 4 samples, remat ALWAYS, 100 TFLOP/s)"
echo
echo "| stage inputs | host link | median step | vs on device | offload wait (max rank) | moved per step (max rank) |"
echo "|---|---|---|---|---|---|"
base_ms=""
for variant in "KEEP_ON_DEVICE 25" "STAGE_INPUTS 25" "STAGE_INPUTS 2"; do
  read -r offload gbps <<< "$variant"
  plan 64 2 ALWAYS 1 "$offload" 8
  timeout 900 "$bin/gpipe-run" "$out/plan.pbtxt" -n 2 \
    --override "training { steps: 6 } runtime { sim { peak_gflops: 100000 host_link_gbps: $gbps } }" \
    --metrics-out "$out/t.jsonl" < /dev/null > "$out/t.log" 2>&1 || { tail -3 "$out/t.log"; exit 1; }
  read -r ms wait moved <<< "$(python3 - "$out/t.jsonl" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])][1:]  # the first step warms up
print(f"{statistics.median(x['step_ms'] for x in r):.2f}",
      f"{max(max(x.get('offload_wait_ms', [0])) for x in r):.2f}",
      f"{max(max(x.get('offloaded_bytes', [0])) for x in r) / 2**20:.0f}")
PY
)"
  [ -n "$base_ms" ] || base_ms=$ms
  inputs=device
  [ "$offload" = KEEP_ON_DEVICE ] || inputs=host
  echo "| $inputs | $gbps GB/s | $ms ms | $(python3 -c "print(f'{$ms / $base_ms:.3f}x')") | $wait ms | $moved MiB |"
done
echo
echo "Paper (GPipe Table 1): AmoebaNet on Cloud TPUv2 (8 GB): naive-1 82M parameters, pipeline-1"
echo "(re-materialization) 318M, pipeline-8 1.8B (about 25x); Transformer on TPUv3 (16 GB): naive-1"
echo "282M ... pipeline-128 83.9B (298x)."
