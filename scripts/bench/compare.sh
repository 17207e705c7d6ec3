#!/usr/bin/env bash
# poslab vs its PyTorch twin, one after the other (never at once: the numbers would lie), on the
# same config, data and threads. Prints both and the ratios; writes the JSON files to OUT.
#   bash scripts/bench/compare.sh [CONFIG] [STEPS] [THREADS] [OUT]      (REPEATS=3, WARMUP=10 by default)
# nanoGPT's recipe, 2000 iterations in all: bash scripts/bench/compare.sh configs/bench/nanogpt-cpu.json 1990
# Each run also reports its final validation loss on the trainer's fixed validation batches.
# Pairs: (1) defaults: poslab as shipped vs the twin as nanoGPT runs on CPU (fp32, PyTorch's default
# threads, environment untouched); (2) fp32 vs fp32 at THREADS threads, each with its faster OpenMP
# wait policy: poslab its default (ACTIVE), the twin PASSIVE (ACTIVE runs it ~2.3x slower, see
# threads.sh); (3) poslab fp32 under the twin's PASSIVE too, the same environment for both; and
# poslab's defaults with LibTorch's AdamW instead of the fused one, for what fusing gains.
# The whole sequence runs REPEATS times, interleaved, so that a drift of the machine's speed hits
# both sides of a ratio alike; each ratio is reported per repeat and as the median.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-configs/bench/nanogpt-cpu.json}
STEPS=${2:-100}
THREADS=${3:-$(nproc)}
OUT=${4:-runs/bench}
REPEATS=${REPEATS:-3}
WARMUP=${WARMUP:-10}
POSLAB=${POSLAB:-build/poslab}
source scripts/bench/lib.sh
PY=$BENCH_PY
bench_positive compare.sh STEPS "$STEPS"; bench_positive compare.sh THREADS "$THREADS"; bench_positive compare.sh REPEATS "$REPEATS"
bench_fresh_out compare.sh "$OUT"
echo "== $CONFIG, $WARMUP warm-up + $STEPS timed steps, $(nproc) cores, $REPEATS repeats, $(date -u +%F)"
bench_cpu_line
# Interrupted (Ctrl-C, a kill), the repeats that finished are summarised as they stand and said to be fewer;
# the unfinished repeat's files are removed, so that none is read as a whole one.
finished=0
summarise() { "$PY" - "$OUT" "$finished" "$REPEATS" <<'PYEOF'
import json, statistics, sys
out, repeats, asked = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = ["poslab_default", "poslab_default_unfused", "twin_default", "poslab_fp32", "twin_fp32", "poslab_fp32_passive"]
runs = [{k: json.load(open(f"{out}/r{i}/{k}.json")) for k in names} for i in range(1, repeats + 1)]
def tok(x): return x.get("train_tokens_per_s", x.get("tokens_per_s"))
def med(values): return statistics.median(values)
cpu = runs[0]["poslab_default"].get("cpu", {})
# Figures from different CPUs are never one comparison: every table says which CPU it is from.
# The fp32 kernels too: OpenBLAS's core (its choice by CPU model, or OPENBLAS_CORETYPE's) sets what bf16 gains.
blas = runs[0]["poslab_default"].get("blas_core", "?") or "not OpenBLAS"
sys.path.insert(0, "scripts/bench")
from cpu import describe  # the line bench_cpu_line printed first, with the fp32 kernels' core beside it
print(describe(cpu) + "; OpenBLAS core " + blas)
print(f"median of {repeats} repeats" + ("" if repeats == asked else f" (interrupted: {repeats} of the {asked} asked for finished)"))
print(f"{'run':23} {'precision':>9} {'threads':>7} {'shards':>6} {'train tok/s':>12} {'ms/step p50':>11} {'p90':>7} {'peak RSS MB':>11} {'val loss':>8}")
table = {}
for k in names:
    xs = [r[k] for r in runs]
    row = {"precision": xs[0]["precision"], "threads": xs[0]["threads"], "batch_shards": xs[0].get("batch_shards", "–"),
           "train_tokens_per_s": med([tok(x) for x in xs]), "ms_per_step_median": med([x["ms_per_step_median"] for x in xs]),
           "ms_per_step_p90": med([x["ms_per_step_p90"] for x in xs]), "peak_rss_mb": med([x["peak_rss_mb"] for x in xs]),
           "val_loss": med([x["val_loss"] for x in xs])}
    table[k] = row
    print(f"{k:23} {row['precision']:>9} {row['threads']:>7} {row['batch_shards']:>6} {row['train_tokens_per_s']:12.0f} "
          f"{row['ms_per_step_median']:11.1f} {row['ms_per_step_p90']:7.1f} {row['peak_rss_mb']:11.1f} {row['val_loss']:8.4f}")
ratios = {
    "defaults: poslab / nanoGPT-style twin (target >= 3.0)": lambda r: tok(r["poslab_default"]) / tok(r["twin_default"]),
    "fp32, same threads: poslab / twin (target >= 1.1)": lambda r: tok(r["poslab_fp32"]) / tok(r["twin_fp32"]),
    "fp32, same threads and PASSIVE: poslab / twin": lambda r: tok(r["poslab_fp32_passive"]) / tok(r["twin_fp32"]),
    "fused AdamW: defaults / unfused": lambda r: tok(r["poslab_default"]) / tok(r["poslab_default_unfused"]),
    "fp32 peak memory: poslab / twin (target <= 1.0)": lambda r: r["poslab_fp32"]["peak_rss_mb"] / r["twin_fp32"]["peak_rss_mb"],
}
summary = {"repeats": repeats, "repeats_asked": asked, "cpu": cpu, "blas_core": blas, "runs": table, "ratios": {}}
for label, f in ratios.items():
    per = [f(r) for r in runs]
    summary["ratios"][label] = {"median": med(per), "per_repeat": per}
    print(f"{label:55} median {med(per):.2f}x   (" + ", ".join(f"{v:.2f}" for v in per) + ")")
# The same seed gives the same data and initial weights on both sides: the loss gap is bf16 and
# fusing, not luck of the draw. (The target is <= 0.02 at 2000 iterations.)
per = [r["poslab_default"]["val_loss"] - r["twin_default"]["val_loss"] for r in runs]
summary["val_loss_gap"] = {"median": med(per), "per_repeat": per}
print(f"{'val loss: poslab defaults - twin defaults (<= 0.02)':55} median {med(per):+.4f}   (" +
      ", ".join(f"{v:+.4f}" for v in per) + ")")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
PYEOF
}
stopped() {
  trap - INT TERM ERR
  rm -rf "$OUT/r$((finished + 1))"
  if [ "$finished" -eq 0 ]; then
    echo "compare.sh: interrupted before a repeat finished: nothing to summarise" >&2
  else
    echo "compare.sh: interrupted after $finished of $REPEATS repeats: their summary follows" >&2
    summarise
  fi
  exit 130
}
trap stopped INT TERM
# A child stopped by a signal that bash did not get (sent to the child alone, or a Ctrl-C where bash started
# with SIGINT ignored, as a background job does, and so cannot trap it) exits 130 or 143: its status stops the
# script here too. (A Ctrl-C to the whole group runs the INT trap above once the child has ended, whether the
# child died of it or caught it: bash 5.2.)
trap 'rc=$?; if [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ]; then stopped; fi' ERR
for r in $(seq 1 "$REPEATS"); do
  d="$OUT/r$r"
  mkdir -p "$d"
  echo "-- repeat $r/$REPEATS"
  "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --json "$d/poslab_default.json" > /dev/null
  # Every run after it on the OpenBLAS kernels that one ran on: where OpenBLAS fell back to old kernels on a CPU
  # its tables lack, poslab starts again on newer ones (src/util/runtime.h), and the twin gets the same.
  if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    core=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("blas_core", ""))' "$d/poslab_default.json")
    if [ -n "$core" ]; then export OPENBLAS_CORETYPE=$core; echo "every run on OpenBLAS's $core kernels, as poslab's"; fi
  fi
  "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --set train.fused_adamw=false --json "$d/poslab_default_unfused.json" > /dev/null
  env -u OMP_WAIT_POLICY "$PY" scripts/bench/train_twin.py --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --threads 0 \
    --precision fp32 --json "$d/twin_default.json" > /dev/null
  env -u OMP_WAIT_POLICY "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --precision fp32 --threads "$THREADS" \
    --json "$d/poslab_fp32.json" > /dev/null
  OMP_WAIT_POLICY=PASSIVE "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --precision fp32 --threads "$THREADS" \
    --json "$d/poslab_fp32_passive.json" > /dev/null
  OMP_WAIT_POLICY=PASSIVE "$PY" scripts/bench/train_twin.py --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" \
    --precision fp32 --json "$d/twin_fp32.json" > /dev/null
  finished=$r
done
trap - INT TERM ERR
summarise
