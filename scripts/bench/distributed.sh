#!/usr/bin/env bash
# Data-parallel overhead: one rank on every core vs two ranks on half the cores each, the same global
# batch, alternated REPEATS times (so a drift of the machine hits both alike); reports the medians of
# training tokens/s and of the mean all-reduce time per step.
#   bash scripts/bench/distributed.sh [CONFIG] [STEPS] [OUT]        (REPEATS=3 by default)
# On a machine with fewer cores than 2 ranks could use, this measures the cost of the process group
# (all-reduce, the per-step agreement), not a speed-up: both sides split the batch over the same cores,
# threads (batch shards) on one side and processes on the other.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-configs/bench/nanogpt-cpu.json}
STEPS=${2:-60}
OUT=${3:-runs/bench-dist}
REPEATS=${REPEATS:-3}
POSLAB=${POSLAB:-build/poslab}
source scripts/bench/lib.sh
PY=$BENCH_PY
bench_positive distributed.sh STEPS "$STEPS"; bench_positive distributed.sh REPEATS "$REPEATS"
# Tokens/s is read from the log windows after the first (train.log_interval 10): two at least.
[ "$STEPS" -ge 30 ] || { echo "distributed.sh: STEPS must be at least 30 (tokens/s is the median of the 10-step log windows after the first), got $STEPS" >&2; exit 2; }
CORES=$(nproc)
HALF=$(( CORES / 2 > 0 ? CORES / 2 : 1 ))
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Validation only at the first and last step (one batch), so the timed windows hold training alone.
SETS=(--set train.max_iters="$STEPS" --set train.log_interval=10 --set train.eval_interval=100000 --set train.eval_iters=1)
echo "== $CONFIG, $STEPS steps, $CORES cores, $REPEATS repeats, $(date -u +%F), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
bench_cpu_line
bench_fresh_out distributed.sh "$OUT"
for r in $(seq 1 "$REPEATS"); do
  "$POSLAB" train -c "$CONFIG" "${SETS[@]}" --set train.threads="$CORES" --out "$OUT/r$r-one" > /dev/null 2>&1
  port=$(free_port)
  for rank in 0 1; do
    RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$POSLAB" train -c "$CONFIG" "${SETS[@]}" --set train.threads="$HALF" --out "$OUT/r$r-two" > "$OUT/r$r-two.rank$rank.log" 2>&1 &
  done
  wait
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$OUT" "$REPEATS" <<'PYEOF'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def run(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    train = [x for x in rows if "train_loss" in x and x["step"] > 0]  # the first window holds start-up
    summary = json.load(open(f"{out}/{name}/summary.json"))
    return statistics.median(x["tokens_per_s"] for x in train), summary.get("allreduce_ms"), summary["threads"]
for side, label in (("one", "1 rank"), ("two", "2 ranks")):
    xs = [run(f"r{r}-{side}") for r in range(1, repeats + 1)]
    tok = statistics.median(x[0] for x in xs)
    ar = [x[1] for x in xs if x[1] is not None]
    print(f"{label:8} threads/rank {xs[0][2]}  train tok/s median {tok:9.0f}  (per repeat: {', '.join(f'{x[0]:.0f}' for x in xs)})"
          + (f"  all-reduce ms/step median {statistics.median(ar):.2f} (per repeat: {', '.join(f'{a:.2f}' for a in ar)})" if ar else ""))
PYEOF
