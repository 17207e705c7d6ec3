#!/usr/bin/env bash
# Grid sharding: two shards run one after the other (one by flag, one by Slurm's variables), then
# --aggregate gives the same results as the unsharded grid; a retried shard skips finished cells;
# aggregating early names the missing cells; bad shard specs are refused.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
printf '{"data": {"task": "copy", "max_len": 4}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16},\n "train": {"max_iters": 12, "eval_interval": 6, "precision": "fp32", "threads": 1}, "eval": {"lengths": [4, 8], "batches": 1}}\n' > base.json
printf '{"name": "sh", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope", "alibi", "none"]}}\n' > exp.json

"$POSLAB" compare -c exp.json --out whole --no-plots > log0 2>&1
check "the unsharded grid ran" test -f whole/results.json

"$POSLAB" compare -c exp.json --out parts --shard 0/2 --no-plots > log1 2>&1
check "shard 0/2 exits 0" test $? -eq 0
check "shard 0/2 ran cells 0 and 2 only" test -f parts/cells/kind=rope/eval.json -a -f parts/cells/kind=none/eval.json -a ! -e parts/cells/kind=alibi
check "a shard does not aggregate" test ! -e parts/results.json
expect_fail 2 "1 cell(s) not finished yet: kind=alibi" -- "$POSLAB" compare --aggregate parts --no-plots

SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 "$POSLAB" compare -c exp.json --out parts --no-plots > log2 2>&1
check "Slurm's array variables pick shard 1/2" test -f parts/cells/kind=alibi/eval.json
"$POSLAB" compare -c exp.json --out parts --shard 0/2 --no-plots > log3 2>&1
check "a retried shard skips its finished cells" test "$(grep -c 'finished earlier, skipped' log3)" -eq 2

"$POSLAB" compare --aggregate parts --no-plots > log4 2>&1
check "--aggregate exits 0 once every cell is in" test $? -eq 0
# The same numbers as the unsharded grid (CPU training is deterministic); timings naturally differ.
check "sharded + aggregated results equal the unsharded ones" /usr/bin/python3 - whole/results.json parts/results.json <<'PY'
import json, sys
def strip(path):
    r = json.load(open(path))
    for row in r["rows"]:
        row.pop("tokens_per_s_mean"), row.pop("wall_s_mean")
    for c in r["cells"]:
        c.pop("tokens_per_s"), c.pop("wall_s"), c.pop("core_share")
    r.pop("config")
    return r
a, b = strip(sys.argv[1]), strip(sys.argv[2])
sys.exit(0 if a == b else 1)
PY

# Shards of one output directory run one experiment. Another experiment file (train.max_iters differs, the
# grid is the same) is refused before any work, naming the difference ...
sed 's/"max_iters": 12/"max_iters": 8/' base.json > base_b.json
printf '{"name": "sh", "base": "base_b.json", "grid": {"model.pos_encoding.kind": ["rope", "alibi", "none"]}}\n' > exp_b.json
expect_fail 2 "experiment.json there is another experiment's (cell kind=rope: train.max_iters is 12 there, 8 in the experiment); every shard of one output directory runs the same experiment file" -- \
  "$POSLAB" compare -c exp_b.json --out parts --shard 1/2 --no-plots
check "the refused shard trained nothing" test "$(ls parts/cells | wc -l)" -eq 3
# ... and where shards of two experiment files started together (neither saw the other's experiment.json),
# --aggregate refuses the cells trained with the other config. Here shard 1 of exp_b runs in a directory
# of its own, and its cell is moved in beside exp's.
"$POSLAB" compare -c exp.json --out mixed --shard 0/2 --no-plots > /dev/null 2>&1
"$POSLAB" compare -c exp_b.json --out mixed_b --shard 1/2 --no-plots > /dev/null 2>&1
mv mixed_b/cells/kind=alibi mixed/cells/
expect_fail 2 "cell kind=alibi was trained with another config than mixed/experiment.json describes" -- \
  "$POSLAB" compare --aggregate mixed --no-plots
check "and writes no results for them" test ! -e mixed/results.json
# A shard whose experiment.json is rewritten by another experiment's shard while it runs fails at its end.
sed 's/"max_iters": 12/"max_iters": 400/' base.json > base_slow.json
printf '{"name": "sh", "base": "base_slow.json", "grid": {"model.pos_encoding.kind": ["rope", "alibi", "none"]}}\n' > exp_slow.json
"$POSLAB" compare -c exp_slow.json --out race --shard 0/2 --no-plots > race.log 2>&1 &
pid=$!
for _ in $(seq 100); do [ -f race/experiment.json ] && break; sleep 0.1; done
# While a shard runs, a whole-grid compare into its directory is refused (it would train the shard's cells too);
# other shards are not: the shard holds the directory's lock shared.
expect_fail 2 "--out race: another poslab (pid $pid) is writing it" -- "$POSLAB" compare -c exp_slow.json --out race --no-plots
check "... while another shard could take the directory's lock beside it" flock -n -s race/.compare.lock true
check "... and not the shard's own" bash -c '! flock -n race/.compare-shard-0-of-2.lock true'
cp mixed_b/experiment.json race/experiment.json
wait $pid
status=$?
check "a shard whose experiment.json another experiment rewrote fails (status $status)" test $status -eq 1
check "naming the rewrite" grep -q "race/experiment.json was rewritten by a shard of another experiment while this one ran" race.log

expect_fail 2 "--shard 2/2: shard 2 of 2 is out of range" -- "$POSLAB" compare -c exp.json --out x --shard 2/2
expect_fail 2 "--shard 1: expected K/N" -- "$POSLAB" compare -c exp.json --out x --shard 1
expect_fail 2 "expected a non-negative integer, got 'a'" -- "$POSLAB" compare -c exp.json --out x --shard a/2
expect_fail 2 "POSLAB_SHARD_COUNT" -- env JOB_COMPLETION_INDEX=0 "$POSLAB" compare -c exp.json --out x
# A Slurm task resubmitted alone (--array=3) or a list array (--array=3,5) cannot say how many shards there are:
# refused (as shard 0 of 1 it trained every cell beside the other shards); an array of consecutive ids from 1 works.
expect_fail 2 "SLURM_ARRAY_TASK_ID 3 of an array of 1 task(s) from 3 to 3: not consecutive ids" -- \
  env SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_TASK_COUNT=1 SLURM_ARRAY_TASK_MIN=3 SLURM_ARRAY_TASK_MAX=3 "$POSLAB" compare -c exp.json --out x
expect_fail 2 "pass --shard K/N" -- \
  env SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_COUNT=2 SLURM_ARRAY_TASK_MIN=3 SLURM_ARRAY_TASK_MAX=5 "$POSLAB" compare -c exp.json --out x
check "nothing written for a refused Slurm shard" test ! -e x
expect_fail 2 "no experiment.json here" -- "$POSLAB" compare --aggregate nowhere
expect_fail 2 "drop --config/--shard" -- "$POSLAB" compare --aggregate parts -c exp.json
expect_fail 2 "drop --config/--shard/--out" -- "$POSLAB" compare --aggregate parts --out x
check "nothing written for bad shard input" test ! -e x

# A cell that diverges in its shard is a finished, failed cell: the shard fails naming its logs (it writes no
# results.json), and --aggregate records it failed in results.json and fails, as one unsharded compare does.
printf '{"name": "div", "base": "base.json", "grid": {"train.learning_rate": [0.002, 1e12]}}\n' > div.json
expect_fail 1 "1 cell(s) failed (learning_rate=1000000000000.0); their errors are in div/logs/ (compare --aggregate div records" -- \
  "$POSLAB" compare -c div.json --out div --shard 1/2 --no-plots
"$POSLAB" compare -c div.json --out div --shard 0/2 --no-plots > log-div 2>&1
expect_fail 1 "1 cell(s) failed (learning_rate=1000000000000.0); their errors are in div/results.json" -- \
  "$POSLAB" compare --aggregate div --no-plots
check "--aggregate records the diverged cell failed, with its error, beside the one that trained" /usr/bin/python3 - div/results.json <<'PY'
import json, sys
cells = {c["name"]: c for c in json.load(open(sys.argv[1]))["cells"]}
assert cells["learning_rate=0.002"]["status"] == "done", cells
bad = cells["learning_rate=1000000000000.0"]
assert bad["status"] == "failed" and "nan" in bad["error"], bad
PY
finish
