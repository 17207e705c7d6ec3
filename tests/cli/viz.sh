#!/usr/bin/env bash
# The pictures: `pe --plot` and `attention` refuse bad input before any work (one line naming the
# path or flag, exit 2, nothing written); with matplotlib installed they draw non-empty PNGs.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
mkdir adir
expect_fail 2 "--plot /nonexistent/dir/x.png: directory /nonexistent/dir does not exist" -- \
  "$POSLAB" pe --kind sinusoidal -n 16 -d 8 --plot /nonexistent/dir/x.png
expect_fail 2 "--plot adir: is a directory" -- "$POSLAB" pe --kind sinusoidal -n 16 -d 8 --plot adir
expect_fail 2 "--plot pe.txt: the name must end in .png" -- "$POSLAB" pe --kind rope -n 16 -d 8 --plot pe.txt
expect_fail 2 "--plot-data adir: is a directory" -- "$POSLAB" pe --kind alibi -n 16 -d 8 --plot-data adir
check "nothing written by refused plots" test -z "$(ls -A adir)" -a ! -e pe.txt -a ! -e /nonexistent
expect_fail 2 "run nowhere: no run here" -- "$POSLAB" attention --run nowhere --lengths 8
expect_fail 2 "--lengths: 'abc' is not a positive integer" -- "$POSLAB" attention --run nowhere --lengths 8,abc
expect_fail 2 "--lengths: '0' is not a positive integer" -- "$POSLAB" attention --run nowhere --lengths 0
expect_fail 2 "--sequences: must be a positive integer" -- "$POSLAB" attention --run nowhere --sequences 0

# What the pictures get is chosen by family and by which options change the encoding, not by name.
"$POSLAB" pe --kind sinusoidal -n 16 -d 8 --plot-data sin.json >/dev/null 2>&1
"$POSLAB" pe --kind rope -n 16 -d 8 --heads 2 --plot-data rope.json >/dev/null 2>&1
"$POSLAB" pe --kind alibi -n 16 -d 8 --heads 4 --plot-data alibi.json >/dev/null 2>&1
check "sinusoidal: base and scale matter, a sweep over bases, a similarity matrix" \
  grep -q '"by_base":.*"options":{"base":10000.0,"scale":0.35' sin.json
check "rope: base matters, heads do not; q.k against distance" grep -q '"options":{"base":10000.0}.*"qk":' rope.json
check "alibi: heads matter, base does not" grep -q '"options":{"heads":4}' alibi.json

printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},\n "train": {"max_iters": 3, "precision": "fp32"}}\n' > ok.json
"$POSLAB" train -c ok.json --out run >/dev/null 2>&1
"$POSLAB" attention --run run --lengths 4,8,32 --sequences 2 --no-plot > attention.log 2>&1
check "attention writes attention.json" test -s run/attention.json
check "... and says its n/a lengths, as eval does" grep -qE "attention length +32 \([0-9]+ tokens\): n/a: learned table has 40 positions" attention.log
check "learned: n/a past its table, ok within it" grep -q '"status":"n/a: learned table has 40 positions"' run/attention.json
check "attention.json has the per-head statistics" grep -q '"entropy_norm":\[\[' run/attention.json

if /usr/bin/python3 -c 'import matplotlib, numpy' 2>/dev/null; then
  for kind in none index binary sinusoidal learned rope alibi xpos t5 kerple_log kerple_power sandwich fire cope; do
    "$POSLAB" pe --kind "$kind" -n 32 -d 16 --heads 4 --plot "pe-$kind.png" >/dev/null 2>&1
    check "pe --plot draws $kind" test -s "pe-$kind.png"
  done
  check "no temp file left beside the picture" test -z "$(ls | grep -E '\.pe\.json$|\.tmp[0-9]+' || true)"
  "$POSLAB" attention --run run --lengths 4,8,32 --sequences 2 >/dev/null 2>&1
  check "attention draws its statistics" test -s run/attention.png
  check "attention draws its maps" test -s run/attention_maps.png
else
  echo "matplotlib missing: pictures not checked"
fi
finish
