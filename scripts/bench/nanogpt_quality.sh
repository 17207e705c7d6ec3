#!/usr/bin/env bash
# Validation loss of nanoGPT's own train.py (its shakespeare-char CPU recipe) beside poslab on the same
# train.bin/val.bin, seeds 1-3, poslab in bf16 (its default here) and fp32; every model then scored on the
# whole validation split in windows of 64 (nanoGPT's checkpoints by nanogpt_eval_ckpt.py, poslab's by its
# own evaluation at length 64), so that neither program's sampled estimate decides.
#   NANOGPT=/path/to/nanoGPT bash scripts/bench/nanogpt_quality.sh [OUT]
# NANOGPT is a checkout of karpathy/nanoGPT whose data/shakespeare_char/prepare.py has been run.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${NANOGPT:?set NANOGPT to a nanoGPT checkout with data/shakespeare_char prepared}"
OUT=$(realpath -m "${1:-runs/nanogpt-quality}")
POSLAB=$(realpath "${POSLAB:-build/poslab}")
PY=${PY:-/usr/bin/python3}
data=$NANOGPT/data/shakespeare_char
[ -f "$data/train.bin" ] && [ -f "$data/val.bin" ] || { echo "nanogpt_quality: no $data/train.bin and val.bin (run its prepare.py)" >&2; exit 1; }
mkdir -p "$OUT"
# nanoGPT seeds every run with 1337: a copy of train.py takes the seed from SEED instead.
sed 's/torch.manual_seed(1337 + seed_offset)/torch.manual_seed(int(os.environ.get("SEED", "1337")) + seed_offset)/' \
  "$NANOGPT/train.py" > "$NANOGPT/train_seeded.py"
for seed in 1 2 3; do
  (cd "$NANOGPT" && SEED=$seed "$PY" train_seeded.py config/train_shakespeare_char.py --device=cpu --compile=False \
    --eval_iters=200 --log_interval=100 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 \
    --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0 --out_dir="$OUT/nanogpt-$seed") > "$OUT/nanogpt-$seed.log" 2>&1
  echo "nanoGPT seed $seed: $(grep 'step 2000' "$OUT/nanogpt-$seed.log")"
  for precision in auto fp32; do
    "$POSLAB" train -c configs/examples/nanogpt-char.json --out "$OUT/poslab-$precision-$seed" --set data.dir="$data" \
      --set model.n_layer=4 --set model.n_head=4 --set model.n_embd=128 --set model.block_size=64 --set model.dropout=0.0 \
      --set train.batch_size=12 --set train.max_iters=2000 --set train.lr_decay_iters=2000 --set train.eval_iters=200 \
      --set seed=$seed --set train.precision=$precision --set eval.lengths=[64] > "$OUT/poslab-$precision-$seed.log" 2>&1
    echo "poslab $precision seed $seed: $(grep -E 'done:|eval length' "$OUT/poslab-$precision-$seed.log" | tr '\n' ' ')"
  done
done
echo "nanoGPT's checkpoints on the whole validation split:"
"$PY" scripts/bench/nanogpt_eval_ckpt.py "$NANOGPT" "$OUT"/nanogpt-1 "$OUT"/nanogpt-2 "$OUT"/nanogpt-3
