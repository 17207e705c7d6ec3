#!/usr/bin/env bash
# The passkey recipe the main job uses is learnable: a 2-layer, 128-wide RoPE model trained 1000 steps at
# 64 tokens (learning rate 4e-3) with 60% passkey documents (2-digit keys, loss on the key) retrieves the key
# at the training length in at least 90% of 50 trials at every depth; without the needle its digits are at
# chance. Seed 1 on one thread, as the main job trains its seed-1 cell: retrieval forms by seed at this
# budget (docs/reproductions.md), so the seed is part of what this checks, and a change that moves it shows.
source "$(dirname "$0")/lib.sh"
ROOT=$PWD
cd "$WORK"
"$POSLAB" train -c "$ROOT/configs/base.json" --set seed=1 --set train.threads=1 --set model.n_layer=2 --set train.max_iters=1000 \
  --set train.learning_rate=4e-3 --set train.min_lr=2e-4 --set train.warmup_iters=50 --set train.eval_interval=250 \
  --set 'eval.lengths=[64]' --set model.pos_encoding.kind=rope \
  --set 'data.probes.passkey={"fraction": 0.6, "digits": 2, "loss": "answer"}' --out run >/dev/null 2>&1
check "the recipe trains" test -s run/model.pt
"$POSLAB" probe --run run --lengths 64 --trials 50 --no-plot >/dev/null 2>&1
check "at least 0.9 exact match at the training length, every depth; chance without the needle" \
  /usr/bin/python3 - run/probe-passkey.json <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
cells = [r for r in p["results"] if r["control"] is None]
assert len(cells) == 4 and all(r["trials"] == 50 for r in cells)
for r in cells:
    assert r["exact"] >= 0.9, r
no = [r for r in p["results"] if r["control"] == "no_needle"][0]
# 2-digit keys: the first digit is one of 9, the second one of 10; chance is about 0.105 a digit.
assert no["digit_accuracy"] <= 0.25 and no["exact"] <= 0.1, no
print("exact", [r["exact"] for r in cells], "no needle digits", no["digit_accuracy"])
PY
finish
