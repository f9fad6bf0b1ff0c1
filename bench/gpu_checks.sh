#!/usr/bin/env bash
# The GPU session's checks of what CPU sessions could only compile, as one script of about 7
# minutes on one H100/H200: the CUDA conformance cases (plain and with the fused paths on:
# cuBLASLt products, cuDNN attention), cuDNN's attention taken and deterministic, device capture,
# compute-sanitizer memcheck and racecheck on the newest kernels, the CUDA equivalence and
# training-controls runs, NCCL on one rank, char_transformer's losses with runtime.cuda.graphs on
# and off (bit-identical), and the timings the defaults of runtime.cuda.cublaslt_gemm,
# cudnn_attention and graphs wait for. Each check has a time limit; a failure is reported and the
# script goes on. Prints a markdown summary; every check's log is kept in LOGS.
#
#   bench/gpu_checks.sh [BIN [TESTS]]      (default build/bin and build/tests)
#   LOGS=DIR   where the logs go (default a new directory under /tmp, printed)
#
# On the device tool's machine, from a bundle made here (../shared/tools/device-bundle.sh):
#   device-bundle.sh .devbundle build/bin/* build/tests/{device_ops_conformance_test,\
#     device_layers_conformance_test,device_cuda_device_test,device_cudnn_attention_test,\
#     device_capture_memory_test,e2e_cuda_equivalence_test,e2e_training_controls_test,\
#     gpipe_comm_nccl_test}
#   then: source .devbundle/env.sh && LOGS=$OUT bench/gpu_checks.sh .devbundle/bin
# The tests find the programs and the sources through GPIPE_BIN_DIR and GPIPE_SOURCE_DIR, which
# this script sets (ctest files hold this machine's absolute paths, so binaries run directly).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bin}
tests=${2:-${1:-build/tests}}
export logs=${LOGS:-$(mktemp -d /tmp/gpu-checks.XXXXXX)} bin
mkdir -p "$logs"
export GPIPE_BIN_DIR=$bin GPIPE_SOURCE_DIR=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
started=$(date +%s)
failed=0

echo "# GPU checks, $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "Commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown);" \
  "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1);" \
  "logs in \`$logs\`."
echo
echo "| check | result | passed | skipped | failed | s |"
echo "|---|---|---|---|---|---|"

# check NAME LIMIT_S COMMAND...: one row; a gtest binary's counts come from its log.
check() {
  local name=$1 limit=$2
  shift 2
  local t0 rc passed skipped failures
  t0=$(date +%s)
  # Through bash, so that a check may be one of the functions below (exported).
  timeout "$limit" bash -c '"$@"' check "$@" >"$logs/$name.log" 2>&1
  rc=$?
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$logs/$name.log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$logs/$name.log" | tail -1)
  failures=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$logs/$name.log" | tail -1)
  local result=ok
  if [ "$rc" = 124 ]; then
    result="TIMED OUT after ${limit}s"
  elif [ "$rc" != 0 ]; then
    result="FAILED (exit $rc)"
  fi
  [ "$result" = ok ] || failed=1
  echo "| $name | $result | ${passed:--} | ${skipped:--} | ${failures:--} | $(($(date +%s) - t0)) |"
}

cuda_cases='*/cuda:*/cuda_fused'
check ops_conformance 150 "$tests/device_ops_conformance_test" --gtest_filter="$cuda_cases"
check layers_conformance 150 "$tests/device_layers_conformance_test" --gtest_filter="$cuda_cases"
check cuda_device 60 "$tests/device_cuda_device_test"
check cudnn_attention 60 "$tests/device_cudnn_attention_test"
check capture_memory 60 "$tests/device_capture_memory_test"
if command -v compute-sanitizer >/dev/null; then
  check memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$tests/device_ops_conformance_test" \
    --gtest_filter='*Capture*/cuda*:*Embedding*/cuda*:*Bf16C*/cuda*:*FusedAttention*Bf16*/cuda_fused'
  check racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$tests/device_ops_conformance_test" --gtest_filter='*RmsNormOpsTest*/cuda:*LossOpsTest*/cuda'
else
  echo "| memcheck, racecheck | skipped: no compute-sanitizer on PATH | - | - | - | 0 |"
fi
check cuda_equivalence 180 "$tests/e2e_cuda_equivalence_test"
check training_controls 150 "$tests/e2e_training_controls_test"
check nccl_one_rank 60 mpirun -np 1 "$tests/gpipe_comm_nccl_test" --gtest_filter=-*TwoRanks*

# char_transformer on one GPU, 6 steps, graphs off and on: the losses must be the same bits, and
# the graph run must report replays.
graphs_run() {  # graphs_run true|false -> metrics in $logs/graphs-$1.jsonl
  rm -f "$logs/graphs-$1.jsonl"
  "$bin/gpipe-run" examples/char_transformer/plan.pbtxt -n 1 \
    --override 'pipeline { stages: 1 }' \
    --override 'training { steps: 6 eval_every: 0 precision: BF16 }' \
    --override "runtime { device: CUDA cuda { graphs: $1 } log_every: 0 }" \
    --metrics-out "$logs/graphs-$1.jsonl"
}
compare_graphs() {
  graphs_run false && graphs_run true && python3 - "$logs" <<'PY'
import json, sys
def rows(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/graphs-{name}.jsonl") if l.strip()]
off, on = rows("false"), rows("true")
loss = lambda rs: [r["loss"] for r in rs if "loss" in r and not r.get("eval")]
print("losses off:", loss(off)); print("losses on: ", loss(on))
launches = [r.get("graph_launches") for r in on if "graph_launches" in r]
print("graph_launches by step:", launches)
assert loss(off) and loss(off) == loss(on), "the losses differ with graphs on and off"
print("[  PASSED  ] 1 test.")
PY
}
export -f graphs_run compare_graphs
check graphs_bit_identical 180 compare_graphs

# Timings (benchmarks: compare within this run).
check cudnn_attention_bench 120 "$bin/gpipe-bench-cudnn-attention" --repeats 10
check kernels_attention 120 "$bin/gpipe-bench-kernels" --device cuda --precision bf16 --only attention
check kernels_attention_fused 120 "$bin/gpipe-bench-kernels" --device cuda --precision bf16 \
  --only attention --cublaslt --cudnn-attention
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  check torch_block_fused 240 python3 bench/torch_gpu_compare.py --quick --gpipe-bin "$bin" \
    --workloads block --precision bf16 --no-compile --cublaslt --cudnn-attention \
    --out "$logs/torch_block_fused.md"
fi
echo
echo "Total $(($(date +%s) - started)) s."
for name in cudnn_attention_bench kernels_attention kernels_attention_fused torch_block_fused \
  graphs_bit_identical; do
  [ -f "$logs/$name.log" ] || continue
  echo
  echo "### $name"
  echo
  echo '```'
  tail -40 "$logs/$name.log"
  echo '```'
done
exit "$failed"
