"""Shared look of every poslab picture: colour maps, heat maps with colour bars, axes helpers, saving.

One place decides how a matrix, a length axis or a "no data" panel looks, so the encoding pictures,
the attention pictures and the compare report read the same.
"""

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

DPI = 130
DIVERGING = "RdBu_r"    # signed values centred on zero: tables, similarities, biases
SEQUENTIAL = "viridis"  # positions, probabilities
CYCLIC = "twilight"     # angles modulo 2 pi
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*", "h", "p"]
LINESTYLES = ["-", "--", ":", "-."]

# Temp files being written now: a Ctrl-C handler that leaves with os._exit (no finally runs) removes them.
PARTIAL = set()


def remove_partial():
    for tmp in list(PARTIAL):
        try:
            os.remove(tmp)
        except OSError:
            pass


def finite(v):
    """True for a real, finite JSON number (not bool, not null)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def num(v):
    """A JSON number as float; null, missing, bool or non-numeric as nan."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return float("nan")
    return float(v)


def fmt_g(v, digits=4):
    return "%.*g" % (digits, v) if finite(v) else "-"


def fmt_option(name, value):
    """base=10000 -> base=1e4; scale=0.125 -> scale=0.125; strings as they are."""
    if name == "base" and finite(value) and value >= 1000:
        return "base=1e%d" % round(math.log10(value)) if math.log10(value) == round(math.log10(value)) \
            else "base=%g" % value
    return "%s=%s" % (name, fmt_g(value) if finite(value) else value)


def array(v):
    """JSON nested lists to a float array, null -> nan."""
    return np.array([[num(x) for x in row] for row in v]) if v and isinstance(v[0], list) \
        else np.array([num(x) for x in v])


def group_colors(groups):
    """A stable colour per group (encoding) in the given order, shared by every report picture."""
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    return {g: cmap(i % cmap.N) for i, g in enumerate(groups)}


def heatmap(ax, data, title, xlabel, ylabel, cbar_label, cmap=DIVERGING, symmetric=True, extent=None,
            log=False, vmin=None, vmax=None, colorbar=True):
    """A matrix with row 0 at the top, a titled colour bar, nan cells grey (masked, e.g. the future)."""
    data = np.asarray(data, dtype=float)
    cm = plt.get_cmap(cmap).copy()
    cm.set_bad("0.85")
    ok = data[np.isfinite(data)]
    norm = None
    if log:
        lo = vmin if vmin is not None else max(1e-4, float(ok[ok > 0].min()) if (ok > 0).any() else 1e-4)
        norm = LogNorm(vmin=lo, vmax=vmax if vmax is not None else 1.0)
        data = np.where(np.isfinite(data), np.maximum(data, lo), np.nan)
    elif symmetric:
        m = float(np.abs(ok).max()) if ok.size else 1.0
        vmin, vmax = (-m, m) if m > 0 else (-1, 1)
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cm, norm=norm, vmin=None if log else vmin,
                   vmax=None if log else vmax, aspect="auto", interpolation="nearest", extent=extent)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if colorbar:
        cb = plt.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        cb.set_label(cbar_label)
    return im


def length_axis(ax, lengths, train_length, unit):
    """A log2 axis of evaluation lengths with one tick per length and the training length dashed."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(lengths))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: "%g" % x))
    ax.xaxis.set_minor_locator(NullLocator())
    span = ticks + ([train_length] if finite(train_length) and train_length > 0 else [])
    if span:
        ax.set_xlim(min(span) / 2 ** 0.35, max(span) * 2 ** 0.35)
    ax.set_xlabel("evaluation length (%s, log scale)" % unit)
    if finite(train_length) and train_length > 0:
        train_line(ax, train_length, "train length")


def train_line(ax, x, label):
    """A dashed vertical line, labelled just above the plot area so that no data hides the label."""
    ax.axvline(x, color="0.35", linestyle="--", linewidth=1.2, zorder=1)
    ax.annotate(label, xy=(x, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=9, color="0.3",
                annotation_clip=False)


def no_data(ax, text="no data"):
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=12, color="0.4",
            bbox=dict(facecolor="white", edgecolor="none"), zorder=5)


def write_text(path, text):
    """Writes a text file through a temp file beside it, then renames it: never a half-written report."""
    tmp = "%s.tmp%d" % (path, os.getpid())
    PARTIAL.add(tmp)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        PARTIAL.discard(tmp)
        if os.path.exists(tmp):
            os.remove(tmp)


def save(fig, path, extra=()):
    """Writes the figure to a temp file beside `path`, then renames it: never a half-written image."""
    root, ext = os.path.splitext(path)
    tmp = "%s.tmp%d%s" % (root, os.getpid(), ext)
    PARTIAL.add(tmp)
    try:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight", bbox_extra_artists=list(extra) or None)
        os.replace(tmp, path)
    finally:
        PARTIAL.discard(tmp)
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)
