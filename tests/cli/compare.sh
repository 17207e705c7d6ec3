#!/usr/bin/env bash
# compare end to end: a tiny grid runs, a failing cell does not stop the others, a re-run skips
# finished cells, an interrupted grid resumes, and the outputs exist.
source "$(dirname "$0")/lib.sh"
ROOT=$(pwd)
cd "$WORK"
printf '{"data": {"task": "copy", "max_len": 4}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16},\n "train": {"max_iters": 20, "eval_interval": 10, "precision": "fp32", "threads": 1}, "eval": {"lengths": [4, 8], "batches": 1}}\n' > base.json
# A cell that fails when it runs (too large for this machine: its own `poslab train` refuses it) fails
# alone: the others run, then compare exits 1 naming it.
printf '{"name": "tiny", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope", "learned"], "model.n_embd": [16, 65536]}}\n' > exp.json

"$POSLAB" compare -c exp.json --out out --no-plots > log1 2>&1
status=$?
check "compare exits 1 when a cell failed (status $status)" test $status -eq 1
check "compare names the failed cells" grep -q "poslab: failed: 2 cell(s) failed (kind=rope_n_embd=65536, kind=learned_n_embd=65536)" log1
check "results.json written" test -f out/results.json
check "results.csv written" test -f out/results.csv
check "the failed cell is recorded as failed with its error" grep -q '"error": "model too large for this machine' out/results.json
check "the valid cells ran" test -f out/cells/kind=rope_n_embd=16/eval.json -a -f out/cells/kind=learned_n_embd=16/eval.json
check "a task cell's eval.json holds the documented fields (docs/outputs.md)" \
  /usr/bin/python3 "$CLI_DIR/py/check_eval_json.py" out/cells/kind=rope_n_embd=16/eval.json "$CLI_DIR/../../docs/outputs.md"
check "results.csv follows RFC 4180 and holds results.json's rows (docs/outputs.md fields)" \
  /usr/bin/python3 "$CLI_DIR/py/check_results_csv.py" out "$CLI_DIR/../../docs/outputs.md"
check "the table is printed" grep -q "exact match by eval length" log1
check "attention statistics for every finished cell" \
  test -s out/cells/kind=rope_n_embd=16/attention.json -a -s out/cells/kind=learned_n_embd=16/attention.json

"$POSLAB" compare -c exp.json --out out --no-plots > log2 2>&1
check "a re-run skips finished cells" test "$(grep -c 'finished earlier, skipped' log2)" -eq 2

# An interrupted cell (checkpoint, no summary 'done') is resumed, not restarted.
"$POSLAB" train -c base.json --set model.pos_encoding.kind=alibi --out out2/cells/kind=alibi --stop-at 10 > /dev/null 2>&1
printf '{"name": "tiny2", "base": "base.json", "grid": {"model.pos_encoding.kind": ["alibi"]}}\n' > exp2.json
"$POSLAB" compare -c exp2.json --out out2 --no-plots > log3 2>&1
check "an interrupted cell is resumed" grep -q "resuming kind=alibi" log3
check "the resumed cell finished" grep -q '"status": "done"' out2/cells/kind=alibi/summary.json

# "jobs" in the file: that many cells at once (at most the cores), each with cores/jobs threads; -j overrides it.
printf '{"data": {"task": "copy", "max_len": 4}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16},\n "train": {"max_iters": 20, "eval_interval": 10, "precision": "fp32"}, "eval": {"lengths": [4, 8], "batches": 1}}\n' > base0.json
printf '{"name": "jobs", "base": "base0.json", "grid": {"model.pos_encoding.kind": ["rope", "alibi"]}, "jobs": 2}\n' > exp3.json
"$POSLAB" compare -c exp3.json --out out3 --no-plots > log5 2>&1
"$POSLAB" compare -c exp3.json --out out4 --no-plots -j 1 > log6 2>&1
check "the file's jobs: cells side by side with a share of the cores; -j 1: one at a time, every core" \
  /usr/bin/python3 - "$(nproc)" <<'PY'
import json, re, sys
cores = int(sys.argv[1])
jobs = min(2, cores)
def order(log):  # "running" and "done" in the order the log says them
    return [m.group(1) for m in re.finditer(r"\] (running|[^ ]+ done)", open(log).read())]
o = order("log5")
assert o[:jobs] == ["running"] * jobs, o
for kind in ("rope", "alibi"):
    t = json.load(open("out3/configs/kind=%s.json" % kind))["train"].get("threads", 0)
    assert t == (max(1, cores // jobs) if jobs > 1 else 0), (kind, t)
    assert json.load(open("out4/configs/kind=%s.json" % kind))["train"].get("threads", 0) == 0
assert order("log6")[:2] == ["running", "kind=rope done"], order("log6")
PY

if /usr/bin/python3 -c "import matplotlib" 2>/dev/null && [ -f "$ROOT/scripts/plot_report.py" ]; then
  POSLAB_SCRIPTS="$ROOT/scripts" "$POSLAB" compare -c exp.json --out out > log4 2>&1
  for f in report.md report.html loss_curves.png extrapolation.png position_loss.png attention.png; do
    check "$f written" test -s out/$f
  done
  check "the report shows the attention summary" grep -q "(attention.png)" out/report.md
fi
finish
