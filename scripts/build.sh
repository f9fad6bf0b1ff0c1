#!/usr/bin/env bash
# Installs dependencies (scripts/setup.sh) and builds everything into build/ (programs in
# build/bin/), the CUDA backend too where nvcc is found. Extra arguments go to the CMake
# configure step (they come last, so they win).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPIPE_CUDA=ON "$@"
cmake --build build -j "$(nproc)"
