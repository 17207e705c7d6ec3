#!/usr/bin/env bash
# Validation loss of nanoGPT's own train.py (its shakespeare-char CPU recipe) beside poslab on the same
# train.bin/val.bin, seeds 1-3, poslab in bf16 (its default here) and fp32; every model then scored on the
# whole validation split in windows of 64 (nanoGPT's checkpoints by nanogpt_eval_ckpt.py, poslab's by its
# own evaluation at length 64), so that neither program's sampled estimate decides. The final loss moves by
# ~0.01 from seed to seed in both programs: compare means over several seeds, not one run each.
#   NANOGPT=/path/to/nanoGPT SEEDS="1 2 3 4 5 6" bash scripts/bench/nanogpt_quality.sh [OUT]
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
SEEDS=${SEEDS:-1 2 3 4 5 6}
for seed in $SEEDS; do
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
dirs=(); for seed in $SEEDS; do dirs+=("$OUT/nanogpt-$seed"); done
"$PY" scripts/bench/nanogpt_eval_ckpt.py "$NANOGPT" "${dirs[@]}" | tee "$OUT/nanogpt-whole-split.txt"
# Means over seeds, and the difference with Welch's t (unequal variances).
"$PY" - "$OUT" $SEEDS <<'PY'
import math, re, statistics as st, sys
out, seeds = sys.argv[1], sys.argv[2:]
def poslab(precision):
    return [float(re.search(r"eval length +64 .*loss ([0-9.]+)", open(f"{out}/poslab-{precision}-{s}.log").read()).group(1))
            for s in seeds]
nano = [float(x) for x in re.findall(r"whole split ([0-9.]+)", open(f"{out}/nanogpt-whole-split.txt").read())]
runs = {"nanoGPT": nano, "poslab defaults": poslab("auto"), "poslab fp32": poslab("fp32")}
for name, v in runs.items():
    print(f"{name:16s} mean {st.mean(v):.4f}  sd {st.stdev(v) if len(v) > 1 else float('nan'):.4f}  ({', '.join(f'{x:.4f}' for x in v)})")
for name in ("poslab defaults", "poslab fp32"):
    a, b = runs[name], nano
    if len(a) < 2 or len(b) < 2:
        continue
    va, vb = st.variance(a) / len(a), st.variance(b) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    d = st.mean(a) - st.mean(b)
    print(f"{name} - nanoGPT: {d:+.4f} (standard error {se:.4f}, Welch t {d / se:.2f} on {df:.1f} df)")
PY
