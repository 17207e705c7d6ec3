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
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr;$prefix/usr/lib/x86_64-linux-gnu/cmake;$prefix/usr/share/cmake" \
  -DCMAKE_CXX_FLAGS="-isystem $prefix/usr/include" "$@"
cmake --build build-gpu
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
echo "built build-gpu/poslab; run tests with: LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu ctest --test-dir build-gpu"
