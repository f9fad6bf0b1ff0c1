#!/usr/bin/env bash
# The balancer on a deliberately uneven model (examples/uneven_convnet: convolution widths 16 to
# 128 over planes 32x32 to 4x4): for each partition `gpipe-plan balance` weighs (its own, balance
# PARAMETERS, balance FLOPS, equal layer counts), the predicted step time and fullest stage beside
# the measured ones, on the simulated device (its op times are the prediction's cost table, so
# this checks the schedule and memory model) and on the CPU backend (real arithmetic: this checks
# the cost table against the machine). Three cases: layers costed by FLOPs, the same under a
# memory limit where only the memory-aware partition fits, and layers costed by
# `gpipe-plan profile` on this CPU (so the CPU column is the one the choice is made for).
# Prints markdown.
#   bench/balance.sh [steps] [memory_limit_bytes]
# Measured: the median step time over the steps after the first, and the largest peak_bytes of
# any stage (what the metrics file reports). K = 4 ranks on this machine's cores: on 2 cores the
# CPU runs share them, so read CPU times as relative.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8}
limit=${2:-6500000}
bin=${GPIPE_BIN:-build/bin}
[ -x "$bin/gpipe-run" ] || { echo "build first: scripts/build.sh" >&2; exit 1; }
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
plan=examples/uneven_convnet/plan.pbtxt
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

measure() {  # measure DEVICE FIRST_LAYERS... -> "step_ms peak_bytes"
  local device=$1; shift
  local names=("$@") bounds="" extra=()
  [ -z "$sim_override" ] || extra=(--override "$sim_override")
  for n in "${names[@]:1}"; do bounds="$bounds\"$n\", "; done
  "$bin/gpipe-run" "$plan" -n 4 --override "pipeline { stages: 4 boundaries: [${bounds%, }] }" \
    --override "training { steps: $steps }" --override "runtime { device: $device log_every: 0 }" \
    "${extra[@]}" \
    --metrics-out "$out/m.jsonl" < /dev/null > "$out/run.log" 2>&1 || { tail -5 "$out/run.log" >&2; return 1; }
  python3 - "$out/m.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' not in l]
rows = rows[1:] or rows
print(f"{statistics.median(r['step_ms'] for r in rows):.1f} {max(max(r['peak_bytes']) for r in rows)}")
PY
}
mib() { python3 -c "import sys; print(f'{int(sys.argv[1]) / 2**20:.2f} MiB')" "$1"; }

"$bin/gpipe-plan" profile "$plan" -o "$out/cpu_profile.json" > /dev/null
for case in free limited profiled; do
  args=() sim_override=""
  case $case in
    free) title="Costs from FLOPs at sim.peak_gflops, no memory limit" ;;
    limited) title="Costs from FLOPs, memory limit $(mib "$limit") per stage"
             args=(--memory-limit "$limit") ;;
    profiled) title="Costs measured on this CPU (gpipe-plan profile), no memory limit"
              sim_override="runtime { sim { profile: \"$out/cpu_profile.json\" } }"
              args=(--override "$sim_override") ;;
  esac
  "$bin/gpipe-plan" balance "$plan" "${args[@]}" > "$out/balance.txt"
  echo "### $title"
  echo
  echo '```'
  cat "$out/balance.txt"
  echo '```'
  echo
  echo "| partition | first layers | fits | predicted ms | SIM ms | CPU ms | predicted fullest | SIM fullest | CPU fullest |"
  echo "|---|---|---|---|---|---|---|---|---|"
  sed -n '3,6p' "$out/balance.txt" | while read -r line; do
    chosen=""; [ "${line:0:1}" = "*" ] && chosen=" (chosen)"
    line=${line#\* }
    method=$(echo "$line" | sed -E 's/^(.*[a-zA-Z]) +[0-9.]+ +[0-9.]+ [KMG]?i?B .*/\1/')
    read -r ms size unit fits l1 l2 l3 l4 <<< "$(echo "${line#"$method"}")"
    read -r sim_ms sim_peak <<< "$(measure SIM "$l1" "$l2" "$l3" "$l4")"
    read -r cpu_ms cpu_peak <<< "$(measure CPU "$l1" "$l2" "$l3" "$l4")"
    echo "| $method$chosen | $l1 $l2 $l3 $l4 | $fits | $ms | $sim_ms | $cpu_ms | $size $unit | $(mib "$sim_peak") | $(mib "$cpu_peak") |"
  done
  echo
done
