#!/usr/bin/env bash
# The README's main example: set up, build what it runs, and train examples/mlp/plan.pbtxt on 4
# CPU stages. Extra arguments go to gpipe-run (e.g. --override 'training { steps: 20 }').
# Only the packages that build needs are installed (`setup.sh --build`), and only gpipe-run,
# gpipe-worker and the libraries they link are built (no tests, benchmarks or examples); a fresh
# build/ leaves the CUDA backend out unless the run asks for `device: CUDA` (an existing build/
# keeps its configuration, so scripts/test.sh's tree is not rebuilt).
set -euo pipefail
cd "$(dirname "$0")/.."
plan=examples/mlp/plan.pbtxt
bash scripts/setup.sh --build
configure=()
if grep -qE 'device:[[:space:]]*CUDA' "$plan" || printf '%s\n' "$@" | grep -qE 'device:[[:space:]]*CUDA'; then
  configure+=(-DGPIPE_CUDA=ON)
elif [ ! -f build/CMakeCache.txt ]; then
  configure+=(-DGPIPE_CUDA=OFF)
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure[@]}"
cmake --build build -j "$(nproc)" --target gpipe-run gpipe-worker
exec build/bin/gpipe-run "$plan" "$@"
