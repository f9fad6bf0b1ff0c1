#!/usr/bin/env bash
# Checks gpipe as a CMake package, both ways a project embeds it (docs/embedding.md, "Installing
# and using gpipe from CMake"), from an already-built tree (scripts/build.sh; GPIPE_BUILD_DIR, default
# build/):
#   1. `cmake --install` into a temporary prefix; a consumer (the argument, default
#      examples/embed) is configured out of tree with find_package(gpipe) through
#      CMAKE_PREFIX_PATH, built, and the one program it builds runs under
#      `mpirun -np 2` (from the repository root, no arguments, 300 s at most);
#   2. a tiny consumer that add_subdirectory()s the gpipe sources and links gpipe::gpipe is
#      configured and generated, and checked to leave the parent's build type alone and to build
#      no gpipe tests. Not built: that compiles gpipe a second time, ~15 minutes on CI's 2 cores,
#      and route 1 already compiled and linked against the same targets.
# Exits non-zero on any failure. Usage: scripts/package_test.sh [CONSUMER_SOURCE_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${GPIPE_BUILD_DIR:-build}
consumer=$(realpath "${1:-examples/embed}")
work=$(mktemp -d /tmp/gpipe-package-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "== install ${build} into ${work}/prefix"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
echo "   $(wc -l <"$work/install.log") files"

echo "== find_package(gpipe): ${consumer}"
cmake -S "$consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$work/consumer" -j "$(nproc)"
mapfile -t programs < <(find "$work/consumer" -type f -executable -not -path '*/CMakeFiles/*')
if [[ ${#programs[@]} -ne 1 ]]; then
  echo "package_test: expected the consumer to build one program, found ${#programs[@]}:" \
    "${programs[*]:-none}" >&2
  exit 1
fi
echo "== mpirun -np 2 ${programs[0]}"
timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader "${programs[0]}"

echo "== add_subdirectory(gpipe): configure and generate only"
mkdir -p "$work/subdirectory"
cat >"$work/subdirectory/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(gpipe_subdirectory_consumer LANGUAGES C CXX)
add_subdirectory("${root}" gpipe)
add_executable(app main.cc)
target_link_libraries(app PRIVATE gpipe::gpipe)
EOF
cat >"$work/subdirectory/main.cc" <<'EOF'
#include "gpipe/version.h"
#include "layers/registry.h"
int main() { return gpipe::LayerRegistry::WithBuiltins().Contains("linear") ? 0 : 1; }
EOF
cmake -S "$work/subdirectory" -B "$work/subdirectory-build" >"$work/subdirectory.log" ||
  { cat "$work/subdirectory.log"; exit 1; }
if grep -q '^CMAKE_BUILD_TYPE:STRING=.' "$work/subdirectory-build/CMakeCache.txt"; then
  echo "package_test: gpipe as a subdirectory set the parent's CMAKE_BUILD_TYPE" >&2
  exit 1
fi
if [[ -e "$work/subdirectory-build/gpipe/tests" || -e "$work/subdirectory-build/gpipe/bench" ]]; then
  echo "package_test: gpipe as a subdirectory configured its tests or benchmarks" >&2
  exit 1
fi
echo "package_test: OK"
