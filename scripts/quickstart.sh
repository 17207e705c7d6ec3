#!/usr/bin/env bash
# The main job on a fresh machine: install, build, and compare all seven encodings on char-level text,
# trained at 64 tokens and evaluated at 64-512 (configs/experiments/quick.json, three seeds, about 3 minutes on a 2-core
# CPU). Output: the table on the console, runs/quick/report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --main-job
./build/poslab compare --config configs/experiments/quick.json --out runs/quick "$@"
