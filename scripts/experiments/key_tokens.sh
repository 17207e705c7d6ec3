#!/usr/bin/env bash
# Key-token loss, calibrated: evaluates trained text runs at each short context S and margin and prints
# the fraction of targets that are key tokens, their loss with the whole window and with S tokens, and
# the plain loss, per length. Usage: scripts/experiments/key_tokens.sh POSLAB RUN... (e.g. runs/quick/cells/*)
# Writes RUN/eval-key-S<S>-m<margin>.json; S and margins via KEY_SHORT="8 16 32" KEY_MARGINS="0.5 1 2".
set -euo pipefail
POSLAB=${1:?usage: key_tokens.sh POSLAB RUN...}
shift
[ $# -gt 0 ] || { echo "key_tokens.sh: give at least one run directory" >&2; exit 2; }
LENGTHS=${LENGTHS:-64,512}
for run in "$@"; do
  for s in ${KEY_SHORT:-8 16 32}; do
    for m in ${KEY_MARGINS:-0.5 1 2}; do
      "$POSLAB" eval --run "$run" --lengths "$LENGTHS" --set eval.key_short="$s" --set eval.key_margin="$m" \
        --tag "key-S$s-m$m" > /dev/null
    done
  done
done
/usr/bin/python3 - "$@" <<'PY'
import glob, json, os, sys
print("| run | S | margin | length | loss | key fraction | key loss (whole window) | key loss (S tokens) |")
print("|---|---|---|---|---|---|---|---|")
for run in sys.argv[1:]:
    name = os.path.basename(os.path.normpath(run))
    files = sorted(glob.glob(os.path.join(run, "eval-key-S*-m*.json")),
                   key=lambda f: tuple(float(x) for x in os.path.basename(f)[10:-5].split("-m")))
    for f in files:
        for r in json.load(open(f))["results"]:
            k = r.get("key_tokens")
            if r["status"] != "ok" or not k:
                continue
            fmt = lambda v: "n/a" if v is None else "%.3f" % v
            print("| %s | %d | %g | %d | %.3f | %.3f | %s | %s |" % (name, k["short_context"], k["margin"], r["length"],
                  r["loss"], k["fraction"], fmt(k["loss"]), fmt(k["short_loss"])))
PY
