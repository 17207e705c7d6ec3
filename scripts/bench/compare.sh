#!/usr/bin/env bash
# poslab vs its PyTorch twin, one after the other (never at once: the numbers would lie), on the
# same config, data and threads. Prints both and the ratios; writes the JSON files to OUT.
#   bash scripts/bench/compare.sh [CONFIG] [STEPS] [THREADS] [OUT]
# Pairs: (1) defaults: poslab as shipped vs the twin as nanoGPT runs on CPU (fp32, PyTorch's default
# threads, environment untouched); (2) fp32 vs fp32 at THREADS threads, each with its faster OpenMP
# wait policy: poslab its default (ACTIVE), the twin PASSIVE (ACTIVE runs it ~2.3x slower, see
# threads.sh); (3) poslab fp32 under the twin's PASSIVE too, the same environment for both; and
# poslab's defaults with LibTorch's AdamW instead of the fused one, for what fusing gains.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-configs/bench/nanogpt-cpu.json}
STEPS=${2:-100}
THREADS=${3:-$(nproc)}
OUT=${4:-runs/bench}
POSLAB=${POSLAB:-build/poslab}
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
mkdir -p "$OUT"
echo "== $CONFIG, $STEPS timed steps, $(nproc) cores, $(date -u +%F)"
"$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --json "$OUT/poslab_default.json"
"$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --set train.fused_adamw=false --json "$OUT/poslab_default_unfused.json"
env -u OMP_WAIT_POLICY "$PY" scripts/bench/train_twin.py --config "$CONFIG" --steps "$STEPS" --threads 0 \
  --precision fp32 --json "$OUT/twin_default.json"
env -u OMP_WAIT_POLICY "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --precision fp32 --threads "$THREADS" --json "$OUT/poslab_fp32.json"
OMP_WAIT_POLICY=PASSIVE "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --precision fp32 --threads "$THREADS" --json "$OUT/poslab_fp32_passive.json"
OMP_WAIT_POLICY=PASSIVE "$PY" scripts/bench/train_twin.py --config "$CONFIG" --steps "$STEPS" --threads "$THREADS" \
  --precision fp32 --json "$OUT/twin_fp32.json"
"$PY" - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
r = {k: json.load(open(f"{out}/{k}.json"))
     for k in ["poslab_default", "poslab_default_unfused", "twin_default", "poslab_fp32", "twin_fp32", "poslab_fp32_passive"]}
def tok(x): return x.get("train_tokens_per_s", x.get("tokens_per_s"))
print(f"{'run':20} {'precision':>9} {'threads':>7} {'shards':>6} {'train tok/s':>12} {'ms/step p50':>11} {'p90':>7} {'peak RSS MB':>11}")
for k, x in r.items():
    print(f"{k:20} {x['precision']:>9} {x['threads']:>7} {x.get('batch_shards', 1):>6} {tok(x):12.0f} "
          f"{x['ms_per_step_median']:11.1f} {x['ms_per_step_p90']:7.1f} {x['peak_rss_mb']:11.1f}")
print(f"defaults: poslab / nanoGPT-style twin = {tok(r['poslab_default']) / tok(r['twin_default']):.2f}x (target >= 2.0)")
print(f"fp32, same threads: poslab / twin   = {tok(r['poslab_fp32']) / tok(r['twin_fp32']):.2f}x (target >= 1.1)")
print(f"fp32, same threads and PASSIVE      = {tok(r['poslab_fp32_passive']) / tok(r['twin_fp32']):.2f}x")
print(f"fused AdamW: defaults / unfused    = {tok(r['poslab_default']) / tok(r['poslab_default_unfused']):.2f}x")
print(f"fp32 peak memory: poslab / twin     = {r['poslab_fp32']['peak_rss_mb'] / r['twin_fp32']['peak_rss_mb']:.2f}x (target <= 1.0)")
json.dump({"runs": r,
           "ratio_defaults": tok(r['poslab_default']) / tok(r['twin_default']),
           "ratio_fp32": tok(r['poslab_fp32']) / tok(r['twin_fp32']),
           "ratio_fused_adamw": tok(r['poslab_default']) / tok(r['poslab_default_unfused']),
           "ratio_fp32_passive": tok(r['poslab_fp32_passive']) / tok(r['twin_fp32']),
           "memory_ratio_fp32": r['poslab_fp32']['peak_rss_mb'] / r['twin_fp32']['peak_rss_mb']},
          open(f"{out}/summary.json", "w"), indent=1)
PYEOF
