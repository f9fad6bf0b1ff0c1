#!/usr/bin/env bash
# Builds gpipe with clang under AddressSanitizer and UndefinedBehaviorSanitizer (and the
# libFuzzer targets) into build-sanitize/, and runs the unit and multi-process suites there.
# Any sanitizer report fails the test that triggered it. Usage: scripts/sanitize.sh [ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPIPE_PCH=OFF -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DGPIPE_SANITIZE=address,undefined -DGPIPE_FUZZ=ON \
  -DGPIPE_CUDA=OFF -DGPIPE_BUILD_BENCH=OFF -DGPIPE_BUILD_TESTS=ON -DGPIPE_BUILD_E2E_TESTS=OFF \
  -DGPIPE_BUILD_EXAMPLES=OFF
cmake --build build-sanitize -j "$(nproc)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI and protobuf keep allocations until exit by design: leaks are not checked.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-sanitize --output-on-failure --no-tests=error -j "$(nproc)" \
  -L 'unit|mpi' -LE 'sweep|gpu' "$@"
