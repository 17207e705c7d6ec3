#!/usr/bin/env bash
# The main job on a fresh machine: install, build, and compare all seven encodings on the copy task
# (configs/experiments/quick.json, about two minutes on a 2-core CPU). Output: runs/quick/report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/poslab compare --config configs/experiments/quick.json --out runs/quick "$@"
