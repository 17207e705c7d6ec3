"""`poslab attention` pictures say what they show:
- the statistics' title states the sequences actually averaged at each length (attention.json's per-length
  `sequences`), e.g. "8 validation sequences (2 at 8 items)", not one count for every length;
- the maps' axes have integer ticks (positions), even at a length of a few tokens;
- a pooled map's colour bar says each value sums a block of keys; an unpooled one says attention probability
  (in `attention` and in compare's summary), and compare's bar stays as long as half a map with one group.
Fixture: tests/data/plots/attention.json, edited here."""
import copy
import json
import os
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figtext  # noqa: E402
from plots import attention  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "data", "plots", "attention.json"), encoding="utf-8") as f:
    fixture = json.load(f)
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def uniform_maps(L, H, n):
    causal = np.tril(np.ones((n, n)))
    return (causal / causal.sum(axis=1, keepdims=True))[None, None].repeat(L, 0).repeat(H, 1).tolist()


# Sequences per length: 8 at length 4, 2 at length 8 (the split held only 2).
data = copy.deepcopy(fixture)
data["lengths"][0]["sequences"], data["lengths"][1]["sequences"] = 8, 2
[(_, _, texts)] = figtext.drawn(attention.plot_stats, data)
title = " ".join(t for t in texts if "attention statistics" in t)
check("8 validation sequences" in title and "2 at 8 items" in title,
      "the title does not state the sequences per length (8, and 2 at 8 items): %r" % title)
data["lengths"][1]["sequences"] = 8
[(_, _, texts)] = figtext.drawn(attention.plot_stats, data)
title = " ".join(t for t in texts if "attention statistics" in t)
check("mean over 8 validation sequences and all queries" in title, "equal counts: %r" % title)

# Maps at a short, unpooled length (4 tokens) beside a pooled one (17 tokens in blocks of 3).
data = copy.deepcopy(fixture)
L, H = data["n_layer"], data["n_head"]
short = data["lengths"][0]
short.update(tokens=4, map_block=1, maps=uniform_maps(L, H, 4))
[(_, ps, texts)] = figtext.drawn(attention.plot_maps, data)
maps = [p for p in ps if p.image is not None]
check(len(maps) == 2 * L * H, "expected %d maps, got %d" % (2 * L * H, len(maps)))
for p in maps:
    for axis, ticks in (("key", p.visible_xticks()), ("query", p.visible_yticks())):
        check(all(abs(t - round(t)) < 1e-9 for t in ticks), "%s: fractional %s ticks %r" % (p.title, axis, ticks))
labels = figtext.colorbar_labels(ps)
check(len(labels) == 1 and "sum" in labels[0] and "block" in labels[0],
      "pooled maps: the colour bar should say each value sums a block of keys: %r" % labels)

# Only unpooled maps: attention probability.
data["lengths"][1].update(tokens=6, map_block=1, maps=uniform_maps(L, H, 6))
[(_, ps, _)] = figtext.drawn(attention.plot_maps, data)
labels = figtext.colorbar_labels(ps)
check(len(labels) == 1 and labels[0].startswith("attention probability") and "sum" not in labels[0],
      "unpooled maps: %r" % labels)

# compare's summary: its map (the fixture cell's longest length, pooled in blocks of 3) says so too.
cells = [("learned", "learned", copy.deepcopy(fixture))]
[(_, ps, _)] = figtext.drawn(lambda d, path: attention.plot_compare(d, ["learned"], {}, path, "fixture"), cells)
labels = figtext.colorbar_labels(ps)
check(len(labels) == 1 and "sum" in labels[0] and "block" in labels[0], "compare's pooled map: %r" % labels)
for p in [p for p in ps if p.image is not None]:
    check(all(abs(t - round(t)) < 1e-9 for t in p.visible_xticks() + p.visible_yticks()),
          "compare %s: fractional ticks" % p.title)

# With one group the map stands alone in its row: its colour bar is still as long as half the map, not a stub.
bars = [p for p in ps if p.colorbar]
images = [p for p in ps if p.image is not None]
if bars and images:
    bar_h = bars[0].ax.get_position().height
    map_h = images[0].ax.get_position().height
    check(bar_h >= 0.5 * map_h, "compare, one group: the colour bar is %.0f%% of the map's height" % (100 * bar_h / map_h))
else:
    check(False, "compare, one group: no colour bar or no map")

if failures:
    print("\n".join(failures))
    sys.exit(1)
