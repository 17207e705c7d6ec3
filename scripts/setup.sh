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

# The main job: the compiler and build tools, LibTorch, the C++ libraries poslab links, OpenBLAS; and
# matplotlib for the plots, which only the end of the main job needs.
packages=(build-essential cmake ninja-build libtorch-dev nlohmann-json3-dev libspdlog-dev libcli11-dev
          libopenblas0-pthread libgloo-dev libdnnl-dev patchelf)
plots=(python3-matplotlib)
# Everything else: GoogleTest, the PyPI-free reference twin (python3-torch), SentencePiece (poslab-tokenize
# and the Python module the tests compare its ids with).
((main_job)) || packages+=("${plots[@]}" libgtest-dev python3-torch libsentencepiece-dev python3-sentencepiece pkg-config)
missing_of() {  # the packages named that are not installed
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf '%s\n' "$p"
  done
}
mapfile -t missing < <(missing_of "${packages[@]}")
missing_plots=()
((main_job)) && mapfile -t missing_plots < <(missing_of "${plots[@]}")
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ((${#missing[@]} + ${#missing_plots[@]})); then
  echo "setup: installing ${missing[*]} ${missing_plots[*]}"
  $sudo apt-get update -q
fi
if ((${#missing[@]})); then
  # libopenblas0-pthread replaces the reference BLAS that Debian's LibTorch links (~15x faster matmuls).
  # libgloo-dev: the headers of c10d's Gloo backend (data-parallel training; LibTorch ships none).
  # libdnnl-dev: the headers of the oneDNN that LibTorch runs on; poslab calls its matmul directly (bf16 training).
  # patchelf: the build tree's copy of libtorch_cpu without the libraries it never uses (scripts/slim_libtorch.sh).
  # libsentencepiece-dev (found with pkg-config): poslab-tokenize; python3-sentencepiece: the tests compare its ids.
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The main job's plots package installs while poslab builds (apt unpacks on the core the compiler
# leaves idle at times); its log is kept, and a failure stops the set-up after the build.
plots_pid=""
if ((${#missing_plots[@]})); then
  mkdir -p build
  $sudo apt-get install -y -q --no-install-recommends "${missing_plots[@]}" > build/setup-plots-apt.log 2>&1 &
  plots_pid=$!
fi

build_type=${POSLAB_BUILD_TYPE:-Release}
# One compile per core: Ninja's default (cores + 1) leaves the last unit compiling alone while the
# other core idles; on 2 cores -j 2 built the main job's poslab in 78 s against 89 s (docs/benchmarks.md).
jobs=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
# POSLAB_TESTS is given either way: a build directory configured by the main job's set-up gains its
# tests when the full set-up runs next.
if ((main_job)); then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DPOSLAB_TESTS=OFF ${POSLAB_CMAKE_ARGS:-}
  cmake --build build --target poslab -j "$jobs"
else
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DPOSLAB_TESTS=ON ${POSLAB_CMAKE_ARGS:-}
  cmake --build build -j "$jobs"
fi
if [ -n "$plots_pid" ] && ! wait "$plots_pid"; then
  tail -20 build/setup-plots-apt.log >&2
  echo "setup: installing ${missing_plots[*]} failed (log: build/setup-plots-apt.log)" >&2
  exit 1
fi
