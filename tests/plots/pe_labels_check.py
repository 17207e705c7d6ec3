"""Readability of the encodings' extra panels (`poslab pe --plot`):
- t5's buckets and fire's fire_input are labelled query position / key position (not row / column), with the
  future keys (above the diagonal) masked, not drawn as bucket 0; xpos's scale is position against dim pair;
  index axes get integer ticks;
- fire and kerple drawn with --param say the parameters shown, not "shown at initialisation".
Fixtures: tests/plots/data/pe-*.json, written by `poslab pe --plot-data` (see fixtures.sh)."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figtext  # noqa: E402
from plots import encodings  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def draw(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        data = json.load(f)
    [(_, ps, texts)] = figtext.drawn(encodings.plot_pe, data)
    return ps, texts


GENERIC = {"row", "column", "index"}


def integral(ticks):
    return all(abs(t - round(t)) < 1e-9 for t in ticks)


# Query x key panels: named axes, the future masked (blank), the past drawn.
for name, key in (("pe-t5.json", "buckets"), ("pe-fire.json", "fire_input")):
    ps, _ = draw(name)
    p = figtext.find(ps, key)
    check(p.xlabel.startswith("key position") and p.ylabel.startswith("query position"),
          "%s: %s axes are %r / %r, not key position / query position" % (name, key, p.xlabel, p.ylabel))
    m = np.ma.getmaskarray(p.image)
    n = m.shape[0]
    upper, lower = np.triu(np.ones((n, n), bool), 1), np.tril(np.ones((n, n), bool))
    check(m[upper].all(), "%s: %s draws keys after the query (as %s) instead of masking them"
          % (name, key, np.unique(np.asarray(p.image)[upper & ~m])))
    check(not m[lower].any(), "%s: %s masks keys at or before the query" % (name, key))
    check(integral(p.visible_xticks()) and integral(p.visible_yticks()), "%s: %s has fractional ticks" % (name, key))

# xpos's scales: position against dim pair; zeta against dim pair.
ps, _ = draw("pe-xpos.json")
p = figtext.find(ps, "scale (")
check(p.ylabel == "position p" and p.xlabel.startswith("pair i"),
      "xpos scale axes are %r / %r, not pair i / position p" % (p.xlabel, p.ylabel))
check(integral(p.visible_xticks()), "xpos scale: fractional pair ticks %r" % p.visible_xticks())
z = figtext.find(ps, "zeta")
check(z.xlabel.startswith("pair i"), "xpos zeta x axis is %r" % z.xlabel)
check(integral(z.visible_xticks()), "xpos zeta: fractional pair ticks %r" % z.visible_xticks())
for name in ("pe-t5.json", "pe-fire.json", "pe-xpos.json", "pe-kerple-param.json"):
    ps, _ = draw(name)
    generic = [(p.title, p.xlabel, p.ylabel) for p in ps if {p.xlabel, p.ylabel} & GENERIC]
    check(not generic, "%s: panels with generic axis labels: %r" % (name, generic))

# --param: the notes say what is shown.
for name, shown in (("pe-fire-param.json", ["L=16", "c=2"]), ("pe-kerple-param.json", ["r1=1", "r2=2"])):
    ps, texts = draw(name)
    notes = [t for t in texts if "learned" in t]
    check(notes, "%s: no note on the learned parameters: %r" % (name, texts))
    for t in notes:
        check("shown at initialisation" not in t, "%s drawn with --param says: %r" % (name, t))
        check(all(s in t for s in shown), "%s: note %r does not name %s" % (name, t, ", ".join(shown)))
ps, texts = draw("pe-fire.json")  # no --param: the initialisation is what is shown
check(any("learned parameters: shown at initialisation" in t for t in texts), "fire without --param: %r" % texts)

if failures:
    print("\n".join(failures))
    sys.exit(1)
