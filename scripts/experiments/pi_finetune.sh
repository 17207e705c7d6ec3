#!/usr/bin/env bash
# Position Interpolation by fine-tuning (Chen et al. 2023) at toy scale, in one command: train a RoPE
# model at 64 tokens (or reuse OUT/base), fine-tune it at 256 tokens for a few hundred steps with and
# without linear scaling (factor 4), evaluate every variant at 64..1024 and print a loss table.
#   bash scripts/experiments/pi_finetune.sh [OUT]      (default runs/pi-finetune)
# Environment: POSLAB (binary), BASE_RUN (an existing rope run trained at 64 tokens with configs/base.json's
# data, used instead of training OUT/base), BASE_STEPS (600), FT_STEPS (200), FT_BLOCK (256), LENGTHS
# (64,...,1024), STAGES (any of: base ft_none ft_pi eval table; default all). Finished runs and evaluations are
# reused, so an interrupted invocation picks up where it stopped.
set -euo pipefail
cd "$(dirname "$0")/../.."
POSLAB=${POSLAB:-./build/poslab}
OUT=${1:-runs/pi-finetune}
BASE_STEPS=${BASE_STEPS:-600}
FT_STEPS=${FT_STEPS:-200}
FT_BLOCK=${FT_BLOCK:-256}
LENGTHS=${LENGTHS:-64,128,256,512,1024}
STAGES=${STAGES:-base ft_none ft_pi eval table}
FACTOR=$((FT_BLOCK / 64))
BASE=${BASE_RUN:-$OUT/base}
# The main job's model (configs/base.json at 2 layers, 600 steps, lr 2e-3) with RoPE; no end-of-run eval.
COMMON=(--config configs/base.json --set model.n_layer=2 --set model.pos_encoding.kind=rope --set 'eval.lengths=[]')
# Fine-tuning: a new optimizer and schedule (short warm-up, half the base rate), step 0.
FT=(--init-from "$BASE" --set model.block_size="$FT_BLOCK" --set train.max_iters="$FT_STEPS"
    --set train.learning_rate=1e-3 --set train.warmup_iters=20 --set train.eval_interval=100)

stage() { [[ " $STAGES " == *" $1 "* ]]; }
done_run() { [ -f "$1/summary.json" ] && grep -q '"status": "done"' "$1/summary.json"; }
train() {  # train DIR ARGS...: skipped when DIR holds a finished run
  local dir=$1
  shift
  if done_run "$dir"; then echo "reusing $dir"; else "$POSLAB" train "$@" --out "$dir"; fi
}
evaluate() {  # evaluate DIR TAG ARGS...
  local dir=$1 tag=$2
  shift 2
  [ -f "$dir/eval-$tag.json" ] || "$POSLAB" eval --run "$dir" --lengths "$LENGTHS" --tag "$tag" "$@" >/dev/null
}

[ -z "${BASE_RUN:-}" ] && stage base && train "$OUT/base" "${COMMON[@]}" --set train.max_iters="$BASE_STEPS" --set train.learning_rate=2e-3
stage ft_none && train "$OUT/ft-none" "${COMMON[@]}" "${FT[@]}"
stage ft_pi && train "$OUT/ft-pi" "${COMMON[@]}" "${FT[@]}" --set model.pos_encoding.rope_scaling.kind=linear \
  --set model.pos_encoding.rope_scaling.factor="$FACTOR"
if stage eval; then
  evaluate "$BASE" plain --rope-scaling none
  evaluate "$BASE" pi --rope-scaling linear --factor "$FACTOR"  # Position Interpolation without fine-tuning
  evaluate "$OUT/ft-none" plain
  evaluate "$OUT/ft-pi" plain  # its trained-with scaling (linear x FACTOR) stays on
fi
if stage table; then python3 - "$OUT" "$FT_BLOCK" "$FACTOR" "$FT_STEPS" "$BASE" <<'PY'
import json, sys
out, block, factor, steps, base = sys.argv[1:]
rows = [("base (64), no scaling", f"{base}/eval-plain.json"),
        (f"base (64), PI x{factor} at eval, no fine-tuning", f"{base}/eval-pi.json"),
        (f"fine-tuned at {block}, {steps} steps, no scaling", f"{out}/ft-none/eval-plain.json"),
        (f"fine-tuned at {block}, {steps} steps, PI x{factor}", f"{out}/ft-pi/eval-plain.json")]
table = {}
for name, path in rows:
    e = json.load(open(path))
    table[name] = {r["length"]: r["loss"] for r in e["results"]}
lengths = sorted({l for r in table.values() for l in r})
print("| variant | " + " | ".join(str(l) for l in lengths) + " |")
print("|---|" + "---|" * len(lengths))
for name, r in table.items():
    cells = ["n/a" if r.get(l) is None else f"{r[l]:.3f}" for l in lengths]
    print(f"| {name} | " + " | ".join(cells) + " |")
print(f"\nloss in nats per token (char-level, windows protocol), {out}")
PY
fi
