#!/usr/bin/env bash
# The README's test command: set up, build, and run the whole test suite (unit tests, the
# multi-process tests under mpirun, the end-to-end runs). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DGPIPE_BUILD_TESTS=ON
# Open MPI refuses to run as root without these; tests also pass --allow-run-as-root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Twice as many tests as cores: the multi-process and end-to-end tests mostly wait (on their
# ranks, mpirun and deadlines; measured here, 210 s of CPU in 421 s on 2 cores), so the in-process
# suites (the schedule sweep's threads, the conformance suites) use the cores meanwhile.
ctest --test-dir build --output-on-failure --no-tests=error -j "$((2 * $(nproc)))"
# The installed CMake package and examples/embed built against it, run under mpirun.
bash scripts/package_test.sh
