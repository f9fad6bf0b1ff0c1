#!/usr/bin/env bash
# The README's test command: set up, build, and run the whole test suite (unit tests, the
# multi-process tests under mpirun, the end-to-end runs). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DGPIPE_BUILD_TESTS=ON
# Open MPI refuses to run as root without these; tests also pass --allow-run-as-root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)"
# The installed CMake package and examples/embed built against it, run under mpirun.
bash scripts/package_test.sh
