#!/usr/bin/env bash
# Run HERE (a machine with Debian's package registry): downloads the non-Torch build dependencies
# as .deb files into .deps/ (git-ignored), for a CUDA machine that has PyTorch but no registry.
# Then carry .deps/ to that machine and run scripts/gpu/build.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps
cd .deps
apt-get download nlohmann-json3-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libgtest-dev libcli11-dev
ls -la
