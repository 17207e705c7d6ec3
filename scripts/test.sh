#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (unit, integration, reference twin) with CTest.
# Pass CTest options through, e.g. `bash scripts/test.sh -L unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j 2 "$@"
