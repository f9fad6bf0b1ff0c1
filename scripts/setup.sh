#!/usr/bin/env bash
# Installs the Debian packages gpipe needs (idempotent), and, where a CUDA compiler is present,
# the pinned header-only cudnn-frontend (scripts/cudnn_frontend.sh) that runtime.cuda.cudnn_attention
# is built with.
# Usage: scripts/setup.sh            everything: build, tests, sanitizers, fuzzers, example data
#        scripts/setup.sh --build    only what building gpipe-run and gpipe-worker needs
#                                    (scripts/run_example.sh; a later plain call adds the rest)
# As root, or with sudo available.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ccache               # the compiler cache CMake uses when present (GPIPE_CCACHE)
  libopenmpi-dev openmpi-bin
  libprotobuf-dev protobuf-compiler
  libabsl-dev
  libgtest-dev libgmock-dev  # small; CMake looks for them when a build tree has tests on
  libdnnl-dev          # oneDNN: the CPU backend's matmul and convolution
  nlohmann-json3-dev
  zlib1g-dev
)
case "${1:-}" in
  --build) ;;
  "")
    packages+=(
      dataset-fashion-mnist fortunes  # the real-data examples and tests
      python3
      librsvg2-bin  # rsvg-convert: the timeline test renders SVG pictures to PNG
      clang libclang-rt-14-dev  # the sanitizer and libFuzzer builds (scripts/sanitize.sh, fuzz.sh)
    )
    ;;
  *)
    echo "setup: unknown argument '$1' (usage: scripts/setup.sh [--build])" >&2
    exit 2
    ;;
esac

# The CUDA backend's fused attention on cuDNN needs cudnn-frontend's headers; pip fetches them.
cuda_present=false
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  cuda_present=true
  command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 ||
    packages+=(python3 python3-pip)
fi

# Not fatal: without the headers everything builds but runtime.cuda.cudnn_attention (CMake says so).
install_cudnn_frontend() {
  if [ "$cuda_present" = true ]; then
    bash "$(dirname "$0")/cudnn_frontend.sh" ||
      echo "setup: cudnn-frontend was not installed; runtime.cuda.cudnn_attention will not be built" >&2
  fi
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  install_cudnn_frontend
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: missing packages (${missing[*]}); run this script as root or install sudo" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_cudnn_frontend
