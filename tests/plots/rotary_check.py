"""Rotary pictures (`poslab pe --kind rope|xpos --plot`):
- a head of 2 dims (one rotary pair) draws, for rope, xpos and yarn-scaled rope, and says it shows one pair;
- the q.k-against-distance panel names what its curve is: plain RoPE keeps "plain rotation: Σ_i 2cos(d·θ_i)",
  xpos (whose q.k includes its decay scales) is titled for the scales, yarn for its attention factor.
Fixtures: tests/plots/data/pe-*.json, written by `poslab pe --plot-data` (see fixtures.sh)."""
import json
import os
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figtext  # noqa: E402
from plots import encodings  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
ROOT_DATA = os.path.join(HERE, "..", "data", "plots")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def qk_panel(ps):
    return figtext.find(ps, "q·k with distance") if any("q·k with distance" in p.title for p in ps) \
        else figtext.find(ps, "q·k against distance")


failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


# 1. One rotary pair (head size 2): draws instead of raising IndexError, and says it is one pair.
for name in ("pe-rope-d2.json", "pe-xpos-d2.json", "pe-rope-d2-yarn.json"):
    try:
        [(fig, ps, texts)] = figtext.drawn(encodings.plot_pe, load(os.path.join(DATA, name)))
    except Exception as e:  # noqa: BLE001
        failures.append("%s: drawing raised %s: %s" % (name, type(e).__name__, e))
        continue
    titles = " | ".join(p.title for p in ps)
    check("one pair" in titles, "%s: no panel says it shows one rotary pair: %s" % (name, titles))
    angle = [p for p in ps if "mod 2π" in p.title]
    check(len(angle) == 1 and angle[0].image is None,
          "%s: one pair's angle should be a curve against position, not a one-column heat map" % name)
    qk = qk_panel(ps)
    check("Σ_i" not in qk.title, "%s: one pair has no sum over pairs: %r" % (name, qk.title))

# 3. What the q.k curve is, per encoding.
[(_, ps, _)] = figtext.drawn(encodings.plot_pe, load(os.path.join(ROOT_DATA, "pe-rope.json")))
t = qk_panel(ps).title
check("plain rotation: Σ_i 2cos(d·θ_i)" in t, "rope's q·k panel lost its title: %r" % t)

data = load(os.path.join(DATA, "pe-xpos.json"))
[(_, ps, _)] = figtext.drawn(encodings.plot_pe, data)
p = qk_panel(ps)
check("plain rotation" not in p.title, "xpos's q·k includes its scales but is titled plain rotation: %r" % p.title)
check("xPos" in p.title and "s_i(d)/s_i(0)" in p.title, "xpos's q·k panel should name its scales: %r" % p.title)
# The curve drawn is q_d . k_0 as poslab computed it (with the scales), and the plain rotation beside it.
lines = {ln.get_label(): ln.get_ydata() for ln in p.ax.get_lines()}
qk = [row[0] for row in data["qk"]]
check(any(list(y) == qk for y in lines.values()), "xpos: the q·k curve is not the JSON's qk[:, 0]")
plain = [k for k in lines if "plain rotation" in k]
check(len(plain) == 1, "xpos: no plain-rotation reference curve: %r" % list(lines))

try:
    [(_, ps, _)] = figtext.drawn(encodings.plot_pe, load(os.path.join(DATA, "pe-rope-d2-yarn.json")))
    t = qk_panel(ps).title
    check("attention factor" in t and "plain rotation" not in t, "yarn's q·k (times a²) titled %r" % t)
except Exception:  # noqa: BLE001 (a crash is reported above)
    pass

if failures:
    print("\n".join(failures))
    sys.exit(1)
