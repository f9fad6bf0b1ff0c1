#!/usr/bin/env bash
# The README's main example: set up, build, and train examples/mlp/plan.pbtxt on 4 CPU stages.
# Extra arguments go to gpipe-run (e.g. --override 'training { steps: 20 }').
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/bin/gpipe-run examples/mlp/plan.pbtxt "$@"
