#!/usr/bin/env bash
# Threads, OpenMP wait policy and batch shards: runs `poslab bench` one setting at a time (never in
# parallel) and prints train and eval tokens/s for each. This decided poslab's defaults.
#   bash scripts/bench/threads.sh [CONFIG] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-configs/bench/nanogpt-cpu.json}
STEPS=${2:-60}
POSLAB=${POSLAB:-build/poslab}
source scripts/bench/lib.sh
PY=$BENCH_PY
bench_positive threads.sh STEPS "$STEPS"
n=$(nproc)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bench_cpu_line
printf '%-9s %-8s %7s %6s %12s %10s %11s\n' precision policy threads shards "train tok/s" "ms p50" "eval tok/s"
for precision in fp32 bf16; do
  for policy in PASSIVE ACTIVE; do
    for setting in "1 1" "$n 1" "$n $n"; do
      read -r threads shards <<< "$setting"
      [ "$policy" = ACTIVE ] && [ "$threads" = 1 ] && continue
      OMP_WAIT_POLICY=$policy "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --threads "$threads" \
        --precision "$precision" --set train.batch_shards="$shards" --json "$out" > /dev/null
      "$PY" -c "import json; r=json.load(open('$out')); print(f\"%-9s %-8s %7s %6s {r['train_tokens_per_s']:12.0f} {r['ms_per_step_median']:10.1f} {r['eval_tokens_per_s']:11.0f}\" % ('$precision', '$policy', '$threads', '$shards'))"
    done
  done
done
