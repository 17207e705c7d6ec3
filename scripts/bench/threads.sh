#!/usr/bin/env bash
# How many intra-op threads, and which OpenMP wait policy? Runs `poslab bench` one setting at a
# time (never in parallel) and prints train tokens/s for each. This decided poslab's default.
#   bash scripts/bench/threads.sh [CONFIG] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-configs/bench/nanogpt-cpu.json}
STEPS=${2:-60}
POSLAB=${POSLAB:-build/poslab}
printf '%-8s %-8s %-7s %12s %10s\n' precision policy threads "train tok/s" "ms p50"
for precision in fp32 bf16; do
  for policy in PASSIVE ACTIVE; do
    for threads in 1 $(nproc); do
      [ "$policy" = ACTIVE ] && [ "$threads" = 1 ] && continue
      OMP_WAIT_POLICY=$policy "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --threads "$threads" \
        --precision "$precision" --json /tmp/poslab-threads.json > /dev/null
      /usr/bin/python3 -c "import json; r=json.load(open('/tmp/poslab-threads.json')); print(f\"%-8s %-8s %-7s {r['train_tokens_per_s']:12.0f} {r['ms_per_step_median']:10.1f}\" % ('$precision', '$policy', '$threads'))"
    done
  done
done
