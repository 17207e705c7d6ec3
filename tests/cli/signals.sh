#!/usr/bin/env bash
# SIGINT/SIGTERM checkpoint and exit cleanly (resumable); kill -9 never corrupts the checkpoint.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},\n "train": {"max_iters": 100000, "eval_interval": 20, "log_interval": 20, "precision": "fp32", "threads": 1}}\n' > long.json

wait_for_checkpoint() { for _ in $(seq 1 300); do [ -f "$1/checkpoint.pt" ] && return 0; sleep 0.1; done; return 1; }

for sig in INT TERM; do
  "$POSLAB" train -c long.json --out run-$sig > log-$sig 2>&1 &
  pid=$!
  wait_for_checkpoint run-$sig
  sleep 1
  kill -$sig $pid
  wait $pid
  status=$?
  check "SIG$sig exits with 130 (got $status)" test "$status" -eq 130
  check "SIG$sig marks the run interrupted" grep -q '"status": "interrupted"' run-$sig/summary.json
  check "SIG$sig prints how to resume" grep -q "poslab train --resume run-$sig" log-$sig
  step=$(grep -o '"step": [0-9]*' run-$sig/summary.json | grep -o '[0-9]*')
  check "SIG$sig checkpoint is past step 0 ($step)" test "$step" -gt 0
done

# One poslab trains a run at a time: a --resume of a run being trained (a second compare or shard reaching the
# same cell) is refused naming the other's pid, and the run it would have joined goes on untouched.
"$POSLAB" train -c long.json --out run-busy > log-busy 2>&1 &
pid=$!
wait_for_checkpoint run-busy
expect_fail 2 "--resume run-busy: another poslab (pid $pid) is writing it" -- "$POSLAB" train --resume run-busy
check "...and the first run trains on" kill -0 $pid
kill -TERM $pid
wait $pid
step=$(grep -o '"step": [0-9]*' run-busy/summary.json | grep -o '[0-9]*')
check "...then, stopped, it resumes" "$POSLAB" train --resume run-busy --stop-at $((step + 5))

# Resume the interrupted run for a few more steps (--stop-at), proving the checkpoint is usable.
step=$(grep -o '"step": [0-9]*' run-INT/summary.json | grep -o '[0-9]*')  # run-INT's own step
"$POSLAB" train --resume run-INT --stop-at $((step + 10)) > resume.log 2>&1
check "resume after SIGINT works (exit $?)" grep -q "resuming at step" resume.log
cp run-INT/checkpoint.pt before.pt
expect_fail 2 "--stop-at 1: the run in run-INT is at step $((step + 10)) already" -- "$POSLAB" train --resume run-INT --stop-at 1
check "... and the checkpoint is left as it was" cmp -s before.pt run-INT/checkpoint.pt

# A signal during the evaluation after training (eval.lengths; minutes on a long corpus) ends it at once: the run
# is trained and checkpointed, eval.json is left to `poslab eval`. It used to evaluate on and exit 0.
printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},\n "train": {"max_iters": 4, "eval_interval": 20, "precision": "fp32", "threads": 1},\n "eval": {"lengths": [8], "batches": 1000000}}\n' > evals.json
"$POSLAB" train -c evals.json --out run-eval > log-eval 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q "done: val" log-eval && break; sleep 0.1; done
sleep 0.5
kill -INT $pid
for _ in $(seq 1 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { kill -9 $pid; echo "(the evaluation went on after SIGINT)"; }
wait $pid
status=$?
check "SIGINT during the evaluation exits with 130 (got $status)" test "$status" -eq 130
check "... says how to evaluate the trained run" grep -q "poslab eval --run run-eval" log-eval
check "... the run stays done" grep -q '"status": "done"' run-eval/summary.json
check "... and no eval.json is written" test ! -e run-eval/eval.json

# Resuming a finished run trains nothing and rewrites nothing: not its checkpoint or summary, nor an eval.json
# that poslab eval wrote at other lengths; without an eval.json (the stop above), it evaluates as training would.
printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},\n "train": {"max_iters": 4, "eval_interval": 2, "precision": "fp32", "threads": 1},\n "eval": {"lengths": [8], "batches": 1}}\n' > quick.json
"$POSLAB" train -c quick.json --out run-done > /dev/null 2>&1
"$POSLAB" eval --run run-done --lengths 4,8 --batches 1 > /dev/null 2>&1
mkdir -p kept && cp run-done/checkpoint.pt run-done/summary.json run-done/eval.json run-done/metrics.jsonl kept/
"$POSLAB" train --resume run-done > resume-done.log 2>&1
check "resuming a finished run exits 0 (got $?)" test $? -eq 0
check "... says it is finished" grep -q "the run in run-done is finished (step 4 of 4): nothing to train" resume-done.log
for f in checkpoint.pt summary.json eval.json metrics.jsonl; do
  check "... and leaves its $f as it was" cmp -s kept/$f run-done/$f
done
rm run-done/eval.json
"$POSLAB" train --resume run-done > /dev/null 2>&1
check "... and evaluates a finished run that has no eval.json" /usr/bin/python3 -c "
import json; e = json.load(open('run-done/eval.json')); assert [r['length'] for r in e['results']] == [8], e['results']"

# kill -9 at arbitrary moments: the checkpoint on disk always loads.
"$POSLAB" train -c long.json --out run-kill > log-kill 2>&1 &
pid=$!
wait_for_checkpoint run-kill
for i in 1 2 3; do
  sleep 0.$((RANDOM % 9 + 1))
  "$POSLAB" eval --run run-kill --lengths 8 --batches 1 > /dev/null 2>&1
  check "checkpoint loads while training runs (round $i)" test $? -eq 0
done
kill -9 $pid
wait $pid 2>/dev/null
"$POSLAB" eval --run run-kill --lengths 8 --batches 1 > /dev/null 2>&1
check "checkpoint loads after kill -9" test $? -eq 0
# A few steps past the last one it logged (its checkpoint is at or before that step).
last=$(/usr/bin/python3 -c "import json; print(max(json.loads(l)['step'] for l in open('run-kill/metrics.jsonl')))")
"$POSLAB" train --resume run-kill --stop-at $((last + 20)) > /dev/null 2>&1 || true
check "a killed run resumes" grep -q '"status"' run-kill/summary.json

# A metrics row that cannot be written (here the file size limit, as a full disk would) fails the run, naming
# the file, where it ran on to "done" with rows lost and a row cut in two; resumed, the run's metrics equal an
# unbroken run's, step for step.
printf '{"model": {"n_layer": 1, "n_embd": 8, "n_head": 2, "block_size": 16}, "data": {"max_len": 4},\n "train": {"max_iters": 800, "eval_interval": 200, "log_interval": 1, "precision": "fp32", "threads": 1},\n "eval": {"lengths": [8], "batches": 1}}\n' > rows.json
"$POSLAB" train -c rows.json --out rows-straight > /dev/null 2>&1
ckpt_kb=$(( $(stat -c %s rows-straight/checkpoint.pt) / 1024 + 2 ))
( trap '' XFSZ; ulimit -f "$ckpt_kb"; exec "$POSLAB" train -c rows.json --out rows-cut ) > rows-cut.log 2>&1
status=$?
check "a metrics row that cannot be written fails the run (exit $status, not 0)" test "$status" -eq 1
check "... naming metrics.jsonl and why" grep -q "cannot write rows-cut/metrics.jsonl: File too large" rows-cut.log
check "... and the summary says failed" grep -q '"status": "failed"' rows-cut/summary.json
"$POSLAB" train --resume rows-cut > rows-resume.log 2>&1
check "resumed, its metrics equal the unbroken run's, every row parsed" /usr/bin/python3 - rows-straight/metrics.jsonl rows-cut/metrics.jsonl <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
strip = lambda rows: [(r["step"], r.get("train_loss"), r.get("val_loss")) for r in rows]
assert len(a) > 800 and strip(a) == strip(b), [(x, y) for x, y in zip(strip(a), strip(b)) if x != y][:3]
PY
finish
