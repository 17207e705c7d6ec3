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
check "each cell keeps its [k/N] from start to end, and the cells are numbered 1..N once each" /usr/bin/python3 - log1 <<'PY'
import re, sys
started, ended = {}, {}
for line in open(sys.argv[1]):
    m = re.search(r"\[(\d+)/(\d+)\] (running|resuming) (\S+)", line)
    if m: started[m.group(4)] = (int(m.group(1)), int(m.group(2)))
    m = re.search(r"\[(\d+)/(\d+)\] (\S+) (done in|failed:|interrupted)", line)
    if m: ended[m.group(3)] = (int(m.group(1)), int(m.group(2)))
assert started == ended, (started, ended)
assert sorted(k for k, _ in started.values()) == [1, 2, 3, 4] and {n for _, n in started.values()} == {4}, started
PY
check "attention statistics for every finished cell" \
  test -s out/cells/kind=rope_n_embd=16/attention.json -a -s out/cells/kind=learned_n_embd=16/attention.json

echo stale > out/report.html; echo stale > out/extrapolation.png  # as an earlier run with plots left them
"$POSLAB" compare -c exp.json --out out --no-plots > log2 2>&1
check "a re-run skips finished cells" test "$(grep -c 'finished earlier, skipped' log2)" -eq 2
check "...and numbers the cells it runs among themselves, [1/2] and [2/2]" bash -c \
  "grep -q '\[1/2\] running' log2 && grep -q '\[2/2\] running' log2 && ! grep -q '/4\]' log2"
check "the report of the earlier results.json is removed, not left beside the new one" \
  test ! -e out/report.html -a ! -e out/extrapolation.png -a -s out/results.json
check "and that is said" grep -q "removed out/report.html and its pictures: they showed earlier results" log2
# On a task, eval.batch_size x eval.batches examples are scored: a cell's eval.json written over with another
# batch size holds other numbers, and compare evaluates it again rather than aggregating them.
"$POSLAB" eval --run out/cells/kind=rope_n_embd=16 --batch-size 1 > /dev/null 2>&1
check "eval.json of a task records the batch size it scored with" /usr/bin/python3 -c "
import json; e = json.load(open('out/cells/kind=rope_n_embd=16/eval.json')); assert e['settings']['eval']['batch_size'] == 1, e['settings']"
"$POSLAB" compare -c exp.json --out out --no-plots > log2b 2>&1
check "... and a re-run evaluates that cell again" grep -q "kind=rope_n_embd=16/eval.json: evaluated with eval.batch_size 1, not the experiment's" log2b
check "... with the experiment's batch size" /usr/bin/python3 -c "
import json
e = json.load(open('out/cells/kind=rope_n_embd=16/eval.json')); c = json.load(open('out/configs/kind=rope_n_embd=16.json'))
assert e['settings']['eval']['batch_size'] == c['eval']['batch_size'] != 1, (e['settings'], c['eval'])"

# A length added to the experiment's eval.lengths: the trained cells take it into their config.json and are
# evaluated again, not trained again (their checkpoints and metrics untouched), and say so, naming the list
# whole (the difference is an appended element, "/eval/lengths/-", inside it).
cp -r out outev
printf '{"name": "tiny", "base": "base.json", "set": {"eval.lengths": [4, 8, 6]}, "grid": {"model.pos_encoding.kind": ["rope", "learned"], "model.n_embd": [16, 65536]}}\n' > expev.json
sums=$(md5sum outev/cells/kind=*_n_embd=16/checkpoint.pt outev/cells/kind=*_n_embd=16/metrics.jsonl)
"$POSLAB" compare -c expev.json --out outev --no-plots > logev 2>&1
check "eval.lengths changed: each trained cell says it is evaluated again, not trained again" \
  test "$(grep -c 'trained with other evaluation settings (eval.lengths is \[4,8\] there, \[4,8,6\] in the experiment): it takes the experiment.s and is evaluated again, not trained again' logev)" -eq 2
check "... nothing trained: checkpoints and metrics as they were" bash -c '[ "$1" = "$(md5sum outev/cells/kind=*_n_embd=16/checkpoint.pt outev/cells/kind=*_n_embd=16/metrics.jsonl)" ]' _ "$sums"
check "... each cell's config.json, configs/CELL.json and eval.json at the new lengths; results.json too" /usr/bin/python3 -c "
import json
for cell in ('kind=rope_n_embd=16', 'kind=learned_n_embd=16'):
    c = json.load(open('outev/cells/%s/config.json' % cell))
    assert c['eval']['lengths'] == [4, 8, 6] and c == json.load(open('outev/configs/%s.json' % cell)), cell
    e = json.load(open('outev/cells/%s/eval.json' % cell))
    assert sorted(r['length'] for r in e['results']) == [4, 6, 8], e['results']
r = json.load(open('outev/results.json'))
assert r['lengths'] == [4, 6, 8], r['lengths']"

# A train run's directory and a compare output are kept apart: neither command writes among the other's files.
mkdir -p arun && cp out/cells/kind=rope_n_embd=16/config.json arun/
expect_fail 2 "--out arun: holds a poslab train run (config.json), not an experiment's output; pick another --out" -- \
  "$POSLAB" compare -c exp.json --out arun --no-plots
expect_fail 2 "--out out: holds a poslab compare output (experiment.json; its runs are out/cells/NAME)" -- \
  "$POSLAB" train -c base.json --out out
expect_fail 2 "--out out: holds a poslab compare output" -- "$POSLAB" train -c base.json --out out --resume-if-exists
expect_fail 2 "run out: no run here (a poslab compare output: its runs are out/cells/NAME)" -- "$POSLAB" eval --run out
expect_fail 2 "--init-from out: no run here (a poslab compare output" -- "$POSLAB" train --init-from out --out ft
# Nor into a compare output's own folders, nor a compare output inside a run (a cell) or in those folders.
expect_fail 2 "--out out/cells: is a poslab compare output's cells/ folder (" -- "$POSLAB" train -c base.json --out out/cells
expect_fail 2 "--out out/logs/: is a poslab compare output's logs/ folder (" -- "$POSLAB" train -c base.json --out out/logs/
expect_fail 2 "--out out/cells/kind=rope_n_embd=16/sub: lies inside a poslab train run (" -- \
  "$POSLAB" compare -c exp.json --out out/cells/kind=rope_n_embd=16/sub --no-plots
expect_fail 2 "--out out/configs/sub: lies inside a poslab compare output's configs/ folder (" -- "$POSLAB" compare -c exp.json --out out/configs/sub --no-plots
check "... and nothing was written into either" bash -c '[ "$(ls arun)" = config.json ] && [ ! -e out/config.json ] && [ ! -e ft ] &&
  [ ! -e out/cells/config.json ] && [ ! -e out/logs/config.json ] && [ ! -e out/cells/kind=rope_n_embd=16/sub ] && [ ! -e out/configs/sub ]'

# An interrupted cell (checkpoint, no summary 'done') is resumed, not restarted.
"$POSLAB" train -c base.json --set model.pos_encoding.kind=alibi --out out2/cells/kind=alibi --stop-at 10 > /dev/null 2>&1
printf '{"name": "tiny2", "base": "base.json", "grid": {"model.pos_encoding.kind": ["alibi"]}}\n' > exp2.json
"$POSLAB" compare -c exp2.json --out out2 --no-plots > log3 2>&1
check "an interrupted cell is resumed" grep -q "resuming kind=alibi" log3
check "the resumed cell finished" grep -q '"status": "done"' out2/cells/kind=alibi/summary.json

# A grid over file paths (made absolute, so holding '/'): each cell is named after the file and a hash of its
# path, so two files of one name in two folders are two cells, and the names make valid file names.
mkdir -p gp/d1 gp/d2
head -c 20000 "$ROOT/data/text/licenses.txt" > gp/d1/a.txt; tail -c 20000 "$ROOT/data/text/licenses.txt" > gp/d2/a.txt
printf '{"data": {"kind": "text", "path": "d1/a.txt"}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16},\n "train": {"max_iters": 4, "eval_interval": 4, "precision": "fp32", "threads": 1, "batch_size": 4}, "eval": {"lengths": [16], "batches": 1}}\n' > gp/base.json
printf '{"name": "paths", "base": "base.json", "grid": {"data.path": ["d1/a.txt", "d2/a.txt"]}}\n' > gp/exp.json
"$POSLAB" compare -c gp/exp.json --out gp/out --no-plots > gp.log 2>&1
check "a grid over file paths runs (exit $?)" grep -q "What this shows" gp.log
check "its two cells are named after the file and a hash of its path" \
  test "$(ls gp/out/cells | grep -cE '^path=a\.txt~[0-9a-f]{8}$')" -eq 2
printf '{"name": "long", "base": "base.json", "grid": {"train.learning_rate": [0.001], "model.pos_encoding.kind": ["%s"]}}\n' \
  "$(printf 'r%.0s' $(seq 300))" > gp/long.json
expect_fail 2 "bytes, is too long for a file name (at most 224): shorten the grid's values" -- "$POSLAB" compare -c gp/long.json --out gp/long --no-plots
check "nothing is written for it" test ! -e gp/long

# A launcher's variables around compare (an sbatch script with several tasks) do not reach the cells, each
# one process: with them, every cell would wait for a peer that never comes, then fail.
printf '{"name": "env", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope"]}}\n' > envexp.json
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29763 POSLAB_DIST_TIMEOUT_S=3 \
  "$POSLAB" compare -c envexp.json --out envout --no-plots > env.log 2>&1
status=$?
check "compare under a launcher's variables trains its cells alone (status $status)" test $status -eq 0
check "and says which variables it kept from them" grep -q "each cell trains as one process: .*MASTER_ADDR.* not passed on to the cells" env.log

# Re-running into the same --out after the experiment changed: refused before any work, naming the cell and key.
sed 's/"max_iters": 20/"max_iters": 30/' base.json > base_b.json
printf '{"name": "tiny2", "base": "base_b.json", "grid": {"model.pos_encoding.kind": ["alibi"]}}\n' > exp2b.json
expect_fail 2 "cell kind=alibi holds a run of another config (train.max_iters is 20 there, 30 in the experiment)" -- \
  "$POSLAB" compare -c exp2b.json --out out2 --no-plots
check "... and the finished cell is left as it was" grep -q '"max_iters": 20' out2/cells/kind=alibi/summary.json

# A value twice in a grid (or a seed twice) would count one model as two: refused.
printf '{"base": "base.json", "grid": {"model.pos_encoding.kind": ["rope", "rope"]}}\n' > dup.json
expect_fail 2 "grid.model.pos_encoding.kind lists \"rope\" twice" -- "$POSLAB" compare -c dup.json --out dup --no-plots
printf '{"base": "base.json", "grid": {"model.pos_encoding.kind": ["rope"]}, "seeds": [1, 1]}\n' > dupseed.json
expect_fail 2 "seeds lists 1 twice" -- "$POSLAB" compare -c dupseed.json --out dup --no-plots
check "nothing written for a refused grid" test ! -e dup

# With an eval_grid, a cell whose training failed is failed in every variant's row, and compare exits 1.
printf '{"name": "eg", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope"], "model.n_embd": [16, 65536]},\n "eval_grid": {"a": {}, "b": {"eval.batches": 2}}}\n' > eg.json
"$POSLAB" compare -c eg.json --out eg --no-plots > eg.log 2>&1
status=$?
check "eval_grid: a failed training fails compare (exit $status)" test $status -eq 1
check "eval_grid: the failed cell's variants are failed with its error, the others ok" /usr/bin/python3 -c '
import json
cells = {c["name"]: c for c in json.load(open("eg/results.json"))["cells"]}
bad = [n for n in cells if "n_embd=65536" in n]
assert len(bad) == 2 and all(cells[n]["status"] == "failed" and "model too large" in (cells[n]["error"] or "") for n in bad), cells
assert all(cells[n]["status"] == "done" for n in cells if n not in bad), cells'

# An eval_grid variant redefined between runs into one --out is evaluated again, not reused under its name.
printf '{"name": "egc", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope"]}, "eval_grid": {"v": {"eval.lengths": [4, 8]}}}\n' > egc.json
"$POSLAB" compare -c egc.json --out egc --no-plots > egc1.log 2>&1
sed 's/"eval.lengths": \[4, 8\]/"eval.lengths": [4]/' egc.json > egc2.json
"$POSLAB" compare -c egc2.json --out egc --no-plots > egc2.log 2>&1
check "a redefined variant is said to be done again" grep -q "eval_grid.v changed since the last run into egc: done again (1 earlier file(s) removed)" egc2.log
check "and its evaluation is the new definition's" /usr/bin/python3 -c '
import json
e = json.load(open("egc/cells/kind=rope/eval-v.json"))
assert [r["length"] for r in e["results"]] == [4], e["results"]'
"$POSLAB" compare -c egc2.json --out egc --no-plots > egc3.log 2>&1
check "an unchanged variant is not done again" bash -c '! grep -q "changed since the last run" egc3.log'
# A variant's file and the cell's eval.json written over by hand, at the same lengths but with other settings
# (another RoPE scaling, other batches): evaluated again under the experiment's, where they were averaged in.
"$POSLAB" eval --run egc/cells/kind=rope --lengths 4 --tag v --rope-scaling linear --factor 2 > /dev/null 2>&1
"$POSLAB" eval --run egc/cells/kind=rope --lengths 4,8 --batches 3 > /dev/null 2>&1
"$POSLAB" compare -c egc2.json --out egc --no-plots > egc4.log 2>&1
check "a variant evaluated over by hand with --rope-scaling is evaluated again" \
  grep -q "kind=rope/eval-v.json: evaluated with --rope-scaling linear (written over by another command?): evaluated again" egc4.log
check "... and the cell's eval.json with other batches" \
  grep -q "kind=rope/eval.json: evaluated with eval.batches 3, not the experiment's 1" egc4.log
check "... both now as the experiment evaluates them" /usr/bin/python3 -c '
import json
v = json.load(open("egc/cells/kind=rope/eval-v.json")); e = json.load(open("egc/cells/kind=rope/eval.json"))
assert v["rope_scaling"] == "none" and v["settings"]["rope_scaling_flag"] is None, v["settings"]
assert e["settings"]["eval"]["batches"] == 1 and [r["length"] for r in e["results"]] == [4, 8], e["settings"]'

# Cells trained at different lengths: the longest is the training length, whatever the grid's order, and the
# summary says the cells differ instead of measuring them all from one length.
for order in "4, 3" "3, 4"; do
  printf '{"name": "ml", "base": "base.json", "grid": {"data.max_len": [%s]}}\n' "$order" > ml.json
  "$POSLAB" compare -c ml.json --out "ml-${order/, /}" --no-plots > /dev/null 2>&1
done
check "mixed training lengths: train_length is the longest, train_lengths all, in either grid order" /usr/bin/python3 -c '
import json
a, b = (json.load(open(d + "/results.json")) for d in ("ml-43", "ml-34"))
for r in (a, b):
    assert r["train_length"] == 4 and r["train_lengths"] == [3, 4], (r["train_length"], r["train_lengths"])
    assert r["what_this_shows"].startswith("The cells were trained at different lengths (3 and 4 items): read each row "
                                           "against its own training length"), r["what_this_shows"]'

# What a cell's probe would refuse on token files is refused before any cell trains: passkey on files whose
# nanoGPT meta.pkl has no digits (the vocabulary cannot write a key). A probe that fails on a trained cell
# (here its checkpoint damaged after the cell trained) is recorded in results.json and fails the command;
# the cell's losses stand. A character text without digits, mqar on a non-mqar grid, and passkey on a task:
# refused up front.
for _ in $(seq 200); do echo "the quick brown fox jumps over the lazy dog. The key is here."; done > letters.txt
for _ in $(seq 200); do echo "the quick brown fox jumps over the lazy dog 0123456789. What is the key? The key is here. Here we go."; done > digits.txt
/usr/bin/python3 - <<'PY2'
import array, os, pickle
for name, out in (("letters.txt", "lettok"), ("digits.txt", "digtok")):
    text = open(name).read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    os.makedirs(out, exist_ok=True)
    ids = array.array("H", [stoi[c] for c in text])
    cut = len(ids) * 9 // 10
    ids[:cut].tofile(open(out + "/train.bin", "wb")); ids[cut:].tofile(open(out + "/val.bin", "wb"))
    pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, open(out + "/meta.pkl", "wb"))
PY2
printf '{"data": {"kind": "tokens", "dir": "lettok"}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16},\n "train": {"max_iters": 20, "eval_interval": 10, "precision": "fp32", "threads": 1}, "eval": {"lengths": [16, 32]}}\n' > letters.json
printf '{"name": "pf", "base": "letters.json", "grid": {"model.pos_encoding.kind": ["rope"]}, "probes": {"passkey": {"trials": 2}}}\n' > pf.json
expect_fail 2 "experiment pf.json: cell kind=rope: probes.passkey: the run's vocabulary has no digit '0'" -- "$POSLAB" compare -c pf.json --out pf --no-plots
check "nothing trained for a probe the token files' vocabulary cannot write" test ! -e pf
printf '{"name": "pd", "base": "letters.json", "set": {"data.dir": "digtok"}, "grid": {"model.pos_encoding.kind": ["rope"]}, "probes": {"passkey": {"trials": 2}}}\n' > pd.json
# Token files a cell's own train would refuse (a train.bin of an odd number of bytes) stop the grid before its
# first cell trains, as `poslab train` stops before its first step (exit 2), not after the other cells trained.
mkdir -p oddtok && cp digtok/* oddtok/ && printf 'x' >> oddtok/train.bin
printf '{"name": "od", "base": "letters.json", "grid": {"data.dir": ["digtok", "oddtok"]}}\n' > od.json
expect_fail 2 "experiment od.json: cell dir=oddtok: data.dir $WORK/oddtok/train.bin: 36721 bytes is not a whole number of uint16 tokens" -- "$POSLAB" compare -c od.json --out od --no-plots
check "nothing trained for a grid with bad token files" test ! -e od
"$POSLAB" compare -c pd.json --out pd --no-plots > pd1.log 2>&1
status=$?
check "passkey on token files whose meta.pkl holds the digits runs (exit $status)" test $status -eq 0 -a -s pd/cells/kind=rope/probe-passkey.json
rm pd/cells/kind=rope/probe-passkey.json pd/results.json
head -c 1000 pd/cells/kind=rope/checkpoint.pt > cut.pt && mv cut.pt pd/cells/kind=rope/checkpoint.pt
"$POSLAB" compare -c pd.json --out pd --no-plots > pd.log 2>&1
status=$?
check "a failed probe fails compare (exit $status)" test $status -eq 1
check "... recorded under probe_errors, the cell done" /usr/bin/python3 -c '
import json
r = json.load(open("pd/results.json"))
assert [(e["cell"], e["task"]) for e in r["probe_errors"]] == [("kind=rope", "passkey")] and "checkpoint.pt" in r["probe_errors"][0]["error"], r.get("probe_errors")
assert r["cells"][0]["status"] == "done", r["cells"]'
check "... and named on the last line" grep -q "poslab: failed: 1 probe(s) failed (first: kind=rope passkey" pd.log
# A trained cell evaluated again (a length added) reads its validation file, not its training file: a training
# file changed since does not stop it; a validation file changed since is refused before anything is touched
# (it failed the cell halfway, its eval.json removed and its config.json rewritten), naming the cell and file.
mkdir -p evtok && cp digtok/* evtok/
for L in "16, 32" "16, 32, 24" "16, 32, 24, 40"; do
  printf '{"name": "ev", "base": "letters.json", "set": {"data.dir": "evtok", "eval.lengths": [%s]}, "grid": {"model.pos_encoding.kind": ["rope"]}}\n' "$L" > "ev-${L//, /-}.json"
done
"$POSLAB" compare -c ev-16-32.json --out ev --no-plots > ev1.log 2>&1
printf '\000\000' >> evtok/train.bin  # one more token, id 0
"$POSLAB" compare -c ev-16-32-24.json --out ev --no-plots > ev2.log 2>&1
status=$?
check "a changed training file: the trained cell is evaluated again all the same (exit $status)" /usr/bin/python3 -c "
import json, sys
e = json.load(open('ev/cells/kind=rope/eval.json'))
assert $status == 0 and sorted(r['length'] for r in e['results']) == [16, 24, 32], e['results']"
check "... said as evaluated, not resumed, and as the experiment's earlier settings, not a file written over" bash -c \
  "grep -q '\[1/1\] evaluating kind=rope' ev2.log && grep -q \"the experiment's earlier settings: evaluated again\" ev2.log && ! grep -q 'written over' ev2.log"
sums=$(md5sum ev/cells/kind=rope/eval.json ev/cells/kind=rope/config.json)
/usr/bin/python3 -c "
import numpy as np
a = np.fromfile('evtok/val.bin', np.uint16); a[::-1].tofile('evtok/val.bin')"
expect_fail 2 "--out ev: cell kind=rope: data.dir $WORK/evtok/val.bin changed since the run trained (the same size, other bytes; ev/cells/kind=rope/data_files.json): its evaluations would be of other tokens than its validation split" -- \
  "$POSLAB" compare -c ev-16-32-24-40.json --out ev --no-plots
check "... and the cell's eval.json and config.json are as they were" bash -c '[ "$1" = "$(md5sum ev/cells/kind=rope/eval.json ev/cells/kind=rope/config.json)" ]' _ "$sums"
printf '{"data": {"kind": "text", "path": "letters.txt"}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16}}\n' > lettext.json
printf '{"name": "pc", "base": "lettext.json", "grid": {"model.pos_encoding.kind": ["rope"]}, "probes": {"passkey": {"trials": 2}}}\n' > pc.json
expect_fail 2 "cell kind=rope: probes.passkey: the run's vocabulary has no digit '0'" -- "$POSLAB" compare -c pc.json --out pc --no-plots
printf '{"name": "mq", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope"]}, "probes": {"mqar": {}}}\n' > mq.json
expect_fail 2 "cell kind=rope: probes.mqar scores runs trained on data.task mqar, not on data.task copy" -- "$POSLAB" compare -c mq.json --out mq --no-plots
printf '{"name": "pt", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope"]}, "probes": {"passkey": {"trials": 2}}}\n' > pt.json
expect_fail 2 "cell kind=rope: probes.passkey needs a run trained on text (data.kind text or tokens), not on data.task copy" -- "$POSLAB" compare -c pt.json --out pt --no-plots
check "nothing trained for a refused probe" test ! -e mq -a ! -e pt -a ! -e pc

# What a cell's own train would refuse on its data, found before any cell trains: a task example longer than the block.
printf '{"name": "fit", "base": "base.json", "grid": {"data.max_len": [4, 12]}}\n' > fit.json
expect_fail 2 "cell max_len=12: data.max_len: copy with 12 items needs 25 input tokens, but model.block_size is 16" -- \
  "$POSLAB" compare -c fit.json --out fit --no-plots
check "nothing trained for it" test ! -e fit

# A stop sent to compare's process alone (kill PID, as a scheduler does) reaches its cells: they checkpoint,
# compare exits 130, and the same command resumes them.
printf '{"name": "long", "base": "base.json", "set": {"train.max_iters": 100000}, "grid": {"model.pos_encoding.kind": ["rope"]}}\n' > longexp.json
"$POSLAB" compare -c longexp.json --out longout --no-plots > long.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -f longout/cells/kind=rope/checkpoint.pt ] && break; sleep 0.1; done
sleep 1
kill -TERM $pid
wait $pid
status=$?
check "SIGTERM to compare alone: exit 130 (got $status)" test $status -eq 130
check "... its cell stopped at a checkpoint, not at the end" /usr/bin/python3 -c '
import json
s = json.load(open("longout/cells/kind=rope/summary.json"))
assert s["status"] == "interrupted" and 0 < s["step"] < 100000, s'
check "... and compare says how to resume" grep -q "interrupted: re-run the same command" long.log

# One compare per output directory: a second one into it is refused while the first runs (it trained the same
# cells beside it). And a compare killed outright (kill -9, the OOM killer) does not leave its cell training.
"$POSLAB" compare -c longexp.json --out longout --no-plots > long2.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q "resuming kind=rope" long2.log 2>/dev/null && break; sleep 0.1; done
sleep 1
expect_fail 2 "--out longout: another poslab (pid $pid) is writing it" -- "$POSLAB" compare -c longexp.json --out longout --no-plots
# A shard into it too (it resumed the cell the whole compare was training, and failed it as locked).
expect_fail 2 "--out longout: another poslab (pid $pid) is writing it" -- "$POSLAB" compare -c longexp.json --out longout --no-plots --shard 0/2
cell=$(pgrep -f -- "--resume longout/cells/kind=rope" | head -1)
kill -KILL $pid
wait $pid 2>/dev/null
gone=no
for _ in $(seq 1 100); do kill -0 "$cell" 2>/dev/null || { gone=yes; break; }; sleep 0.1; done
check "a cell whose compare was killed stops (pid ${cell:-none})" test -n "$cell" -a $gone = yes
check "... at a checkpoint, as on a stop" /usr/bin/python3 -c '
import json
s = json.load(open("longout/cells/kind=rope/summary.json"))
assert s["status"] == "interrupted", s'
check "... and the killed compare's lock went with it" flock -n longout/.compare.lock true

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
check "results.json names the machine that trained each cell, as its summary.json and /proc/cpuinfo say" \
  /usr/bin/python3 - <<'PY'
import json
first = open("/proc/cpuinfo").read().split("\n\n")[0]
info = dict((k.strip(), v.strip()) for k, _, v in (l.partition(":") for l in first.splitlines()))
r = json.load(open("out3/results.json"))
for c in r["cells"]:
    s = json.load(open("out3/%s/summary.json" % c["dir"]))
    assert s["cpu"]["model_name"] == info["model name"] and s["cpu"]["family"] == info["cpu family"], s["cpu"]
    assert s["cpu"]["model"] == info["model"] and s["cpu"]["vendor"] == info["vendor_id"], s["cpu"]
    assert set(s["cpu"]["flags"]) <= set(info["flags"].split()), s["cpu"]["flags"]
    assert c["device"] == s["device"] == "cpu" and c["precision"] == s["precision"] == "fp32", (c, s)
    assert c["cpu"].startswith(info["model name"] + " (" + info["vendor_id"] + " family " + info["cpu family"] +
                               " model " + info["model"] + ", "), c["cpu"]
    assert s["gpu"] is None and c["gpu"] is None, (s["gpu"], c["gpu"])  # trained on the CPU
assert r["machines"] == [{"device": "cpu", "precision": "fp32", "cpu": r["cells"][0]["cpu"], "gpu": None, "cells": 2}], \
    r["machines"]
PY

# An odd grid on two jobs of one thread each: the last three cells train at once (the cores shared, rather
# than one cell alone beside an idle core), said in the log; each cell's results are those it gives alone.
printf '{"name": "odd", "base": "base.json", "grid": {"model.pos_encoding.kind": ["rope", "alibi", "none", "learned", "sinusoidal"]}}\n' > exp5.json
"$POSLAB" compare -c exp5.json --out out5 --no-plots -j 2 > log8 2>&1
"$POSLAB" compare -c exp5.json --out out6 --no-plots -j 1 > log9 2>&1
check "-j 2 with five one-thread cells: the last three at once, said once; -j 1: never" /usr/bin/python3 - <<'PY'
import re
lines = [l for l in open("log8") if "one beyond --jobs" in l]
assert len(lines) == 1 and "[5/5] running kind=sinusoidal (0 left" in lines[0] and "3 at once to the end" in lines[0], lines
assert "beyond" not in open("log9").read()
# The fifth started before any of the other cells still running had ended: three ran together.
events = [m.groups() for m in re.finditer(r"\[(\d)/5\] (running|\S+ done)", open("log8").read())]
i5 = events.index(("5", "running"))
started_before = {k for k, what in events[:i5] if what == "running"}
ended_before = {k for k, what in events[:i5] if what != "running"}
assert len(started_before - ended_before) == 2, events
PY
check "... each cell's losses and results the same as one at a time; core_share in each summary and in results.json" \
  /usr/bin/python3 - <<'PY'
import json
a, b = json.load(open("out5/results.json")), json.load(open("out6/results.json"))
for r in (a, b):
    for row in r["rows"]:
        row.pop("tokens_per_s_mean"), row.pop("wall_s_mean")
    for c in r["cells"]:
        s = json.load(open("out5/%s/summary.json" % c["dir"])) if r is a else None
        if s is not None:
            assert s["threads"] == 1 and c["threads"] == 1 and c["core_share"] == s["core_share"], (c, s)
            assert 0 < s["core_share"] <= 1, s  # of the time it was ready to run, the share it ran
        c.pop("tokens_per_s"), c.pop("wall_s"), c.pop("core_share")
    r.pop("config")
assert a["rows"] == b["rows"] and a["cells"] == b["cells"], "results differ"
for c in a["cells"]:
    s5, s6 = (json.load(open("%s/%s/summary.json" % (d, c["dir"]))) for d in ("out5", "out6"))
    assert s5["final_val_loss"] == s6["final_val_loss"], (s5, s6)
PY
# core_share falls where other work shares the core: a run pinned to one CPU beside a busy loop pinned there.
if command -v taskset > /dev/null; then
  cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')
  taskset -c "$cpu" bash -c 'while :; do :; done' &
  busy=$!
  taskset -c "$cpu" "$POSLAB" train -c base.json --set train.max_iters=200 --out shared > shared.log 2>&1
  kill $busy; wait $busy 2> /dev/null
  check "a run beside a busy loop on its one CPU records a core_share under 0.8" /usr/bin/python3 -c '
import json
s = json.load(open("shared/summary.json"))
assert s["status"] == "done" and 0 < s["core_share"] < 0.8, s["core_share"]'
fi

if /usr/bin/python3 -c "import matplotlib" 2>/dev/null && [ -f "$ROOT/scripts/plot_report.py" ]; then
  POSLAB_SCRIPTS="$ROOT/scripts" "$POSLAB" compare -c exp.json --out out > log4 2>&1
  for f in report.md report.html loss_curves.png extrapolation.png position_loss.png attention.png; do
    check "$f written" test -s out/$f
  done
  check "the report shows the attention summary" grep -q "(attention.png)" out/report.md
  check "the report names the machine" grep -q "Trained with .* on the CPU $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ //; s/[][\\.*^$]/\\&/g')" out/report.md
  # Ctrl-C reaches the report script too: whether it comes while Python imports matplotlib or while a
  # picture is saved, it ends quietly with 130, no traceback, no temp file left.
  for delay in 0.3 0.9; do
    timeout --preserve-status -s INT $delay /usr/bin/python3 "$ROOT/scripts/plot_report.py" out3 > int.log 2>&1
    status=$?
    check "the report script stopped by SIGINT after $delay s exits 130 (got $status), no traceback, no temp file" \
      bash -c "[ $status -eq 130 ] && ! grep -q Traceback int.log && ! ls out3 | grep -q '[.]tmp[0-9]'"
  done
fi
# A stop while the report is drawn: the pictures it drew go, compare exits 130 and says how to draw it.
mkdir -p fakescripts
printf 'import os, signal, sys, time\nopen(os.path.join(sys.argv[1], "extrapolation.png"), "w").write("half")\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n' > fakescripts/plot_report.py
POSLAB_SCRIPTS="$WORK/fakescripts" "$POSLAB" compare -c exp3.json --out out3 > log7 2>&1
status=$?
check "a stop while drawing the report: exit 130 (got $status)" test $status -eq 130
check "... no half-drawn picture left" test ! -e out3/extrapolation.png -a -s out3/results.json
check "... and it names the script to draw it with" grep -q "interrupted while drawing the report: the results are written; draw it with python3 $WORK/fakescripts/plot_report.py out3" log7
# Eval lengths against the cells' validation splits, before anything trains. A char-level text's validation
# split is its last tenth (docs/data.md): 300 characters of a 3000-character file, which scores lengths up to 299.
printf '%.0s the quick brown fox jumps over the lazy dog.' $(seq 70) | head -c 3000 > short.txt
printf '%.0s pack my box with five dozen liquor jugs.' $(seq 160) | head -c 6000 > long.txt
split=$(/usr/bin/python3 -c 'import sys; print(int(len(open(sys.argv[1]).read()) * 0.1))' short.txt)
text_exp() {  # text_exp FILE LENGTHS GRID: rope cells trained for 2 steps on text, evaluated at LENGTHS
  printf '{"base": "base.json", "set": {"data.kind": "text", "data.path": "short.txt", "model.pos_encoding.kind": "rope", "train.max_iters": 2, "eval.lengths": %s}, "grid": %s}\n' "$2" "$3" > "$1"
}
text_exp past.json "[8, $split]" '{"seed": [1, 2]}'
expect_fail 2 "eval.lengths: $split tokens is past the validation split of every cell ($split tokens, which scores lengths up to $((split - 1)))" -- \
  "$POSLAB" compare -c past.json --out out-past --no-plots
check "...refused before anything is written" test ! -e out-past
# Past one cell's split only: said once (also where the command restarts itself to train, OMP_WAIT_POLICY unset),
# and that cell reports the length n/a while the other scores it.
text_exp some.json "[8, $((split - 1)), $split]" '{"data.path": ["short.txt", "long.txt"]}'
env -u OMP_WAIT_POLICY "$POSLAB" compare -c some.json --out out-some --no-plots > some.log 2>&1
check "a length past one cell's split: compare runs (exit $?)" test -f out-some/results.json
check "...saying so once, naming the cell" test "$(grep -c "eval.lengths $split: past the validation split of 1 of the 2 cells that evaluate it (e.g. path=short.txt: $split tokens): n/a there" some.log)" -eq 1
check "...which reports it n/a, at the length below a number, and the other cell both" /usr/bin/python3 - out-some "$split" <<'PY'
import json, sys
out, split = sys.argv[1], int(sys.argv[2])
def at(cell):
    return {r["length"]: r for r in json.load(open(f"{out}/cells/{cell}/eval.json"))["results"]}
short, long_ = at("path=short.txt"), at("path=long.txt")
assert short[split]["status"].startswith(f"n/a: validation split has {split} tokens"), short[split]
assert short[split - 1]["status"] == "ok" and short[split - 1]["loss"] > 0, short[split - 1]
assert all(long_[L]["status"] == "ok" for L in (8, split - 1, split)), long_
PY
# The image a command restarts itself into keeps quiet only up to where the first one restarted: eval's log of
# each length (after its restart point, OpenBLAS's kernels) is still printed there.
POSLAB_RESTARTED_IMAGE=1 "$POSLAB" eval --run out-some/cells/path=long.txt --lengths 8 --tag restarted > restarted.log 2>&1
check "an eval in a restarted image still logs its lengths" grep -qE "eval length +8: loss [0-9.]+" restarted.log
POSLAB_RESTARTED_IMAGE=1 OMP_WAIT_POLICY=PASSIVE "$POSLAB" compare -c some.json --out out-some --no-plots > restarted-compare.log 2>&1
check "...and a compare there says neither its checks' warning again nor less after it" \
  bash -c '! grep -q "past the validation split" restarted-compare.log && grep -q "experiment some: 2 cells -> out-some" restarted-compare.log'

finish
