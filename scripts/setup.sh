#!/usr/bin/env bash
# Installs what poslab needs on Debian 12 (when missing) and builds it in ./build (Release).
# `setup.sh` installs and builds everything, the tests included; `setup.sh --main-job` only what the main
# job needs (no test packages, only the poslab executable), which is what scripts/quickstart.sh runs.
# Run as root, or with sudo available. Safe to re-run: it installs nothing already present.
set -euo pipefail
cd "$(dirname "$0")/.."

main_job=0
case "${1:-}" in
  --main-job) main_job=1 ;;
  "") ;;
  *) echo "setup.sh: unknown option '$1' (expected --main-job or nothing)" >&2; exit 2 ;;
esac

# The main job: the compiler and build tools, LibTorch, the C++ libraries poslab links, OpenBLAS and
# matplotlib for the plots.
packages=(build-essential cmake ninja-build libtorch-dev nlohmann-json3-dev libspdlog-dev libcli11-dev
          libopenblas0-pthread libgloo-dev python3-matplotlib)
# Everything else: GoogleTest, the PyPI-free reference twin (python3-torch), SentencePiece (poslab-tokenize
# and the Python module the tests compare its ids with).
((main_job)) || packages+=(libgtest-dev python3-torch libsentencepiece-dev python3-sentencepiece pkg-config)
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
# POSLAB_TESTS is given either way: a build directory configured by the main job's set-up gains its
# tests when the full set-up runs next.
if ((main_job)); then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DPOSLAB_TESTS=OFF ${POSLAB_CMAKE_ARGS:-}
  cmake --build build --target poslab
else
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DPOSLAB_TESTS=ON ${POSLAB_CMAKE_ARGS:-}
  cmake --build build
fi
