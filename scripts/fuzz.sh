#!/usr/bin/env bash
# Runs every libFuzzer target (tests/fuzz) for SECONDS each (default 60), one per core at a
# time, seeded from the committed plans, data, safetensors and checkpoints, in the sanitizer build
# (scripts/sanitize.sh builds it; this script builds it too when missing). A crash, hang (10 s per
# input), sanitizer report or memory blow-up (2 GiB) fails it; the failing input is kept in
# build-sanitize/fuzz/. Prints each target's executions. Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
if [ ! -x build-sanitize/fuzz/plan_fuzz ]; then
  bash scripts/setup.sh
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPIPE_PCH=OFF -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DGPIPE_SANITIZE=address,undefined -DGPIPE_FUZZ=ON \
    -DGPIPE_CUDA=OFF -DGPIPE_BUILD_BENCH=OFF -DGPIPE_BUILD_TESTS=ON -DGPIPE_BUILD_E2E_TESTS=OFF \
    -DGPIPE_BUILD_EXAMPLES=OFF
fi
cmake --build build-sanitize -j "$(nproc)" --target plan_fuzz safetensors_fuzz npy_fuzz \
  idx_fuzz checkpoint_manifest_fuzz checkpoint_shard_fuzz
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# seeds TARGET FILE...: a fresh corpus directory for TARGET holding FILE...
seeds() {
  local dir="build-sanitize/fuzz/corpus-$1"
  rm -rf "$dir" && mkdir -p "$dir"
  shift
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$dir/$(echo "$f" | tr '/' '_')"; done
  echo "$dir"
}
shopt -s nullglob globstar
declare -A corpus
corpus[plan_fuzz]=$(seeds plan examples/*/plan.pbtxt tests/e2e/testdata/*.pbtxt tests/hostile/plans/*.pbtxt)
corpus[safetensors_fuzz]=$(seeds safetensors tests/ckpt/testdata/*.safetensors tests/hostile/safetensors/*)
corpus[checkpoint_shard_fuzz]=$(seeds shard tests/ckpt/testdata/*.safetensors tests/hostile/safetensors/*)
corpus[npy_fuzz]=$(seeds npy tests/**/*.npy)
corpus[idx_fuzz]=$(seeds idx tests/hostile/idx/*)
corpus[checkpoint_manifest_fuzz]=$(seeds manifest tests/hostile/checkpoints/*/manifest.pbtxt tests/fuzz/seeds/*.pbtxt)

# One target per core at a time, each for SECONDS: the whole run takes SECONDS x ceil(targets /
# cores), not SECONDS x targets.
targets=(plan_fuzz safetensors_fuzz npy_fuzz idx_fuzz checkpoint_manifest_fuzz checkpoint_shard_fuzz)
parallel=$(nproc)
run_target() {
  local target=$1 log="build-sanitize/fuzz/$1.log"
  if (cd build-sanitize/fuzz && "./$target" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 "$(basename "${corpus[$target]}")" \
        >"$(basename "$log")" 2>&1); then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz: $target: $runs executions in ${seconds} s, no failure"
  else
    echo "fuzz: $target FAILED; the end of $log:" >&2
    tail -40 "$log" >&2
    return 1
  fi
}
status=0
for ((i = 0; i < ${#targets[@]}; i += parallel)); do
  pids=()
  for target in "${targets[@]:i:parallel}"; do
    run_target "$target" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
done
exit "$status"
