#!/usr/bin/env bash
# The CUDA leg: builds every poslab target against the LibTorch inside a pinned PyPI torch wheel (a CUDA
# build) in a venv cached outside the clone (POSLAB_TORCH_VENV), then runs the CTest suite on the CPU (less
# the two Python-only tests).
# It compiles and links the CUDA code paths; nothing here runs a CUDA kernel (no GPU needed, none used).
# Usage: bash scripts/libtorch2/pypi_cuda.sh [CTest args]; POSLAB_TORCH_WHEEL picks the pin.
set -euo pipefail
cd "$(dirname "$0")/../.."
wheel=${POSLAB_TORCH_WHEEL:-torch==2.9.1}  # 2.7+ wheels use the C++11 ABI, as Debian's spdlog and gtest do
venv=${POSLAB_TORCH_VENV:-/var/cache/poslab/venv-${wheel//=/-}}
venv=${venv//--/-}
build=${POSLAB_PYPI_BUILD:-build-pypi-cuda}
need_mb=12000  # the wheel and its nvidia-* dependencies: ~6 GB installed, as much again while pip works

die() { echo "pypi_cuda: ERROR: $*" >&2; exit 1; }
log() { echo "== pypi_cuda: $*"; }
py=${POSLAB_PYTHON:-python3}
export PYTHONWARNINGS=ignore  # torch warns on import that the venv has no numpy (poslab needs none)
command -v "$py" >/dev/null || die "no $py on PATH (set POSLAB_PYTHON)"

if [ ! -f "$venv/.poslab-installed" ] || [ "$(cat "$venv/.poslab-installed")" != "$wheel" ]; then
  mkdir -p "$(dirname "$venv")"
  free_mb=$(df -Pm "$(dirname "$venv")" | awk 'NR == 2 {print $4}')
  ((free_mb >= need_mb)) || die "$(dirname "$venv") has ${free_mb} MB free; $wheel with its CUDA libraries needs ~${need_mb} MB"
  log "installing $wheel into $venv (several GB)"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q "$wheel" || die "pip install $wheel failed"
  echo "$wheel" > "$venv/.poslab-installed"
fi
# Build dependencies other than LibTorch: Debian's (scripts/setup.sh installs the same).
missing=()
for p in cmake ninja-build g++ nlohmann-json3-dev libspdlog-dev libgtest-dev libcli11-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}: install them (as root)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

"$venv/bin/python" - <<'PY'
import torch
print(f"   torch {torch.__version__}, built for CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"C++11 ABI {torch.compiled_with_cxx11_abi()}, CUDA device here: {torch.cuda.is_available()}")
PY
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "no nvcc: LibTorch's CMake config needs the CUDA toolkit to configure a CUDA build"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
log "toolkit here: $("$nvcc" --version | tail -1)"
prefix=$("$venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
start=$(date +%s)
mkdir -p "$build"
# The wheel ships its own fmt headers (11.x) in torch/include, which LibTorch's -isystem puts ahead of
# /usr/include; Debian's spdlog needs Debian's fmt (9.x). A directory holding only a link to Debian's
# fmt, passed with -I (searched before every -isystem), gives spdlog its own fmt back.
case $build in /*) shim="$build/debian-fmt" ;; *) shim="$PWD/$build/debian-fmt" ;; esac
mkdir -p "$shim" && ln -sfn /usr/include/fmt "$shim/fmt"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_FLAGS="-I$shim" \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$(dirname "$(dirname "$nvcc")")" > "$build/configure.log" 2>&1 \
  || { cat "$build/configure.log"; die "configure failed"; }
grep -iE 'cuda|warn' "$build/configure.log" | sed 's/^/   /' | head -20 || true
cmake --build "$build"
# Every LibTorch library the programs load must be the wheel's: a second copy of c10 from Debian's
# libtorch-dev (which setup.sh installs) in the same process corrupts the heap before main.
torch_lib=$("$venv/bin/python" -c 'import os, torch; print(os.path.realpath(os.path.dirname(torch.__file__) + "/lib"))')
for exe in "$build/poslab" "$build/tests/poslab_unit_tests"; do
  stray=$(ldd "$exe" | awk '$1 ~ /^lib(c10|torch)/ {print $1 " => " $3}' | while read -r name _ path; do
    [ "$(dirname "$(realpath "$path")")" = "$torch_lib" ] || echo "$name => $path"; done)
  [ -z "$stray" ] || die "$exe loads LibTorch libraries from outside the wheel ($torch_lib): $stray"
done
log "built in $(( $(date +%s) - start )) s; CTest on the CPU"
# The reference twin runs on the wheel's own torch, as poslab does: against Debian's 1.13 (OpenBLAS, other
# kernels) the index encoding's logits differ by 2-6e-5 relative, past the parity bound of 1e-5.
# Likewise torchrun: the wheel's own, whose agent store speaks this LibTorch's protocol.
# The two tests that never load LibTorch (the plotting package on fixtures, the docs' tables) run in the
# main leg only: here they would repeat the same Python on the same files.
POSLAB_PARITY_PYTHON="$venv/bin/python" POSLAB_TORCHRUN="$venv/bin/torchrun" \
  ctest --test-dir "$build" --output-on-failure -j 2 -E '^(plots[.]fixtures|docs[.]tables)$' "$@"
log "passed in $(( $(date +%s) - start )) s"
