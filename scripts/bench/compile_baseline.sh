#!/usr/bin/env bash
# The stronger baseline: poslab against the nanoGPT-style twin eager and under torch.compile, on the
# PyTorch 2.x of PyPI's wheel, with poslab on LibTorch 1.13 and (POSLAB2) on a LibTorch 2.x build,
# all in one run, interleaved REPEATS times (never two at once), medians reported.
#   bash scripts/bench/compile_baseline.sh [CONFIG] [STEPS] [OUT]
#   POSLAB=build/poslab  POSLAB2=build-pypi-cuda/poslab (optional)  REPEATS=3  WARMUP=10
#   TORCH_PY=/var/cache/poslab/venv-torch-2.9.1/bin/python (scripts/libtorch2/pypi_cuda.sh makes it)
#   UNFUSED=1: also poslab on 1.13 with LibTorch's GELU and LayerNorm (train.fused_ops=false), what fusing gains
# Each side runs its defaults: poslab as shipped (bf16 autocast where the CPU has it), the twin as
# nanoGPT runs on the CPU (fp32), and the twin compiled in fp32 and in bf16 autocast (the strongest
# PyTorch 2.x configuration we know). TorchInductor compiles in the warm-up steps, which are not timed.
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-configs/bench/nanogpt-cpu.json}
STEPS=${2:-100}
OUT=${3:-runs/bench-compile}
REPEATS=${REPEATS:-3}
UNFUSED=${UNFUSED:-0}
WARMUP=${WARMUP:-10}
POSLAB=${POSLAB:-build/poslab}
POSLAB2=${POSLAB2:-}
TORCH_PY=${TORCH_PY:-/var/cache/poslab/venv-torch-2.9.1/bin/python}
export PYTHONWARNINGS=ignore
[ -x "$TORCH_PY" ] || { echo "compile_baseline: no PyTorch 2.x python at $TORCH_PY; run scripts/libtorch2/pypi_cuda.sh or set TORCH_PY" >&2; exit 2; }
"$TORCH_PY" -c 'import sys, torch; sys.exit(0 if hasattr(torch, "compile") else 1)' \
  || { echo "compile_baseline: $TORCH_PY has no torch.compile (PyTorch 2.x needed)" >&2; exit 2; }
[ -x "$POSLAB" ] || { echo "compile_baseline: no poslab binary at $POSLAB" >&2; exit 2; }
[ -z "$POSLAB2" ] || [ -x "$POSLAB2" ] || { echo "compile_baseline: POSLAB2=$POSLAB2 is not an executable" >&2; exit 2; }
source scripts/bench/lib.sh
bench_positive compile_baseline.sh STEPS "$STEPS"; bench_positive compile_baseline.sh REPEATS "$REPEATS"
bench_fresh_out compile_baseline.sh "$OUT"
echo "== $CONFIG, $WARMUP warm-up + $STEPS timed steps, $(nproc) cores, $REPEATS repeats, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
bench_cpu_line
# nanoGPT's environment: OMP_WAIT_POLICY as the user has it (unset here), PyTorch's default threads.
twin() { env -u OMP_WAIT_POLICY "$TORCH_PY" scripts/bench/train_twin.py --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --threads 0 "$@" > /dev/null; }
for r in $(seq 1 "$REPEATS"); do
  d="$OUT/r$r"
  mkdir -p "$d"
  echo "-- repeat $r/$REPEATS"
  "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --json "$d/poslab_1x.json" > /dev/null
  [ "$UNFUSED" = 0 ] || "$POSLAB" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" \
    --set train.fused_ops=false --json "$d/poslab_1x_unfused.json" > /dev/null
  [ -z "$POSLAB2" ] || "$POSLAB2" bench --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --json "$d/poslab_2x.json" > /dev/null
  twin --precision fp32 --json "$d/twin_eager.json"
  twin --precision fp32 --compile --json "$d/twin_compiled.json"
  twin --precision bf16 --compile --json "$d/twin_compiled_bf16.json"
done
"$TORCH_PY" - "$OUT" "$REPEATS" <<'PYEOF'
import json, os, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
names = [n for n in ["poslab_1x", "poslab_1x_unfused", "poslab_2x", "twin_eager", "twin_compiled", "twin_compiled_bf16"]
         if os.path.exists(f"{out}/r1/{n}.json")]
runs = [{k: json.load(open(f"{out}/r{i}/{k}.json")) for k in names} for i in range(1, repeats + 1)]
def tok(x): return x.get("train_tokens_per_s", x.get("tokens_per_s"))
med = statistics.median
print(f"median of {repeats} repeats; val loss on the same fixed validation batches after warm-up + timed steps")
print(f"{'run':20} {'version':>14} {'precision':>9} {'threads':>7} {'train tok/s':>12} {'ms/step p50':>11} {'val loss':>9}")
table = {}
for k in names:
    xs = [r[k] for r in runs]
    version = xs[0].get("torch") or xs[0].get("libtorch", "?")
    row = {"version": version, "precision": xs[0]["precision"], "threads": xs[0]["threads"],
           "train_tokens_per_s": med([tok(x) for x in xs]), "ms_per_step_median": med([x["ms_per_step_median"] for x in xs]),
           "val_loss": med([x["val_loss"] for x in xs]) if "val_loss" in xs[0] else None}
    table[k] = row
    print(f"{k:20} {str(version):>14} {row['precision']:>9} {row['threads']:>7} {row['train_tokens_per_s']:12.0f} "
          f"{row['ms_per_step_median']:11.1f} {'-' if row['val_loss'] is None else format(row['val_loss'], '9.4f'):>9}")
cpu = runs[0][names[0]].get("cpu", {})  # poslab bench's record, as compare.sh's summary has it
summary = {"repeats": repeats, "cpu": cpu, "blas_core": runs[0][names[0]].get("blas_core"), "runs": table, "ratios": {}}
for p in [n for n in names if n.startswith("poslab")]:
    for t in [n for n in names if n.startswith("twin")]:
        per = [tok(r[p]) / tok(r[t]) for r in runs]
        summary["ratios"][f"{p} / {t}"] = {"median": med(per), "per_repeat": per}
        print(f"{p + ' / ' + t:40} median {med(per):.2f}x   (" + ", ".join(f"{v:.2f}" for v in per) + ")")
    if "val_loss" in runs[0][p]:  # binaries before poslab bench reported a loss have none
        gap = [r[p]["val_loss"] - r["twin_eager"]["val_loss"] for r in runs]
        summary["ratios"][f"{p} val loss - twin_eager val loss"] = {"median": med(gap), "per_repeat": gap}
        print(f"{p + ' val loss - twin_eager val loss':40} median {med(gap):+.4f}")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
PYEOF
