#!/usr/bin/env bash
# Installs the Debian packages gpipe needs (idempotent).
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

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
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
