"""The extrapolation plot's length axis holds the lengths where some encoding has a number: one where every
encoding is n/a (an evaluation length past the validation split) gets no tick, which would squeeze the others to
one side, and the title says which length was left out. The axes are caught as the figure is saved."""
import os
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
import matplotlib  # noqa: E402

matplotlib.use("Agg")
from plots import report  # noqa: E402
from plots.results import rows_by_group  # noqa: E402
from plots.style import group_colors  # noqa: E402


def row(group, length, loss):
    ok = loss is not None
    return {"group": group, "item": group, "length": length, "loss_mean": loss, "loss_ci95": None,
            "status": "ok" if ok else "n/a: validation split has 19150 tokens, fewer than %d" % (length + 1)}


def drawn(res):
    """(x ticks, suptitle) of the extrapolation plot of res."""
    caught = []
    save = report.save
    report.save = lambda fig, out, *a: (caught.append(([t for t in fig.axes[0].get_xticks()], fig._suptitle.get_text())),
                                        save(fig, out, *a))
    try:
        with tempfile.TemporaryDirectory() as d:
            groups = sorted({r["group"] for r in res["rows"]})
            report.plot_extrapolation(res, groups, group_colors(groups), rows_by_group(res), os.path.join(d, "e.png"))
    finally:
        report.save = save
    return caught[0]


res = {"experiment": "x", "metric": "loss", "train_length": 64, "length_unit": "tokens", "lengths": [64, 128, 300000],
       "rows": [row("rope", 64, 3.85), row("rope", 128, 3.84), row("rope", 300000, None),
                row("learned", 64, 3.83), row("learned", 128, None), row("learned", 300000, None)]}
ticks, title = drawn(res)
assert ticks == [64, 128], ticks
assert title.endswith("; no encoding has a number at 300000 tokens (n/a)"), title
# One encoding with a number at the far length keeps its tick, and the title says nothing was left out.
res["rows"][2] = row("rope", 300000, 3.9)
ticks, title = drawn(res)
assert ticks == [64, 128, 300000], ticks
assert "no encoding has a number" not in title, title
print("ok")
