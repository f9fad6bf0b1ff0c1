#!/usr/bin/env bash
# Installs dependencies (scripts/setup.sh) and builds everything into build/ (programs in
# build/bin/). Extra arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j "$(nproc)"
