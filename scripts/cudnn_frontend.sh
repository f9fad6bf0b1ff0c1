#!/usr/bin/env bash
# Installs NVIDIA's header-only cudnn-frontend, pinned, where CMake finds it (PREFIX/include,
# PREFIX default /usr/local): the CUDA backend's fused attention on cuDNN
# (runtime.cuda.cudnn_attention, runtime/device/cuda/cudnn_attention.h) is built with it.
# Idempotent: an install of the pinned version is left as it is. Called by scripts/setup.sh
# where a CUDA compiler is present.
#
# The headers come from the nvidia-cudnn-frontend wheel on the Python package index (NVIDIA
# publishes no Debian package of them): pip downloads the one pinned file, checked against its
# SHA-256, and its include/ directory is copied out; nothing is pip-installed. A CPU-only build
# needs none of this, and a CUDA build without it builds everything but that option (CMake says
# so).
set -euo pipefail

version=1.32.0
# The wheel's include/ is the same in every wheel of a release; this one is pinned by its hash.
wheel_python=3.11
wheel_platform=manylinux_2_28_x86_64
wheel_sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
prefix=${PREFIX:-/usr/local}

installed="$prefix/include/cudnn_frontend_version.h"
if [ -f "$installed" ]; then
  have=$(awk '/define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION/ {printf "%s%s", sep, $3; sep="."}' \
    "$installed")
  if [ "$have" = "$version" ]; then
    echo "cudnn_frontend: $version present in $prefix/include"
    exit 0
  fi
  echo "cudnn_frontend: replacing $have in $prefix/include with $version"
fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "cudnn_frontend: only the x86_64 wheel is pinned; install cudnn-frontend $version's" \
    "headers into $prefix/include by hand to build runtime.cuda.cudnn_attention" >&2
  exit 0
fi

work=$(mktemp -d /tmp/cudnn-frontend.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "nvidia-cudnn-frontend==$version --hash=sha256:$wheel_sha256" >"$work/requirements.txt"
python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
  --python-version "$wheel_python" --platform "$wheel_platform" \
  -r "$work/requirements.txt" -d "$work/wheel"
python3 -m zipfile -e "$work"/wheel/*.whl "$work/unpacked"
[ -f "$work/unpacked/include/cudnn_frontend.h" ] || {
  echo "cudnn_frontend: the wheel holds no include/cudnn_frontend.h" >&2
  exit 1
}
sudo_cmd=()
mkdir -p "$prefix/include" 2>/dev/null || true
if [ ! -w "$prefix/include" ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" rm -rf "$prefix/include/cudnn_frontend"
"${sudo_cmd[@]}" cp -r "$work/unpacked/include/." "$prefix/include/"
echo "cudnn_frontend: installed $version into $prefix/include"
