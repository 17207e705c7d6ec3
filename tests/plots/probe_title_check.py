"""A run's probe heat map shows its whole title: with few lengths the figure is narrower than the title's
two lines, and the picture must widen to hold them rather than cut them off at both sides. A probe run
with a RoPE scaling says which in its title."""
import os
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from plots import probes, style  # noqa: E402

results = [{"length": L, "depth": d, "control": None, "status": "ok", "trials": 10, "exact": 1.0 if L == 64 else 0.0}
           for L in (64, 128, 256) for d in (0.0, 0.25, 0.5, 0.75)]
probe = {"task": "passkey", "encoding": "rope", "template": "compact", "digits": 2, "train_length": 64,
         "effective_length": 64, "results": results}
with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "probe-passkey.png")
    probes.plot_probe(probe, out)
    width = matplotlib.image.imread(out).shape[1]
    assert not [f for f in os.listdir(d) if ".tmp" in f], os.listdir(d)
# The title's widest line, drawn alone at the picture's resolution.
fig = plt.figure(dpi=style.DPI)
line = "passkey probe, rope: exact match (compact template, 2-digit keys)"
text = fig.text(0, 0, line, fontsize=10)
fig.canvas.draw()
need = text.get_window_extent().width
plt.close(fig)
assert width >= need, "the heat map is %d pixels wide, its title's first line %d: the title is cut off" % (width, need)
# A probe with a RoPE scaling names it in the title (the figure's axes, caught as it is saved).
titles = []
save = style.save
probes.style.save = lambda fig, out: (titles.append(fig.axes[0].get_title()), save(fig, out))
with tempfile.TemporaryDirectory() as d:
    probes.plot_probe(dict(probe, rope_scaling={"kind": "yarn", "factor": 4.0, "original_length": 64}), os.path.join(d, "a.png"))
    probes.plot_probe(dict(probe, rope_scaling="none"), os.path.join(d, "b.png"))
assert titles[0].startswith("passkey probe, rope, yarn x4 RoPE scaling: exact match"), titles[0]
assert titles[1].startswith("passkey probe, rope: exact match"), titles[1]
# The compare report's retrieval picture names the experiment, then the probe, once each: an experiment named
# after its probe reads "mqar: retrieval against length", not "mqar: mqar retrieval".
from plots import report_probes  # noqa: E402

titles.clear()
report_probes.save = lambda fig, out: (titles.append(fig.axes[0].get_title()), plt.close(fig))
lengths = [{"length": L, "exact_mean": 0.5, "exact_low": 0.4, "exact_high": 0.6} for L in (9, 18)]
mqar = {"train_length": 9, "threshold": 0.85, "pairs": 2, "gaps": "power",
        "groups": [{"group": "rope", "lengths": lengths, "effective_length_min": 0}]}
for name in ("mqar", "recall-study"):
    report_probes.plot_retrieval({"experiment": name, "probes": {"mqar": mqar}}, ["rope"], {"rope": "C0"}, "unused.png", "mqar")
assert titles[0].startswith("mqar: retrieval against length (distance axis, 2 pairs, power gaps)"), titles[0]
assert titles[1].startswith("recall-study: mqar retrieval against length (distance axis"), titles[1]
