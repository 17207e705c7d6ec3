#!/usr/bin/env bash
# `poslab probe`: bad input is refused in one line naming the flag (exit 2, nothing written); on a tiny
# text run trained with passkey documents mixed in, probe-passkey.json parses, holds every (length,
# depth) cell with Wilson bounds around its rate, marks lengths past a learned table n/a, and the
# heat map is drawn.
source "$(dirname "$0")/lib.sh"
ROOT=$PWD
cd "$WORK"
cat > text.json <<JSON
{"data": {"kind": "text", "path": "$ROOT/data/text/licenses.txt", "probes": {"passkey": {"fraction": 0.5, "digits": 2}}},
 "model": {"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 64, "pos_encoding": {"kind": "alibi"}},
 "train": {"max_iters": 4, "batch_size": 4, "precision": "fp32", "eval_interval": 4}, "eval": {"lengths": [64]}}
JSON
"$POSLAB" train -c text.json --out run >/dev/null 2>&1
check "a text run with passkey documents trains" test -s run/model.pt
check "the run records its passkey mixture" grep -q '"fraction": 0.5' run/config.json

expect_fail 2 "--task: unknown probe 'needle' (allowed: passkey, mqar)" -- "$POSLAB" probe --run run --task needle
expect_fail 2 "--depths: '1.5' is not a fraction in [0, 1]" -- "$POSLAB" probe --run run --depths 0,1.5
expect_fail 2 "--depths: '-0.1' is not a fraction in [0, 1]" -- "$POSLAB" probe --run run --depths -0.1
expect_fail 2 "--trials: must be at least 1, got 0" -- "$POSLAB" probe --run run --trials 0
expect_fail 2 "--lengths: '0' is not a positive integer" -- "$POSLAB" probe --run run --lengths 0
expect_fail 2 "--haystack: unknown 'hay' (allowed: noise, text)" -- "$POSLAB" probe --run run --haystack hay
expect_fail 2 "--threshold: must be in (0, 1)" -- "$POSLAB" probe --run run --threshold 2
# Not a number is said as one (JSON's form wrote it "null").
expect_fail 2 "--threshold: must be in (0, 1) (a lower 95% bound of exact match, which never reaches 1), got nan" -- \
  "$POSLAB" probe --run run --threshold nan
# A threshold of 1 no lower bound reaches: every effective length would be 0, whatever the model.
expect_fail 2 "--threshold: must be in (0, 1) (a lower 95% bound of exact match, which never reaches 1)" -- \
  "$POSLAB" probe --run run --threshold 1
expect_fail 2 "run nowhere: no run here" -- "$POSLAB" probe --run nowhere
# A depth listed twice would probe the same documents twice and count them twice in the effective length.
expect_fail 2 "--depths: 0.5 is listed twice" -- "$POSLAB" probe --run run --depths 0,0.5,0.5
# --digits 0 is no key length (it was taken silently as "the run's"); leaving the flag out means that.
expect_fail 2 "--digits: must be between 1 and 18 (leave it out for the run's own), got '0'" -- "$POSLAB" probe --run run --digits 0
expect_fail 2 "--depths: '0,0.5,' ends with a comma" -- "$POSLAB" probe --run run --depths 0,0.5,
# Too many documents for memory: the advice names the probe's own options (it has no --batch-size).
expect_fail 1 "ask for shorter --lengths or fewer --trials" -- "$POSLAB" probe --run run --lengths 64 --trials 2000000000 --no-plot
check "nothing written by refused probes" test ! -e run/probe-passkey.json -a ! -e run/probe-needle.json
# A task run's vocabulary has no capital letters: the template cannot be written.
printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},\n "train": {"max_iters": 2, "precision": "fp32"}}\n' > task.json
"$POSLAB" train -c task.json --out taskrun >/dev/null 2>&1
expect_fail 2 "--task passkey: the run's vocabulary cannot write the compact template" -- "$POSLAB" probe --run taskrun --no-plot
expect_fail 2 "data.probes.passkey.fraction: passkey documents mix into text corpora; data.kind is task" -- \
  "$POSLAB" train -c task.json --set data.probes.passkey=0.5 --out r2
expect_fail 2 "data.probes.passkey.digits must be between 1 and 18" -- "$POSLAB" train -c text.json --set data.probes.passkey.digits=0 --out r2
expect_fail 2 "tokens before any filler, more than a window of model.block_size+1 = 41 holds: model.block_size must be at least" -- \
  "$POSLAB" train -c text.json --set model.block_size=40 --set data.probes.passkey.digits=9 --out r2
check "refused trainings leave no run" test ! -e r2

"$POSLAB" probe --run run --lengths 64,128 --depths 0,0.5,1 --trials 7 --seed 3 --no-plot > probe.out 2>&1
# At 64 tokens the filler is shorter than its sentences: the depths collapse onto its two ends, which the probe
# says (a warning, and the depth hit beside the one asked); at 128 they do not.
check "a short filler's collapsed depths are said" grep -qE "passkey probe at 64 tokens: its [0-9]+ tokens of filler hold too few sentence boundaries for the depths asked \(0, 0.5, 1\): the needle was placed at 0, 1, 1" probe.out
check "... not at 128 tokens" bash -c '! grep -q "passkey probe at 128 tokens: its" probe.out'
check "... and the table gives the depth hit" grep -qE "^ +64 0.50 \(1.00\) " probe.out
check "probe runs" grep -q "effective length" probe.out
check "probe writes probe-passkey.json" test -s run/probe-passkey.json
check "probe-passkey.json: fields, cells and bounds" /usr/bin/python3 - run/probe-passkey.json <<'PY'
import json, math, sys
p = json.load(open(sys.argv[1]))
for k in ["task", "train_length", "threshold", "effective_length", "results", "template", "digits"]:
    assert k in p, k
assert p["task"] == "passkey" and p["train_length"] == 64 and p["template"] == "compact" and p["digits"] == 2
cells = [(r["length"], r["depth"], r["control"]) for r in p["results"]]
want = [(L, d, None) for L in (64, 128) for d in (0, 0.5, 1)]
assert all(w in cells for w in want), cells
assert (64, None, "no_needle") in cells and (128, None, "no_needle") in cells
z = 1.959963984540054
for r in p["results"]:
    assert r["trials"] == 7
    n, ph = r["trials"], r["exact"]
    c = (ph + z*z/(2*n)) / (1 + z*z/n); h = z/(1 + z*z/n) * math.sqrt(ph*(1-ph)/n + z*z/(4*n*n))
    assert abs(r["exact_low"] - max(0, c - h)) < 1e-9 and abs(r["exact_high"] - min(1, c + h)) < 1e-9, r
    assert 0 <= r["digit_accuracy"] <= 1 and r["key_logprob"] <= 0
    assert r["exact"] <= r["digit_accuracy"] + 1e-12
    # The depth the needle landed at: a fraction, on every row with a needle and on no other.
    assert ("depth_actual" in r) == (r["control"] != "no_needle"), r
    if r["control"] != "no_needle":
        assert 0 <= r["depth_actual"] <= 1, r
# At 128 tokens the filler has sentences enough: each depth is hit within a sentence of the one asked.
for r in p["results"]:
    if r["length"] == 128 and r["control"] is None:
        assert abs(r["depth_actual"] - r["depth"]) < 0.25, r
PY
# The same seed gives the same documents and scores; another seed other documents.
cp run/probe-passkey.json first.json
"$POSLAB" probe --run run --lengths 64,128 --depths 0,0.5,1 --trials 7 --seed 3 --no-plot >/dev/null 2>&1
check "deterministic from --seed" /usr/bin/python3 -c '
import json, sys
a, b = json.load(open("first.json"))["results"], json.load(open("run/probe-passkey.json"))["results"]
assert a == b' 

# A learned table cannot place position 64 of a 128-token document: n/a, not a crash.
sed 's/"alibi"/"learned"/' text.json > learned.json
"$POSLAB" train -c learned.json --out lrun >/dev/null 2>&1
# Asked for by --lengths too: n/a as eval reports it (it was refused, so the README's probe over 64-512 failed
# on the main job's learned cell).
"$POSLAB" probe --run lrun --lengths 64,128 --trials 3 --no-plot > lrun.out 2>&1
check "probe --lengths past a learned table: 128 is n/a, 64 probed (exit 0)" /usr/bin/python3 -c '
import json
rows = json.load(open("lrun/probe-passkey.json"))["results"]
assert {r["status"] for r in rows if r["length"] == 128} == {"n/a: the encoding represents 64 positions"}, rows
assert {r["status"] for r in rows if r["length"] == 64} == {"ok"}, rows'
rm lrun/probe-passkey.json
expect_fail 2 "--lengths: 40 tokens cannot be probed: the compact template with 2-digit keys needs more than 46 tokens" -- \
  "$POSLAB" probe --run lrun --lengths 40,64 --no-plot
check "a refused --lengths writes no probe file" test ! -e lrun/probe-passkey.json
# eval.key_short is checked against the lengths evaluated (--lengths), not the run's own eval.lengths ([64]).
"$POSLAB" eval --run run --lengths 64,128 --tokens 200 --set eval.key_short=100 --tag ks > ks.log 2>&1
check "eval --lengths 64,128 --set eval.key_short=100 on a run evaluated at 64 runs (got: $(tail -1 ks.log))" \
  /usr/bin/python3 -c '
import json
r = {x["length"]: x["key_tokens"] for x in json.load(open("run/eval-ks.json"))["results"]}
assert r[64] is None and r[128]["short_context"] == 100, r'
# The default short context (a quarter of the training length, 16) longer than every length evaluated: said.
"$POSLAB" eval --run run --lengths 8,16 --tokens 200 --tag kdef > kdef.log 2>&1
check "eval at lengths no longer than the default short context says key_tokens is null" \
  grep -q "key tokens: no length evaluated is longer than the short context (16 tokens" kdef.log
# Key tokens' short-context pass reads windows of eval.key_short tokens: past a learned table it is refused
# before any work (it failed after training, or after evaluating, with exit 1).
expect_fail 2 "eval.key_short must be at most model.block_size (64) with a learned table" -- \
  "$POSLAB" eval --run lrun --lengths 64,128 --tokens 200 --set eval.key_short=100
expect_fail 2 "eval.key_short must be at most model.block_size (64) with a learned table" -- \
  "$POSLAB" train -c learned.json --set 'eval.lengths=[64,128]' --set eval.key_short=100 --out kshort
check "a refused eval.key_short trains nothing" test ! -e kshort
# Without --lengths the run's own evaluation lengths are probed: those past the table are n/a, the others run.
"$POSLAB" train -c learned.json --set 'eval.lengths=[64,128]' --out lrun2 >/dev/null 2>&1
"$POSLAB" probe --run lrun2 --trials 3 --no-plot > lrun2.log 2>&1
check "probe with the run's own lengths exits 0 (got $?)" test $? -eq 0
check "... and reports the length past the table n/a, the other ok" /usr/bin/python3 -c '
import json
p = json.load(open("lrun2/probe-passkey.json"))
assert {r["length"] for r in p["results"]} == {64, 128}, p["results"]
assert all(r["status"].startswith("n/a: the encoding represents 64 positions") for r in p["results"] if r["length"] == 128)
assert all(r["status"] == "ok" for r in p["results"] if r["length"] == 64)'
# In a compare grid one probe serves every encoding: there such lengths are n/a, not errors.
printf '{"name": "l", "base": "learned.json", "set": {"train.max_iters": 2}, "grid": {"seed": [1]},\n "probes": {"passkey": {"lengths": [64, 128], "trials": 3}}}\n' > lexp.json
"$POSLAB" compare -c lexp.json --out lcmp >/dev/null 2>&1
cp lcmp/cells/seed=1/probe-passkey.json lrun/probe-passkey.json 2>/dev/null
check "learned: n/a past its table" /usr/bin/python3 -c '
import json
p = json.load(open("lrun/probe-passkey.json"))
assert all(r["status"].startswith("n/a") for r in p["results"] if r["length"] == 128)
assert all(r["status"] == "ok" for r in p["results"] if r["length"] == 64)
assert p["effective_length"] in (0, 64)'

# compare: an experiment's probes run on every cell and land beside loss in results.json and the table.
cat > exp.json <<JSON
{"name": "pk", "base": "text.json", "set": {"train.max_iters": 3, "eval.lengths": [64, 128]},
 "grid": {"model.pos_encoding.kind": ["rope", "alibi"]}, "seeds": [1, 2],
 "probes": {"passkey": {"lengths": [64, 128], "trials": 5, "depths": [0, 1]}}}
JSON
printf '{"name": "bad", "base": "text.json", "grid": {"seed": [1]}, "probes": {"passkey": {"trails": 5}}}\n' > bad1.json
printf '{"name": "bad", "base": "text.json", "grid": {"seed": [1]}, "probes": {"needle": {}}}\n' > bad2.json
printf '{"name": "bad", "base": "text.json", "grid": {"seed": [1]}, "probes": {"passkey": {"depths": [2]}}}\n' > bad3.json
printf '{"name": "bad", "base": "text.json", "grid": {"seed": [1]}, "probes": {"passkey": {"depths": [0, 0]}}}\n' > bad4.json
printf '{"name": "bad", "base": "text.json", "grid": {"seed": [1]}, "probes": {"passkey": {"lengths": [64, 64]}}}\n' > bad5.json
expect_fail 2 "probes.passkey.trails: unknown key (allowed: lengths, depths" -- "$POSLAB" compare -c bad1.json --out c1
expect_fail 2 "probes.needle: unknown probe 'needle' (allowed: passkey, mqar)" -- "$POSLAB" compare -c bad2.json --out c1
expect_fail 2 "probes.passkey.depths: each depth must be in [0, 1]" -- "$POSLAB" compare -c bad3.json --out c1
expect_fail 2 "probes.passkey.depths: 0 is listed twice" -- "$POSLAB" compare -c bad4.json --out c1
expect_fail 2 "probes.passkey.lengths: 64 is listed twice" -- "$POSLAB" compare -c bad5.json --out c1
check "refused experiments train nothing" test ! -e c1
"$POSLAB" compare -c exp.json --out cmp > cmp.out 2>&1
check "compare prints the retrieval table" grep -q "passkey retrieval: exact match by length" cmp.out
check "... its effective lengths as report.md writes them ('64 (1x)', '0 (none)'), from results.json" /usr/bin/python3 - cmp cmp.out <<'PY'
import json, os, sys
res = json.load(open(os.path.join(sys.argv[1], "results.json")))
pk = res["probes"]["passkey"]
lines = open(sys.argv[2]).read().split("passkey retrieval: exact match by length")[1].splitlines()
for g in pk["groups"]:
    eff = g["effective_length_min"]
    want = "%d (none)" % eff if eff <= 0 else "%d (%gx)" % (eff, eff / pk["train_length"])
    row = [l for l in lines if l.split() and l.split()[0] == g["group"]]
    assert row and row[0].rstrip().endswith("  " + want), (row, want)
PY
check "every cell has its probe" test -s cmp/cells/kind=rope_seed=1/probe-passkey.json -a -s cmp/cells/kind=alibi_seed=2/probe-passkey.json
check "results.json: retrieval pooled per group and length, beside loss" /usr/bin/python3 - cmp <<'PY'
import json, math, os, sys
out = sys.argv[1]
res = json.load(open(os.path.join(out, "results.json")))
pk = res["probes"]["passkey"]
z = 1.959963984540054
for g in pk["groups"]:
    kind = g["group"]
    cells = [json.load(open(os.path.join(out, "cells", "kind=%s_seed=%d" % (kind, s), "probe-passkey.json"))) for s in (1, 2)]
    assert g["effective_lengths"] == [c["effective_length"] for c in cells]
    # tokens: integers as in each cell's probe file, not 64.0
    assert all(type(e) is int for e in g["effective_lengths"] + [g["effective_length_min"]]), g
    assert g["effective_length_min"] == min(c["effective_length"] for c in cells), g
    for l in g["lengths"]:
        per_seed = []
        k = n = 0
        for c in cells:
            rs = [r for r in c["results"] if r["length"] == l["length"] and r["control"] is None]
            kk = sum(round(r["exact"] * r["trials"]) for r in rs); nn = sum(r["trials"] for r in rs)
            per_seed.append(kk / nn); k += kk; n += nn
        assert n == l["trials"] == 2 * 2 * 5, l
        assert abs(l["exact_mean"] - sum(per_seed) / 2) < 1e-12
        p = k / n; c0 = (p + z*z/(2*n)) / (1 + z*z/n); h = z/(1 + z*z/n) * math.sqrt(p*(1-p)/n + z*z/(4*n*n))
        assert abs(l["exact_low"] - max(0, c0 - h)) < 1e-9 and abs(l["exact_high"] - min(1, c0 + h)) < 1e-9
        rows = [r for r in res["rows"] if r["group"] == kind and r["length"] == l["length"]]
        if rows:
            assert rows[0]["passkey_exact_mean"] == l["exact_mean"] and "loss_mean" in rows[0]
assert sorted(r["name"] for r in pk["ranking"]) == ["alibi", "rope"]
assert all(type(r["effective_length"]) is int for r in pk["ranking"]), pk["ranking"]
assert "Retrieval (passkey" in res["what_this_shows"]
# Retrieval past the training length is judged only where it works at the training length.
at_train = max(l["exact_mean"] for g in pk["groups"] for l in g["lengths"] if l["length"] == pk["train_length"])
unlearned = "did not learn the probe's format" in res["what_this_shows"]
assert unlearned == (at_train < pk["threshold"]), (at_train, res["what_this_shows"])
assert not unlearned or "disagree" not in res["what_this_shows"]
# Where pooled retrieval fails, the seeds that did learn it (effective length >= the training length) are named.
some = {g["item"]: (sum(e >= pk["train_length"] for e in g["effective_lengths"]), len(g["effective_lengths"])) for g in pk["groups"]}
if unlearned:
    w = res["what_this_shows"]
    assert ("in every seed at this budget" in w) == any(k for k, _ in some.values()), w
    for name, (k, n) in some.items():
        assert (("%s %d of %d" % (name, k, n)) in w) == (k > 0), (name, k, n, w)
PY
# compare probes each cell on one thread beside the cells still training: the same documents and scores as
# `poslab probe` alone with the experiment's options (on all cores: log-probabilities to rounding).
cp cmp/cells/kind=alibi_seed=2/probe-passkey.json in_compare.json
"$POSLAB" probe --run cmp/cells/kind=alibi_seed=2 --lengths 64,128 --trials 5 --depths 0,1 --no-plot > /dev/null 2>&1
check "a probe inside compare scores as the probe command does" /usr/bin/python3 - in_compare.json cmp/cells/kind=alibi_seed=2/probe-passkey.json <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert len(a["results"]) == len(b["results"]) > 0 and a["effective_length"] == b["effective_length"]
for x, y in zip(a["results"], b["results"]):
    la, lb = x.pop("key_logprob"), y.pop("key_logprob")
    assert abs(la - lb) <= 1e-6 * max(1.0, abs(lb)), (la, lb)
    assert x == y, (x, y)
PY
# From here to the last --aggregate below, the runs into cmp skip the plots (~2.5 s each): what they check is
# in results.json and on the console; that last one draws the report the picture checks read.
# A finished experiment run again probes only the cells whose probe is missing, and trains nothing.
rm cmp/cells/kind=rope_seed=1/probe-passkey.json
"$POSLAB" compare -c exp.json --out cmp --no-plots > rerun.out 2>&1
check "a re-run probes the cell whose probe is missing" test -s cmp/cells/kind=rope_seed=1/probe-passkey.json
check "a re-run probes only that cell" test "$(grep -c '\[probe ' rerun.out)" -eq 1
check "a re-run trains nothing" test "$(grep -c 'finished earlier, skipped' rerun.out)" -eq 4
# Probes redefined (fewer trials) between runs into one --out: every cell is probed again under the new
# definition, not left with the old one's files.
# Depths 0, 0.5 and 1 at 64 tokens collapse onto the filler's ends in every cell: said once for the grid.
sed 's/"trials": 5/"trials": 3/; s/"depths": \[0, 1\]/"depths": [0, 0.5, 1]/' exp.json > exp_t3.json
"$POSLAB" compare -c exp_t3.json --out cmp --no-plots > retrial.out 2>&1
check "a redefined probe is said to be done again" grep -q "probes.passkey changed since the last run into cmp: done again" retrial.out
check "... on all four cells" test "$(grep -c '\[probe ' retrial.out)" -eq 4
check "the cells' collapsed depths are said once, not per cell" \
  test "$(grep -c 'passkey probe at 64 tokens: its [0-9]* tokens of filler hold too few sentence boundaries' retrial.out)" -eq 1
check "every cell's probe is the new definition's" /usr/bin/python3 -c '
import glob, json
files = glob.glob("cmp/cells/*/probe-passkey.json")
assert len(files) == 4 and all(json.load(open(f))["trials"] == 3 for f in files), files'
"$POSLAB" compare -c exp.json --out cmp --no-plots > retrial2.out 2>&1  # back to the definition the later checks use
# A cell's eval.json and probe file written over by hand with other settings (no --tag): compare does them
# again under the experiment's settings, saying so, where it aggregated them (a length missing, 2 trials).
"$POSLAB" eval --run cmp/cells/kind=rope_seed=1 --lengths 64 > /dev/null 2>&1
"$POSLAB" probe --run cmp/cells/kind=rope_seed=1 --lengths 64 --trials 2 --no-plot > /dev/null 2>&1
"$POSLAB" compare -c exp.json --out cmp --no-plots > foreign.out 2>&1
check "a cell's eval.json at other lengths is said to be evaluated again" \
  grep -q "kind=rope_seed=1/eval.json: evaluated with eval.lengths \[64\], not the experiment's \[64,128\]" foreign.out
check "... and its probe with other settings probed again" grep -qE "kind=rope_seed=1/probe-passkey.json: probed with (lengths \[64\], not \[64,128\]|trials 2, not 5)" foreign.out
check "... both now the experiment's" /usr/bin/python3 -c '
import json
e = json.load(open("cmp/cells/kind=rope_seed=1/eval.json")); p = json.load(open("cmp/cells/kind=rope_seed=1/probe-passkey.json"))
assert sorted(r["length"] for r in e["results"]) == [64, 128], e["results"]
assert p["trials"] == 5 and sorted({r["length"] for r in p["results"]}) == [64, 128], p["trials"]'
check "... and the other cells are left as they were" test "$(grep -c 'finished earlier, skipped' foreign.out)" -eq 3
# Every setting counts, not only lengths and trials: a cell probed with the experiment's lengths, trials and
# depths but another threshold, a RoPE scaling, the text haystack or no controls is probed again (a threshold
# or a scaling kept was pooled into its group, and the first cell's threshold headed results.json).
same="--lengths 64,128 --trials 5 --depths 0,1 --no-plot"
"$POSLAB" probe --run cmp/cells/kind=rope_seed=1 $same --threshold 0.5 > /dev/null 2>&1
"$POSLAB" probe --run cmp/cells/kind=rope_seed=2 $same --rope-scaling linear --factor 2 > /dev/null 2>&1
"$POSLAB" probe --run cmp/cells/kind=alibi_seed=1 $same --haystack text > /dev/null 2>&1
"$POSLAB" probe --run cmp/cells/kind=alibi_seed=2 $same --no-controls > /dev/null 2>&1
"$POSLAB" compare -c exp.json --out cmp --no-plots > foreign2.out 2>&1
check "a probe at another threshold is probed again" grep -q "kind=rope_seed=1/probe-passkey.json: probed with threshold 0.5, not 0.85" foreign2.out
check "... with a RoPE scaling" grep -q "kind=rope_seed=2/probe-passkey.json: probed with RoPE scaling linear x2.0, not none" foreign2.out
check "... on the text haystack" grep -q "kind=alibi_seed=1/probe-passkey.json: probed with haystack text, not noise" foreign2.out
check "... without its controls" grep -q "kind=alibi_seed=2/probe-passkey.json: probed with no control rows" foreign2.out
check "... each now as the experiment asks" /usr/bin/python3 -c '
import glob, json
files = glob.glob("cmp/cells/*/probe-passkey.json")
assert len(files) == 4
for f in files:
    p = json.load(open(f))
    assert (p["threshold"], p["rope_scaling"], p["haystack"]) == (0.85, "none", "noise"), (f, p["threshold"], p["rope_scaling"])
    assert {r["control"] for r in p["results"]} == {None, "no_needle"}, f'
check "... and a probe as the experiment asks is kept" test "$(grep -c 'probed with' foreign2.out)" -eq 4
# --aggregate probes nothing: a probe file written over since is left out of the results, and said so.
cp cmp/cells/kind=rope_seed=1/probe-passkey.json kept.json
"$POSLAB" probe --run cmp/cells/kind=rope_seed=1 $same --threshold 0.5 > /dev/null 2>&1
"$POSLAB" compare --aggregate cmp --no-plots > agg_foreign.out 2>&1
check "--aggregate names a probe file with other settings" grep -q "kind=rope_seed=1/probe-passkey.json: probed with threshold 0.5, not 0.85, not as the experiment asks: left out" agg_foreign.out
check "... pools only the others (rope: one seed's trials)" /usr/bin/python3 -c '
import json
pk = json.load(open("cmp/results.json"))["probes"]["passkey"]
assert pk["threshold"] == 0.85, pk["threshold"]
rope = [g for g in pk["groups"] if g["group"] == "rope"][0]
assert all(l["seeds"] == 1 and l["trials"] == 10 for l in rope["lengths"]), rope["lengths"]'
cp kept.json cmp/cells/kind=rope_seed=1/probe-passkey.json
# The same cells with retrieval made perfect at 64 tokens and absent at 128 (probe files rewritten, then
# aggregated again): the loss leader at 128 is named as disagreeing with retrieval.
/usr/bin/python3 - cmp <<'PY'
import glob, json, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "cells", "*", "probe-passkey.json")):
    p = json.load(open(f))
    for r in p["results"]:
        r["exact"] = 1.0 if r["length"] == 64 else 0.0
    json.dump(p, open(f, "w"))
PY
"$POSLAB" compare --aggregate cmp --no-plots > agg.out 2>&1
check "where retrieval works at the training length, the loss leader past it is said to disagree" /usr/bin/python3 - cmp <<'PY'
import json, os, sys
res = json.load(open(os.path.join(sys.argv[1], "results.json")))
rows = [r for r in res["rows"] if r["length"] == 128 and r["loss_mean"] is not None]
lead = min(rows, key=lambda r: r["loss_mean"])
w = res["what_this_shows"]
if lead.get("best"):
    assert "Loss and retrieval disagree: %s has the lowest loss at 128 tokens (2x), yet" % lead["group"] in w, w
else:
    assert "Loss and retrieval disagree: %s has the lowest mean loss at 128 tokens (2x; a lead within the noise" % lead["group"] in w, w
assert "did not learn the probe's format" not in w, w
PY
# The leader by a clear margin (rope's losses at 128 lowered by a nat in every seed) and by a tie (every cell's
# loss there the same but for a thousandth per seed): only the first is called the lowest loss outright.
for f in cmp/cells/*/eval.json; do cp "$f" "$f.kept"; done
for lead in clear tie; do
  /usr/bin/python3 - cmp $lead <<'PY'
import glob, json, os, re, sys
for f in glob.glob(os.path.join(sys.argv[1], "cells", "*", "eval.json")):
    e = json.load(open(f + ".kept"))
    kind, seed = re.search(r"kind=(\w+)_seed=(\d+)", f).groups()
    for r in e["results"]:
        if r["length"] == 128 and r["loss"] is not None:
            r["loss"] = (r["loss"] - 1.0 if kind == "rope" else r["loss"]) if sys.argv[2] == "clear" else 2.0 + 0.001 * int(seed)
    json.dump(e, open(f, "w"))
PY
  "$POSLAB" compare --aggregate cmp --no-plots > agg-$lead.out 2>&1
done
check "... named the lowest loss outright only where it leads beyond the noise" /usr/bin/python3 - cmp <<'PY'
import json, os, sys
w = json.load(open(os.path.join(sys.argv[1], "results.json")))["what_this_shows"]  # the tie, aggregated last
assert "has the lowest mean loss at 128 tokens (2x; a lead within the noise, a tie with another row), yet" in w, w
assert "has the lowest loss at" not in w, w
PY
check "... and the clear lead so named" grep -q "Loss and retrieval disagree: rope has the lowest loss at 128 tokens (2x), yet" agg-clear.out
for f in cmp/cells/*/eval.json; do mv "$f.kept" "$f"; done
"$POSLAB" compare --aggregate cmp --no-plots > /dev/null 2>&1
# Nothing retrieved past the training length, and each group at its own level at it: the ranking then
# follows exact match at the training length (computed here from the probe files).
/usr/bin/python3 - cmp <<'PY'
import glob, json, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "cells", "*", "probe-passkey.json")):
    p = json.load(open(f))
    level = 0.8 if "kind=alibi" in f else 0.4  # whole trials: 4 and 2 of 5
    for r in p["results"]:
        r["exact"] = level if r["length"] == 64 else 0.0
    json.dump(p, open(f, "w"))
PY
"$POSLAB" compare --aggregate cmp --no-plots > agg2.out 2>&1
check "with nothing retrieved past the training length, the ranking follows exact match at it" /usr/bin/python3 - cmp <<'PY'
import json, os, sys
out = sys.argv[1]
res = json.load(open(os.path.join(out, "results.json")))
at = {}
for kind in ("rope", "alibi"):
    xs = []
    for s in (1, 2):
        p = json.load(open(os.path.join(out, "cells", "kind=%s_seed=%d" % (kind, s), "probe-passkey.json")))
        rs = [r for r in p["results"] if r["length"] == 64 and r["control"] is None]
        xs.append(sum(r["exact"] * r["trials"] for r in rs) / sum(r["trials"] for r in rs))
    at[kind] = sum(xs) / len(xs)
want = sorted(at, key=lambda k: -at[k])
got = [r["name"] for r in res["probes"]["passkey"]["ranking"]]
assert got == want == ["alibi", "rope"], (got, at)
assert all(abs(r["exact_at_train"] - at[r["name"]]) < 1e-9 for r in res["probes"]["passkey"]["ranking"])
PY
# A group probed at no length past training (as a learned table is n/a there) ranks after those probed there,
# though it leads at the training length, and has no exact match past it in the file (null, not 0).
/usr/bin/python3 - cmp <<'PY'
import glob, json, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "cells", "kind=alibi_*", "probe-passkey.json")):
    p = json.load(open(f))
    for r in p["results"]:
        if r["length"] > 64:
            r.update({"status": "n/a: the encoding represents 64 positions", "exact": None, "trials": 0})
    json.dump(p, open(f, "w"))
PY
"$POSLAB" compare --aggregate cmp --no-plots > agg3.out 2>&1
check "a group with no probe past training ranks after those probed there" /usr/bin/python3 - cmp <<'PY'
import json, os, sys
rk = json.load(open(os.path.join(sys.argv[1], "results.json")))["probes"]["passkey"]["ranking"]
assert [r["name"] for r in rk] == ["rope", "alibi"], rk
assert rk[1]["exact_past_train"] is None and rk[0]["exact_past_train"] == 0.0, rk
PY
/usr/bin/python3 - cmp <<'PY'  # as they were, for what follows
import glob, json, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "cells", "kind=alibi_*", "probe-passkey.json")):
    p = json.load(open(f))
    for r in p["results"]:
        if r["length"] > 64:
            r.update({"status": "ok", "exact": 0.0, "trials": 5})
    json.dump(p, open(f, "w"))
PY

# One seed learned the format, the rest did not: pooled it fails, and the text names that seed's group.
/usr/bin/python3 - cmp <<'PY'
import glob, json, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "cells", "*", "probe-passkey.json")):
    p = json.load(open(f))
    learned = "kind=alibi_seed=1" in f
    for r in p["results"]:
        r["exact"] = (1.0 if learned else 0.2) if r["length"] == 64 else 0.0
    p["effective_length"] = 64 if learned else 0
    json.dump(p, open(f, "w"))
PY
"$POSLAB" compare --aggregate cmp > agg3.out 2>&1
check "where retrieval formed in some seeds only, the report says which" /usr/bin/python3 - cmp <<'PY'
import json, os, sys
w = json.load(open(os.path.join(sys.argv[1], "results.json")))["what_this_shows"]
assert "did not learn the probe's format in every seed at this budget" in w, w
assert "effective length of at least 1x: alibi 1 of 2)" in w, w
assert "rope 0 of" not in w and "rope 1 of" not in w, w
PY

# A character vocabulary that cannot write the probe's documents (no '?', trained without passkey documents):
# compare refuses before any cell trains (it trained every cell, then every probe failed).
tr -d '?' < "$ROOT/data/text/licenses.txt" > noq.txt
cat > noq.json <<JSON
{"name": "noq", "base": "text.json", "set": {"data.path": "noq.txt", "data.probes.passkey.fraction": 0},
 "grid": {"model.pos_encoding.kind": ["rope"]}, "probes": {"passkey": {"lengths": [64], "trials": 2}}}
JSON
expect_fail 2 "cell kind=rope: probes.passkey: the run's vocabulary cannot write the compact template" -- "$POSLAB" compare -c noq.json --out noq
check "... before any cell trained" test ! -e noq

# With an eval grid, each trained cell's probe stands beside the rows of the variants that evaluate it as the
# probe decoded it (no RoPE scaling of their own), not beside a scaled variant's, and the report finds it; the
# retrieval table and ranking show each probe once, though two variants (none, stride) stand beside it.
cat > egrid.json <<JSON
{"name": "eg", "base": "text.json", "set": {"train.max_iters": 2, "eval.lengths": [64, 128], "eval.tokens": 256},
 "grid": {"model.pos_encoding.kind": ["rope", "xpos"]},
 "eval_grid": {"none": {}, "yarn": {"eval.rope_scaling": {"kind": "yarn", "factor": 2}}, "stride": {"eval.stride": 32}},
 "probes": {"passkey": {"lengths": [64, 128], "trials": 3, "depths": [0]}}}
JSON
"$POSLAB" compare -c egrid.json --out egrid > egrid.out 2>&1
check "eval grid: the probe's columns fill the rows of the unscaled variant only" /usr/bin/python3 - egrid <<'PY'
import csv, json, os, sys
out = sys.argv[1]
res = json.load(open(os.path.join(out, "results.json")))
groups = {g["group"]: g for g in res["probes"]["passkey"]["groups"]}
assert sorted(groups) == ["rope, eval=none", "xpos, eval=none"], sorted(groups)
assert [groups[g]["item"] for g in sorted(groups)] == ["rope", "xpos"]
assert sorted(r["name"] for r in res["probes"]["passkey"]["ranking"]) == ["rope", "xpos"], res["probes"]["passkey"]["ranking"]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"), newline="")))
assert len(rows) == 12
for r in rows:
    if r["group"].endswith("eval=none") or r["group"].endswith("eval=stride"):
        probed = r["group"].replace("eval=stride", "eval=none")
        l = next(x for x in groups[probed]["lengths"] if x["length"] == int(r["length"]))
        assert r["passkey_exact_mean"] != "" and float(r["passkey_exact_mean"]) == l["exact_mean"], r
        assert r["passkey_effective_length_mean"] != "", r
    else:
        assert r["passkey_exact_mean"] == "" and r["passkey_effective_length_mean"] == "", r
PY
if /usr/bin/python3 -c 'import matplotlib, numpy' 2>/dev/null; then
  check "eval grid: the report's retrieval table has the probed rows" grep -q "^| rope, eval=none | 0" egrid/report.md
fi

# A run whose config evaluates with a RoPE scaling is probed with it too, as eval evaluates it, and the
# file says so: the same weights (eval.rope_scaling does not change training) give other key log-probs.
"$POSLAB" train -c text.json --set model.pos_encoding.kind=rope --out rplain >/dev/null 2>&1
"$POSLAB" train -c text.json --set model.pos_encoding.kind=rope --set eval.rope_scaling.kind=yarn \
  --set eval.rope_scaling.factor=4 --out ryarn >/dev/null 2>&1
check "eval.rope_scaling trains the same weights" cmp -s rplain/model.pt ryarn/model.pt
for r in rplain ryarn; do "$POSLAB" probe --run $r --lengths 64,128 --trials 3 --depths 0 --no-plot > $r.out 2>&1; done
check "the probe of a run with eval.rope_scaling runs with it, and records it" /usr/bin/python3 - <<'PY'
import json
plain, yarn = (json.load(open(r + "/probe-passkey.json")) for r in ("rplain", "ryarn"))
assert plain["rope_scaling"] == "none", plain["rope_scaling"]
assert yarn["rope_scaling"] == {"kind": "yarn", "factor": 4.0, "original_length": 64}, yarn["rope_scaling"]
lp = lambda p: [r["key_logprob"] for r in p["results"] if r["status"] == "ok"]
assert len(lp(plain)) == len(lp(yarn)) > 0 and lp(plain) != lp(yarn), (lp(plain), lp(yarn))
PY
check "...and its table says so" grep -q "yarn RoPE scaling x4" ryarn.out
# attention draws the model eval and probe score: with the run's eval.rope_scaling, recorded.
for r in rplain ryarn; do "$POSLAB" attention --run $r --lengths 128 --no-plot > /dev/null 2>&1; done
check "attention of a run with eval.rope_scaling is drawn with it, and records it" /usr/bin/python3 - <<'PY'
import json
plain, yarn = (json.load(open(r + "/attention.json")) for r in ("rplain", "ryarn"))
assert plain["rope_scaling"] == "none", plain["rope_scaling"]
assert yarn["rope_scaling"] == {"kind": "yarn", "factor": 4.0, "original_length": 64}, yarn["rope_scaling"]
d = lambda a: [l["distance"] for l in a["lengths"] if l["status"] == "ok"]
assert len(d(plain)) == 1 and d(plain) != d(yarn), (d(plain), d(yarn))
PY
# --rope-scaling asks for one on the command line: the plain run probed with yarn x4 is the run whose config has it.
"$POSLAB" probe --run rplain --lengths 64,128 --trials 3 --depths 0 --no-plot --rope-scaling yarn --factor 4 >/dev/null 2>&1
check "probe --rope-scaling yarn --factor 4 gives what eval.rope_scaling gives" /usr/bin/python3 - <<'PY'
import json
a, b = (json.load(open(r + "/probe-passkey.json")) for r in ("rplain", "ryarn"))
assert a["rope_scaling"] == b["rope_scaling"] and a["results"] == b["results"], (a["rope_scaling"], b["rope_scaling"])
PY
expect_fail 2 "probe: --rope-scaling yarn needs --factor S (above 1)" -- "$POSLAB" probe --run rplain --rope-scaling yarn
# An original length past the run's training length (64) is allowed, and said: the scaling stretches from
# positions the model never saw.
"$POSLAB" eval --run rplain --lengths 64 --rope-scaling yarn --factor 4 --original-length 1000 --tag far > far.log 2>&1
check "eval --original-length past the training length: evaluated (exit $?), with a warning naming both lengths" \
  grep -q "RoPE scaling: original length 1000 is past the run's training length of 64 tokens" far.log
"$POSLAB" eval --run rplain --lengths 64 --rope-scaling yarn --factor 4 --tag near > near.log 2>&1
check "... and none at the training length" bash -c '! grep -q "original length" near.log'
expect_fail 2 "probe: --factor and --original-length need --rope-scaling KIND" -- "$POSLAB" probe --run rplain --factor 2
expect_fail 2 "not to 'alibi', which has no rotary frequencies" -- "$POSLAB" probe --run run --rope-scaling yarn --factor 2 --lengths 64
# In a grid whose cells evaluate with a scaling of their own, the probe (run with it) stands beside the
# variant that keeps it, not beside the one that turns it off.
cat > egrid2.json <<JSON
{"name": "eg2", "base": "text.json", "set": {"train.max_iters": 2, "eval.lengths": [64, 128], "eval.tokens": 256,
 "eval.rope_scaling": {"kind": "yarn", "factor": 2}},
 "grid": {"model.pos_encoding.kind": ["rope"]},
 "eval_grid": {"own": {}, "off": {"eval.rope_scaling.kind": "none"}},
 "probes": {"passkey": {"lengths": [64, 128], "trials": 3, "depths": [0]}}}
JSON
"$POSLAB" compare -c egrid2.json --out egrid2 --no-plots > egrid2.out 2>&1
check "a cell's own eval.rope_scaling: the probe stands beside the variant that keeps it" /usr/bin/python3 - egrid2 <<'PY'
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"), newline="")))
assert sorted(r["group"] for r in rows) == ["off", "off", "own", "own"], [r["group"] for r in rows]
for r in rows:
    assert (r["passkey_exact_mean"] != "") == (r["group"] == "own"), r
probe = json.load(open(os.path.join(out, "cells", "kind=rope", "probe-passkey.json")))
assert probe["rope_scaling"]["kind"] == "yarn", probe["rope_scaling"]
# One trained group: the variant alone names a row, and the header key is the evaluation, not "kind, eval".
assert json.load(open(os.path.join(out, "results.json")))["group_keys"] == ["eval"]
PY
# Where every variant scales RoPE and the model was trained without, no row is evaluated as the probe decoded
# it: the probe still stands, as the group "as trained", in results.json and the report's retrieval table.
cat > egrid3.json <<JSON
{"name": "eg3", "base": "text.json", "set": {"train.max_iters": 2, "eval.lengths": [64, 128], "eval.tokens": 256},
 "grid": {"model.pos_encoding.kind": ["rope"], "seed": [1, 2]},
 "eval_grid": {"lin": {"eval.rope_scaling": {"kind": "linear", "factor": 2}}, "yarn": {"eval.rope_scaling": {"kind": "yarn", "factor": 2}}},
 "probes": {"passkey": {"lengths": [64, 128], "trials": 3, "depths": [0]}}}
JSON
"$POSLAB" compare -c egrid3.json --out egrid3 > egrid3.out 2>&1
check "every variant scaled: the probe stands as trained, beside no row" /usr/bin/python3 - egrid3 <<'PY'
import csv, json, os, sys
out = sys.argv[1]
res = json.load(open(os.path.join(out, "results.json")))
groups = res["probes"]["passkey"]["groups"]
assert [g["group"] for g in groups] == ["as trained"], groups
assert sorted(groups[0]["cells"]) == ["cells/kind=rope_seed=1", "cells/kind=rope_seed=2"], groups[0]["cells"]
assert len(groups[0]["effective_lengths"]) == 2, groups[0]
for r in csv.DictReader(open(os.path.join(out, "results.csv"), newline="")):
    assert r["group"] in ("lin", "yarn") and r["passkey_exact_mean"] == "", r
PY
check "...and the console's retrieval table shows it, headed as the loss table" \
  bash -c 'grep -q "^as trained " egrid3.out && test "$(grep -c "^evaluation " egrid3.out)" -eq 2'
if /usr/bin/python3 -c 'import matplotlib, numpy' 2>/dev/null; then
  check "...and the report's retrieval table" grep -q "^| as trained | 0" egrid3/report.md
  check "...and its heat map is drawn" test -s egrid3/retrieval_heatmaps.png
  check "one trained group: the report's header is the evaluation" grep -q "^| evaluation | 64 tokens" egrid3/report.md
  check "...in the retrieval table too" grep -q "^| evaluation | 64 tokens | 128 tokens | effective length |" egrid3/report.md
fi

if /usr/bin/python3 -c 'import matplotlib, numpy' 2>/dev/null; then
  check "the report shows retrieval beside loss" grep -q "Beside it: retrieval by length" cmp/report.html
  check "the report draws retrieval against length and the heat maps" test -s cmp/retrieval.png -a -s cmp/retrieval_heatmaps.png
  "$POSLAB" probe --run run --lengths 64,128 --trials 3 >/dev/null 2>&1
  check "probe draws the heat map" test -s run/probe-passkey.png
else
  echo "matplotlib missing: the heat map not checked"
fi

# Pictures drawn from an earlier JSON go when the JSON is rewritten without them (stand-ins here, so that
# this holds without matplotlib too).
echo stale > run/probe-passkey.png
"$POSLAB" probe --run run --lengths 64 --trials 2 --no-plot > stale.log 2>&1
check "probe --no-plot removes the heat map of the previous probe-passkey.json" test ! -e run/probe-passkey.png
check "and says so" grep -q "removed: run/probe-passkey.png (drawn from the previous run/probe-passkey.json)" stale.log
echo stale > run/attention.png; echo stale > run/attention_maps.png
"$POSLAB" attention --run run --lengths 64 --sequences 1 --no-plot > stale2.log 2>&1
check "attention --no-plot removes both pictures of the previous attention.json" \
  test ! -e run/attention.png -a ! -e run/attention_maps.png -a -s run/attention.json
check "and says so" grep -q "removed: run/attention_maps.png (drawn from the previous attention.json)" stale2.log
# Two grid keys: the retrieval ranking names each entry by its encoding and its scenario, as the loss rows do,
# so two learning rates of one encoding are two distinct entries, not one name twice.
cat > exp2k.json <<JSON
{"name": "pk2", "base": "text.json", "set": {"train.max_iters": 3, "eval.lengths": [64]},
 "grid": {"model.pos_encoding.kind": ["rope", "alibi"], "train.learning_rate": [0.001, 0.003]},
 "probes": {"passkey": {"lengths": [64], "trials": 2, "depths": [0]}}}
JSON
"$POSLAB" compare -c exp2k.json --out cmp2k --no-plots > cmp2k.out 2>&1
check "two grid keys: the retrieval ranking names encoding and scenario, each once" /usr/bin/python3 - <<'PY'
import json
res = json.load(open("cmp2k/results.json"))
names = [r["name"] for r in res["probes"]["passkey"]["ranking"]]
want = {"%s (learning_rate=%s)" % (k, lr) for k in ("rope", "alibi") for lr in ("0.001", "0.003")}
assert sorted(names) == sorted(want), names
scenarios = {r["scenario"] for r in res["rows"]}
assert scenarios == {"learning_rate=0.001", "learning_rate=0.003"}, scenarios
PY
check "... and so does the sentence beside the tables" grep -q "rope (learning_rate=0.00[13]) " cmp2k.out
finish
