#!/usr/bin/env bash
# A run written by LibTorch 1.13 loads in this build (whatever its LibTorch): evaluation reproduces what
# the 1.13 build printed, within 1e-4, and so does a resumed run on 1.x; 2.x refuses to resume it in one
# line (it cannot read 1.x's AdamW state) and continues its weights with --init-from (tests/data/compat/README.md).
source "$(dirname "$0")/lib.sh"
fixture=$(realpath "$(dirname "$0")/../data/compat")
cd "$WORK"
cp -r "$fixture/run-libtorch1.13" run
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3

"$POSLAB" eval --run run --lengths 8,16 > eval.log 2>&1
check "the 1.13 checkpoint evaluates here ($(tail -1 eval.log))" test -f run/eval.json
check "evaluation losses equal the 1.13 build's within 1e-4" "$PY" - "$fixture/expected.json" run/eval.json <<'PYEOF'
import json, sys
want = json.load(open(sys.argv[1]))["eval_loss"]
got = {str(r["length"]): r["loss"] for r in json.load(open(sys.argv[2]))["results"]}
worst = max(abs(got[k] - v) for k, v in want.items())
print(f"largest difference from the 1.13 build: {worst:.2e}")
sys.exit(0 if worst < 1e-4 else 1)
PYEOF

libtorch_major=$("$POSLAB" --version | sed -n 's/.*LibTorch \([0-9]*\)\..*/\1/p')
if [ "$libtorch_major" = 1 ]; then
  "$POSLAB" train --resume run > resume.log 2>&1
  check "the 1.13 checkpoint resumes here ($(tail -1 resume.log))" grep -q '"status": "done"' run/summary.json
  check "the resumed run's step-6 validation loss equals the 1.13 build's within 1e-4" "$PY" - "$fixture/expected.json" run/metrics.jsonl <<'PYEOF'
import json, sys
want = json.load(open(sys.argv[1]))["resumed_val_loss_at_step_6"]
rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
got = [r["val_loss"] for r in rows if r.get("step") == 6 and "val_loss" in r]
print(f"step 6 validation loss: {got} (1.13: {want})")
sys.exit(0 if got and abs(got[-1] - want) < 1e-4 else 1)
PYEOF
else
  # LibTorch 2.x reads 1.x's AdamW state as empty tensors: resuming is refused in one line (exit 2,
  # nothing changed), and the weights carry on with --init-from (a new optimizer).
  cp run/checkpoint.pt before.pt
  expect_fail 2 "its AdamW state cannot be read by this LibTorch" -- "$POSLAB" train --resume run
  check "the refused resume left the checkpoint as it was" cmp -s before.pt run/checkpoint.pt
  "$POSLAB" train --init-from run --out continued > init.log 2>&1
  check "the 1.13 weights continue with --init-from ($(tail -1 init.log))" grep -q '"status": "done"' continued/summary.json
fi
finish
