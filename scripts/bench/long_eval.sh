#!/usr/bin/env bash
# Long-context evaluation: wall time and peak memory of `poslab eval` far past the training length.
# Trains a small model once (the speed of evaluation does not depend on how well it learned), then
# evaluates it at each length with every binary given, one after the other (never at once), so a
# before/after pair of builds is measured side by side in one run. Two commands per length:
#   default: `poslab eval --run R --lengths L`, as a user types it (the whole validation split, default
#            batch size): peak RSS must not depend on the batch size;
#   window:  one window of L tokens (`--tokens L --stride L`): the time of a single window.
#   bash scripts/bench/long_eval.sh [LENGTHS] [OUT] [BINARY...]
#   MODEL="1 4 32" (layers heads width), KIND=alibi, STEPS=50, REPEATS=1
# Example: bash scripts/bench/long_eval.sh 4096,16384 runs/long-eval /tmp/old/poslab build/poslab
set -euo pipefail
cd "$(dirname "$0")/../.."
LENGTHS=${1:-16384}
OUT=${2:-runs/bench-long-eval}
shift $(( $# < 2 ? $# : 2 ))  # `shift 2` with one argument shifts nothing: the length became a binary
BINARIES=("$@")
((${#BINARIES[@]})) || BINARIES=(build/poslab)
read -r LAYERS HEADS WIDTH <<< "${MODEL:-1 4 32}"
KIND=${KIND:-alibi}
STEPS=${STEPS:-50}
REPEATS=${REPEATS:-1}
run="$OUT/run-${KIND}-${LAYERS}x${WIDTH}"
mkdir -p "$OUT"
source scripts/bench/lib.sh
echo "== long-context eval: $KIND, $LAYERS layers, $HEADS heads, $WIDTH wide; lengths $LENGTHS; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
bench_cpu_line
if [ ! -f "$run/model.pt" ]; then
  # 40% of the text held out, so that one window of 65,536 tokens fits in the validation split.
  "${BINARIES[-1]}" train --config configs/base.json --out "$run" \
    --set model.n_layer="$LAYERS" --set model.n_head="$HEADS" --set model.n_embd="$WIDTH" \
    --set model.pos_encoding.kind="$KIND" --set data.val_fraction=0.4 \
    --set train.max_iters="$STEPS" --set train.eval_interval="$STEPS" --set train.eval_iters=2 > "$OUT/train.log" 2>&1
fi
printf '%-40s %-8s %8s %8s %8s %10s %10s\n' binary command length windows repeat wall_s max_rss_mb
for r in $(seq 1 "$REPEATS"); do
  for L in ${LENGTHS//,/ }; do
    for bin in "${BINARIES[@]}"; do
      for command in default window; do
        extra=()
        [ "$command" = window ] && extra=(--tokens "$L" --stride "$L")
        log="$OUT/$(echo "$bin" | tr '/' '_')-$L-$command-r$r.time"
        /usr/bin/time -v "$bin" eval --run "$run" --lengths "$L" "${extra[@]}" --tag "bench-$L-$command" \
          > "$OUT/eval.log" 2> "$log" || { echo "$bin $command at $L failed: $(tail -3 "$log")"; continue; }
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$log")
        rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$log")
        # Windows the evaluation ran: the distinct windows of both protocols (eval.json's scored targets / stride).
        windows=$(/usr/bin/python3 -c 'import json, math, sys
r = json.load(open(sys.argv[1]))["results"][0]
s = r["sliding"]
print(math.ceil(s["scored_tokens"] / s["stride"]) if r["status"] == "ok" else 0)' "$run/eval-bench-$L-$command.json" 2>/dev/null || echo "?")
        printf '%-40s %-8s %8s %8s %8s %10s %10s\n' "$bin" "$command" "$L" "$windows" "$r" "$wall" "$rss"
      done
    done
  done
done
