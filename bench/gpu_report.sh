#!/usr/bin/env bash
# The GPU report: on a machine with an NVIDIA GPU, runs the CUDA half of the test suite, the GPU
# kernel benchmarks, the examples on the GPU and on the CPU, the Transformer-48 scaling on
# simulated accelerators costed by this GPU's measured layer times, and gpipe beside PyTorch
# (bench/torch_gpu_compare.py, where python3 imports a CUDA-enabled torch); writes one markdown
# report.
#   bench/gpu_report.sh [--out FILE] [--no-build] [--quick] [--data DIR] [--skip-examples]
#                       [--skip-torch]
#   --out FILE       the report (default bench/report-gpu-<date>.md)
#   --no-build       use prebuilt programs (GPIPE_BIN, default build/bin) and test binaries
#                    (GPIPE_TESTS, default build/tests), e.g. a device bundle; otherwise
#                    scripts/build.sh builds everything first (CUDA targets included when nvcc is
#                    on PATH)
#   --quick          few repetitions and steps: a smoke run of the whole report (a few minutes)
#   --data DIR       where the example data lives when not at Debian's paths: DIR/fashion-mnist/
#                    (the four IDX .gz files) and DIR/fortunes/ (cookie computers people science
#                    wisdom)
#   --skip-examples  leave out the example runs (their full-length CPU runs take the longest)
#   --skip-torch     leave out the PyTorch comparison
# Exit 0 with the report written (a failed test is reported, not fatal); 1 when the machine has
# no GPU or a program is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out="bench/report-gpu-$(date +%Y-%m-%d).md"
build=1 quick=0 data="" examples=1 torch=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --no-build) build=0 ;;
    --quick) quick=1 ;;
    --data) data=$2; shift ;;
    --skip-examples) examples=0 ;;
    --skip-torch) torch=0 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu_report: unknown argument $1" >&2; exit 1 ;;
  esac
  shift
done
die() { echo "gpu_report: $*" >&2; exit 1; }
bin=${GPIPE_BIN:-build/bin}
tests=${GPIPE_TESTS:-build/tests}
[ "$build" = 0 ] || bash scripts/build.sh > /dev/null
for program in gpipe-run gpipe-worker gpipe-plan gpipe-bench-kernels; do
  [ -x "$bin/$program" ] || die "no $bin/$program (build first, or set GPIPE_BIN)"
done
command -v nvidia-smi > /dev/null || die "nvidia-smi not found: this report needs an NVIDIA GPU"
gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) ||
  die "nvidia-smi sees no GPU"
[ -n "$gpus" ] || die "nvidia-smi sees no GPU"
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
exec 3> "$out"
say() { printf '%s\n' "$@" >&3; }
progress() { echo "gpu_report: $*" >&2; }

say "# GPU report, $(date +%Y-%m-%d)" ""
say "Commit $(git rev-parse --short HEAD 2> /dev/null || echo unknown); GPU: $gpus;" \
    "$(nproc) CPU cores. Reproduce with \`bench/gpu_report.sh$([ "$quick" = 1 ] && echo ' --quick')\`." ""

# --- 1. The CUDA test suite -------------------------------------------------------------------
# Test binaries run directly (ctest files hold the build machine's absolute paths). The
# conformance suites run their CUDA instances only; the others are CUDA-only binaries.
progress "test suite"
say "## The CUDA test suite" ""
say "Every op and layer against the CPU reference within the suite's tolerances, the device's" \
    "memory, copies and events, and the end-to-end equivalence runs with \`device: CUDA\`." ""
say "| binary | passed | skipped | failed | seconds |" "|---|---|---|---|---|"
failed_any=0
run_suite() {  # run_suite NAME [gtest args...]
  local name=$1; shift
  local path="$tests/$name"
  if [ ! -x "$path" ]; then say "| $name | – | – | not built | – |"; return; fi
  local t0 rc=0
  t0=$(date +%s)
  GPIPE_BIN_DIR=$(cd "$bin" && pwd) GPIPE_SOURCE_DIR=$(pwd) timeout 1800 "$path" "$@" \
      > "$work/$name.log" 2>&1 || rc=$?
  local passed skipped failed
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$work/$name.log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$work/$name.log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$work/$name.log" | tail -1)
  say "| $name | ${passed:-0} | ${skipped:-0} | ${failed:-0}$([ "$rc" = 0 ] || echo " (exit $rc)") | $(( $(date +%s) - t0 )) |"
  if [ "$rc" != 0 ]; then
    failed_any=1
    cp "$work/$name.log" "${out%.md}-$name.log"
  fi
}
# "cuda" and "cuda_fused" (the products on cuBLASLt, runtime.cuda.cublaslt_gemm, and bf16
# storage's attention on cuDNN, runtime.cuda.cudnn_attention).
run_suite device_ops_conformance_test --gtest_filter='*/cuda*'
run_suite device_layers_conformance_test --gtest_filter='*/cuda*'
run_suite device_cuda_device_test
run_suite device_cudnn_attention_test
run_suite e2e_cuda_equivalence_test
say ""
[ "$failed_any" = 0 ] || say "Logs of the failing binaries: \`${out%.md}-*.log\`." ""

# --- 2. Kernels ---------------------------------------------------------------------------------
progress "kernels"
"$bin/gpipe-bench-kernels" --device cuda $([ "$quick" = 1 ] && echo --quick) > "$work/kernels.md"
cat "$work/kernels.md" >&3
say ""
# bf16 attention on the backend's kernels, on cuDNN deterministic (runtime.cuda.cudnn_attention)
# and on cuDNN's fastest backward: what the option gains and what its determinism costs.
if [ -x "$bin/gpipe-bench-cudnn-attention" ]; then
  "$bin/gpipe-bench-cudnn-attention" $([ "$quick" = 1 ] && echo "--repeats 5") \
      > "$work/cudnn_attention.md" 2>&1 || true
  cat "$work/cudnn_attention.md" >&3
  say ""
fi

# --- 3. Examples on GPU and CPU -----------------------------------------------------------------
# step_ms and samples/s: medians over the steps after the first 10% (warm-up); K = 1 for timing.
# The accuracy runs use the plans as written (K = 4): on one GPU the four ranks share it
# (runtime.cuda.share_gpu), which time-slices the GPU, so only their accuracy is reported.
data_overrides() {  # data_overrides EXAMPLE -> --override args for --data
  [ -n "$data" ] || return 0
  case "$1" in
    fashion_mnist)
      local d="$data/fashion-mnist"
      printf '%s\0' --override "data { idx { train_images: \"$d/train-images-idx3-ubyte.gz\" train_labels: \"$d/train-labels-idx1-ubyte.gz\" test_images: \"$d/t10k-images-idx3-ubyte.gz\" test_labels: \"$d/t10k-labels-idx1-ubyte.gz\" } }" ;;
    char_transformer)
      local d="$data/fortunes"
      printf '%s\0' --override "data { text { paths: [\"$d/cookie\", \"$d/computers\", \"$d/people\", \"$d/science\", \"$d/wisdom\"] } }" ;;
  esac
}
run_example() {  # run_example EXAMPLE DEVICE STAGES STEPS TAG
  local example=$1 device=$2 stages=$3 steps=$4 tag=$5
  local extra=()
  while IFS= read -r -d '' a; do extra+=("$a"); done < <(data_overrides "$example")
  local cuda=""
  [ "$device" = CUDA ] && cuda="cuda { share_gpu: true }"
  timeout 3600 "$bin/gpipe-run" "examples/$example/plan.pbtxt" -n "$stages" \
      --override "pipeline { stages: $stages }" --override "training { steps: $steps }" \
      --override "runtime { device: $device $cuda log_every: 0 }" "${extra[@]}" \
      --metrics-out "$work/$tag.jsonl" > "$work/$tag.log" 2>&1 ||
    { progress "$tag failed:"; tail -20 "$work/$tag.log" >&2; return 1; }
}
summarize() {  # summarize TAG -> "step_ms samples_per_s final_eval"
  python3 - "$work/$1.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
steps = [r for r in rows if not r.get("eval")]
evals = [r for r in rows if r.get("eval")]
steps = steps[max(1, len(steps) // 10):] or steps
ms = statistics.median(r["step_ms"] for r in steps)
sps = statistics.median(r["samples_per_s"] for r in steps)
last = evals[-1] if evals else {}
metric = ("%.2f%% accuracy" % (100 * last["accuracy"]) if "accuracy" in last and "bits_per_byte" not in last
          else "%.3f bits/byte" % last["bits_per_byte"] if "bits_per_byte" in last else "–")
print(f"{ms:.2f} {sps:.0f} {metric}")
PY
}
if [ "$examples" = 1 ]; then
  say "## Examples on the GPU and on the CPU" ""
  say "K = 1 for timing: median step time and samples/s after the first 10% of the steps" \
      "(CPU: the CPU backend, one compute thread as the plans say). Quality: the plans as" \
      "written (4 stages; on one GPU the 4 ranks share it), final held-out evaluation." ""
  say "| example | steps | CPU ms/step | GPU ms/step | CPU samples/s | GPU samples/s | GPU / CPU speed | CPU quality | GPU quality |"
  say "|---|---|---|---|---|---|---|---|---|"
  for example in fashion_mnist char_transformer; do
    if [ "$quick" = 1 ]; then timing_steps=30; full_steps=60; else timing_steps=200; full_steps=""; fi
    progress "example $example"
    run_example "$example" CPU 1 "$timing_steps" "$example-cpu-k1" || continue
    run_example "$example" CUDA 1 "$timing_steps" "$example-gpu-k1" || continue
    [ -n "$full_steps" ] || full_steps=$(sed -n 's/^ *steps: *\([0-9]*\).*/\1/p' \
                                         "examples/$example/plan.pbtxt" | head -1)
    run_example "$example" CPU 4 "$full_steps" "$example-cpu-k4" || continue
    run_example "$example" CUDA 4 "$full_steps" "$example-gpu-k4" || continue
    read -r cpu_ms cpu_sps _ <<< "$(summarize "$example-cpu-k1")"
    read -r gpu_ms gpu_sps _ <<< "$(summarize "$example-gpu-k1")"
    cpu_quality=$(summarize "$example-cpu-k4" | cut -d' ' -f3-)
    gpu_quality=$(summarize "$example-gpu-k4" | cut -d' ' -f3-)
    speed=$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.1f}x')" "$cpu_ms" "$gpu_ms")
    say "| $example | $full_steps | $cpu_ms | $gpu_ms | $cpu_sps | $gpu_sps | $speed | $cpu_quality | $gpu_quality |"
  done
  say ""
fi

# --- 4. Transformer-48 on simulated accelerators with this GPU's layer costs ----------------
progress "profile and simulated scaling"
"$bin/gpipe-plan" profile examples/sim_transformer48/plan.pbtxt --device cuda \
    $([ "$quick" = 1 ] && echo "--repeats 2") -o "$work/gpu_profile.json"
cp "$work/gpu_profile.json" "${out%.md}-profile.json"
say "## Transformer-48 on K simulated GPUs, costed by this GPU" ""
say "\`gpipe-plan profile --device cuda\` measured every layer of examples/sim_transformer48 on" \
    "this GPU (\`${out%.md}-profile.json\`); \`device: SIM\` then runs the real runtime with" \
    "each op sleeping for its measured time: what a K-GPU pipeline would do, from one GPU." ""
GPIPE_SIM_PROFILE="$(cd "$work" && pwd)/gpu_profile.json" \
  bash bench/sim_scaling.sh "$([ "$quick" = 1 ] && echo 2 || echo 3)" >&3
say ""

# --- 5. gpipe beside PyTorch on this GPU --------------------------------------------------------
# The block, char_transformer and GPT-2 small, both sides timed in one run (the script's
# docstring says how). Skipped, saying why, where python3 has no CUDA-enabled torch.
if [ "$torch" = 1 ]; then
  progress "PyTorch comparison"
  if torch_version=$(python3 -c 'import torch; assert torch.cuda.is_available(), "no CUDA"; print(torch.__version__)' 2>&1); then
    python3 bench/torch_gpu_compare.py --gpipe-bin "$bin" $([ "$quick" = 1 ] && echo --quick) \
        > "$work/torch_gpu.md" 2> "$work/torch_gpu.log" ||
      { say "The PyTorch comparison failed (log: \`${out%.md}-torch_gpu.log\`)." "";
        cp "$work/torch_gpu.log" "${out%.md}-torch_gpu.log"; }
    cat "$work/torch_gpu.md" >&3
    # The block again with its products on cuBLASLt: which GEMM path runtime.cuda.cublaslt_gemm
    # should default to.
    python3 bench/torch_gpu_compare.py --gpipe-bin "$bin" --workloads block --no-compile \
        --cublaslt $([ "$quick" = 1 ] && echo --quick) \
        > "$work/torch_gpu_lt.md" 2> "$work/torch_gpu_lt.log" ||
      { say "The cuBLASLt block comparison failed (log: \`${out%.md}-torch_gpu_lt.log\`)." "";
        cp "$work/torch_gpu_lt.log" "${out%.md}-torch_gpu_lt.log"; }
    { say "### The block with runtime.cuda.cublaslt_gemm" ""; cat "$work/torch_gpu_lt.md" >&3; }
    # And with bf16 storage's attention on cuDNN too: whether runtime.cuda.cudnn_attention should
    # default to on.
    python3 bench/torch_gpu_compare.py --gpipe-bin "$bin" --workloads block --no-compile \
        --precision bf16 --cublaslt --cudnn-attention $([ "$quick" = 1 ] && echo --quick) \
        > "$work/torch_gpu_cudnn.md" 2> "$work/torch_gpu_cudnn.log" ||
      { say "The cuDNN attention block comparison failed (log: \`${out%.md}-torch_gpu_cudnn.log\`)." "";
        cp "$work/torch_gpu_cudnn.log" "${out%.md}-torch_gpu_cudnn.log"; }
    { say "### The block with runtime.cuda.cublaslt_gemm and runtime.cuda.cudnn_attention" "";
      cat "$work/torch_gpu_cudnn.md" >&3; }
    # The small models' steps again with runtime.cuda.graphs (captured once, replayed): whether
    # it should default to on, and the launches per step it saves.
    python3 bench/torch_gpu_compare.py --gpipe-bin "$bin" --workloads char,gpt2 --no-compile \
        --graphs $([ "$quick" = 1 ] && echo --quick) \
        > "$work/torch_gpu_graphs.md" 2> "$work/torch_gpu_graphs.log" ||
      { say "The runtime.cuda.graphs comparison failed (log: \`${out%.md}-torch_gpu_graphs.log\`)." "";
        cp "$work/torch_gpu_graphs.log" "${out%.md}-torch_gpu_graphs.log"; }
    { say "### Training steps with runtime.cuda.graphs" ""; cat "$work/torch_gpu_graphs.md" >&3; }
  else
    say "## gpipe beside PyTorch on one GPU" "" \
        "Skipped: python3 has no CUDA-enabled PyTorch ($(tail -1 <<< "$torch_version"))." ""
  fi
fi
say "" "Report time $(( ($(date +%s) - started) / 60 )) min."
progress "wrote $out"
