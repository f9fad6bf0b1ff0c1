#!/usr/bin/env bash
# The GPipe paper's Table 1 on simulated accelerators: under one fixed memory budget per device,
# the largest transformer (blocks of the paper's Transformer layer shape scaled to fit: d_model
# 1024, 16 heads, 256 positions; batch 32 per replica in 8 micro-batches, Adam, GPipe schedule)
# that trains with K = 1, 2, 4, 8, 16 devices, without and with re-materialization, and with
# re-materialization and the optimizer state sharded over D = 8 data-parallel replicas
# (training.shard_optimizer_state: each of the K x 8 devices keeps 1/8 of its stage's Adam
# state). Each cell's model is found by `gpipe-plan balance --memory-limit BUDGET` (the
# memory-aware partitioner: parameters, gradients, Adam state, the schedule's live activations)
# over a search on the block count, then confirmed by two training steps on `device: SIM` with
# runtime.memory_limit_bytes = BUDGET (the simulated device counts every byte without holding
# it and fails an allocation past the limit; the second step's backward is the peak, with the
# optimizer state allocated by the first update); a sharded cell is confirmed only when its
# K x 8 ranks are at most MAX_RANKS (the others are the balancer's prediction alone). Prints
# markdown beside the paper's figures.
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

plan() {  # plan BLOCKS REMAT K [D] -> writes $out/plan.pbtxt (D > 1: sharded over D replicas)
  python3 - "$out/plan.pbtxt" "$1" "$2" "$3" "${4:-1}" <<'PY'
import sys
path, blocks, remat, k, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
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
pipeline {{ stages: {k} data_parallel: {d} micro_batches: 8 schedule: GPIPE remat: {remat} }}
training {{ global_batch: {32 * d} steps: 2 seed: 1 optimizer {{ adam {{ lr: 0.001 }} }}{shard} }}
data {{ synthetic {{ num_samples: 64 }} }}
runtime {{ device: SIM log_every: 0 sim {{ peak_gflops: 1000000000 }} }}
""")
PY
}
fits() {  # fits BLOCKS REMAT K [D] -> 0 when the balancer finds a partition within the budget
  [ "$1" -ge 1 ] || return 1
  plan "$1" "$2" "$3" "${4:-1}"
  "$bin/gpipe-plan" balance "$out/plan.pbtxt" --memory-limit "$budget" -o "$out/balanced.pbtxt" \
    > "$out/balance.txt" 2>&1
}
largest() {  # largest REMAT K [D] -> the most blocks that fit (0: none)
  local lo=0 hi=$2
  while fits "$hi" "$1" "$2" "${3:-1}"; do lo=$hi; hi=$((hi * 2)); done
  while [ $((hi - lo)) -gt 1 ]; do
    local mid=$(((lo + hi) / 2))
    if fits "$mid" "$1" "$2" "${3:-1}"; then lo=$mid; else hi=$mid; fi
  done
  echo "$lo"
}

echo "## Largest transformer per device count, $(python3 -c "print(f'{$budget / 2**30:g}')") GiB per device (GPipe Table 1 on SIM)"
echo
echo "| K | remat | optimizer state | blocks | parameters | × naive-1 | predicted fullest stage | SIM step within budget | peak measured |"
echo "|---|---|---|---|---|---|---|---|---|"
naive=""
for k in 1 2 4 8 16; do
  [ "$k" -le "$max_k" ] || break
  for variant in "NEVER 1" "ALWAYS 1" "ALWAYS $replicas"; do
    read -r remat d <<< "$variant"
    state=whole
    [ "$d" = 1 ] || state="1/$d (D = $d)"
    blocks=$(largest "$remat" "$k" "$d")
    if [ "$blocks" = 0 ]; then echo "| $k | $remat | $state | none fits | | | | | |"; continue; fi
    fits "$blocks" "$remat" "$k" "$d"
    params=$("$bin/gpipe-plan" check "$out/balanced.pbtxt" | sed -n 's/.* \([0-9,]*\) parameters.*/\1/p' | tr -d ,)
    fullest=$(sed -n 's/^\* [a-zA-Z ]*  *[0-9.]*  *\([0-9.]* [KMG]iB\).*/\1/p' "$out/balance.txt")
    [ -n "$naive" ] || naive=$params
    ranks=$((k * d))
    if [ "$ranks" -gt "$max_ranks" ]; then
      confirmed="not run ($ranks ranks > $max_ranks)"
      peak="–"
    elif timeout 900 "$bin/gpipe-run" "$out/balanced.pbtxt" -n "$ranks" \
        --override "runtime { memory_limit_bytes: $budget }" --metrics-out "$out/m.jsonl" \
        < /dev/null > "$out/run.log" 2>&1; then
      confirmed=yes
      peak=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(f'{max(max(x[\"peak_bytes\"]) for x in r) / 2**30:.2f} GiB')" "$out/m.jsonl")
    else
      confirmed="no: $(grep -m1 -o 'exceeds the limit[^;]*' "$out/run.log" || tail -1 "$out/run.log")"
      peak="–"
    fi
    echo "| $k | $remat | $state | $blocks | $(python3 -c "print(f'{$params / 1e6:,.0f}M')") | $(python3 -c "print(f'{$params / $naive:.1f}')") | $fullest | $confirmed | $peak |"
  done
done
echo
echo "Paper (GPipe Table 1): AmoebaNet on Cloud TPUv2 (8 GB): naive-1 82M parameters, pipeline-1"
echo "(re-materialization) 318M, pipeline-8 1.8B (about 25x); Transformer on TPUv3 (16 GB): naive-1"
echo "282M ... pipeline-128 83.9B (298x)."
