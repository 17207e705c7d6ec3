"""Helpers of the plot checks: draw through a module of the plots package while catching each figure as it
is saved, and read back what a reader sees (titles, axis labels, colour bar labels, tick labels, texts).

    import figtext                              # after sys.path.insert(0, SCRIPTS)
    [(fig, panels, texts)] = figtext.drawn(encodings.plot_pe, data)  # what plot_pe saved
    panels: a Panel per axes (title, labels, ticks, image); texts: suptitles and free texts
"""
import os
import tempfile

import matplotlib

matplotlib.use("Agg")
from plots import style  # noqa: E402


class Panel:
    """One axes of a saved figure, as strings and numbers (colour bars included, with .colorbar True)."""

    def __init__(self, ax):
        self.ax = ax
        self.title = ax.get_title()
        self.xlabel = ax.get_xlabel()
        self.ylabel = ax.get_ylabel()
        self.xticks = list(ax.get_xticks())
        self.yticks = list(ax.get_yticks())
        self.xticklabels = [t.get_text() for t in ax.get_xticklabels()]
        self.yticklabels = [t.get_text() for t in ax.get_yticklabels()]
        self.colorbar = hasattr(ax, "_colorbar")
        images = ax.get_images()
        self.image = images[0].get_array() if images else None  # a masked array: masked = drawn blank

    def visible_xticks(self):
        lo, hi = sorted(self.ax.get_xlim())
        return [t for t in self.xticks if lo - 1e-9 <= t <= hi + 1e-9]

    def visible_yticks(self):
        lo, hi = sorted(self.ax.get_ylim())
        return [t for t in self.yticks if lo - 1e-9 <= t <= hi + 1e-9]

    def __repr__(self):
        return "Panel(title=%r, x=%r, y=%r)" % (self.title, self.xlabel, self.ylabel)


def drawn(draw, data):
    """Calls draw(data, path) with style.save patched to keep each figure as it is saved: returns
    [(figure, panels, texts)]. The path is a file in a temp directory, removed after."""
    kept = []
    save = style.save

    def keep(fig, path, extra=()):
        fig.canvas.draw()  # lay out (tick labels exist only once drawn)
        kept.append((fig, panels(fig), texts(fig)))
        save(fig, path, extra)

    style.save = keep
    try:
        with tempfile.TemporaryDirectory() as d:
            draw(data, os.path.join(d, "out.png"))
    finally:
        style.save = save
    return kept


def panels(fig):
    return [Panel(ax) for ax in fig.axes]


def texts(fig):
    """Every free text of a figure and its subfigures: suptitles and fig.text strings."""
    out = []

    def walk(f):
        out.extend(t.get_text() for t in f.texts)  # a suptitle is one of them
        for sub in getattr(f, "subfigs", []):
            walk(sub)

    walk(fig)
    return out


def colorbar_labels(ps):
    """The label of each colour bar (on its long side)."""
    return [p.ylabel or p.xlabel for p in ps if p.colorbar]


def find(ps, title_part):
    """The panels whose title contains title_part (exactly one expected)."""
    found = [p for p in ps if title_part in p.title]
    assert len(found) == 1, "expected one panel titled ...%s...; titles: %r" % (title_part, [p.title for p in ps])
    return found[0]
