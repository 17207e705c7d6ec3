#!/usr/bin/env bash
# Installs what poslab needs on Debian 12 (when missing) and builds it in ./build (Release).
# Run as root, or with sudo available. Safe to re-run: it installs nothing already present.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build libtorch-dev nlohmann-json3-dev libspdlog-dev libgtest-dev
          libcli11-dev libopenblas0-pthread libgloo-dev python3-torch python3-matplotlib
          libsentencepiece-dev python3-sentencepiece pkg-config)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  # libopenblas0-pthread replaces the reference BLAS that Debian's LibTorch links (~15x faster matmuls).
  # libgloo-dev: the headers of c10d's Gloo backend (data-parallel training; LibTorch ships none).
  # libsentencepiece-dev (found with pkg-config): poslab-tokenize; python3-sentencepiece: the tests compare its ids.
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build_type=${POSLAB_BUILD_TYPE:-Release}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" ${POSLAB_CMAKE_ARGS:-}
cmake --build build
