#!/usr/bin/env bash
# Run ON the CUDA machine: unpacks .deps/*.deb into .deps/prefix and builds poslab against the
# LibTorch inside the installed PyTorch wheel. Usage: bash scripts/gpu/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/../.."
prefix="$PWD/.deps/prefix"
mkdir -p "$prefix"
for deb in .deps/*.deb; do dpkg -x "$deb" "$prefix"; done
torch_prefix=$(python3 -c "import torch; print(torch.utils.cmake_prefix_path)")
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
# The wheel ships fmt 11 headers in torch/include, which LibTorch's -isystem would put ahead of Debian's
# fmt 9 that spdlog 1.10 needs: a directory holding only a link to Debian's fmt, passed with -I (searched
# before every -isystem), gives spdlog its own fmt (as scripts/libtorch2/pypi_cuda.sh does). The wheel's
# std::filesystem issue is handled by CMakeLists.txt (libstdc++ linked first for a site-packages torch).
shim="$PWD/build-gpu/debian-fmt"
mkdir -p "$shim" && ln -sfn "$prefix/usr/include/fmt" "$shim/fmt"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake;$prefix/usr/share/cmake" \
  -DCMAKE_CXX_FLAGS="-I$shim -isystem $prefix/usr/include" "$@"
cmake --build build-gpu
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
echo "built build-gpu/poslab; run tests with: LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu ctest --test-dir build-gpu"
