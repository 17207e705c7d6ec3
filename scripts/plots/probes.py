"""Retrieval probes: the needle-in-a-haystack heat map (depth x length, exact match) of one run (for
mqar: axis x length, distance and load), and exact match against length with Wilson 95% bands for the
compare report (mqar: the distance axis).

A dashed line marks the training length: cells right of it are past anything the model was trained on.
"""

import math

from plots import style
from plots.style import plt, np


def _row(r):
    """A cell's heat-map row: its depth (passkey) or its axis (mqar); None for a control without depth."""
    return r["depth"] if r.get("depth") is not None else r.get("axis")


def probe_grid(probe):
    """(rows, lengths, exact matrix with nan for n/a) of a probe JSON's non-control cells; rows are
    depths (passkey) or axes (mqar)."""
    cells = [r for r in probe["results"] if r.get("control") is None or r.get("depth") is not None]
    cells = [r for r in cells if r.get("control") != "adjacent"]
    lengths = sorted({r["length"] for r in cells})
    rows = {_row(r) for r in cells if _row(r) is not None}
    rows = sorted(rows, key=lambda d: ({"distance": 0, "load": 1}.get(d, 2), d) if isinstance(d, str) else (-1, d))
    grid = np.full((len(rows), len(lengths)), np.nan)
    for r in cells:
        if _row(r) is None:
            continue
        grid[rows.index(_row(r)), lengths.index(r["length"])] = style.num(r.get("exact"))
    return rows, lengths, grid


def draw_heatmap(ax, probe, title=None):
    depths, lengths, grid = probe_grid(probe)
    im = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto", origin="upper")
    ax.set_xticks(range(len(lengths)))
    ax.set_xticklabels([str(L) for L in lengths])
    ax.set_yticks(range(len(depths)))
    ax.set_yticklabels([d if isinstance(d, str) else "%d%%" % round(100 * d) for d in depths])
    ax.set_xlabel("example length (tokens)" if probe.get("task") == "mqar" else "document length (tokens)")
    ax.set_ylabel("axis" if probe.get("task") == "mqar" else "needle depth")
    for i in range(len(depths)):
        for j in range(len(lengths)):
            v = grid[i, j]
            ax.text(j, i, "n/a" if math.isnan(v) else "%.2f" % v, ha="center", va="center", fontsize=8)
    train = probe.get("train_length")
    if train:
        # Between the last length <= train and the next one: where extrapolation starts.
        inside = [j for j, L in enumerate(lengths) if L <= train]
        if inside and inside[-1] < len(lengths) - 1:
            ax.axvline(inside[-1] + 0.5, color="black", linestyle="--", linewidth=1.2)
    ax.set_title(title or "%s: exact match" % probe.get("encoding", "?"), fontsize=10)
    return im


def plot_probe(probe, out):
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * max(3, len({r["length"] for r in probe["results"]})), 3.6))
    what = ("%s pairs, %s gaps" % (probe.get("pairs"), probe.get("gaps")) if probe.get("task") == "mqar"
            else "%s template, %s-digit keys" % (probe.get("template"), probe.get("digits")))
    # A probe run with a RoPE scaling (eval.rope_scaling, probe --rope-scaling) decoded another model than the
    # encoding as trained: the title says which.
    model = probe.get("encoding")
    scaling = probe.get("rope_scaling")
    if isinstance(scaling, dict):
        model = "%s, %s x%g RoPE scaling" % (model, scaling.get("kind"), scaling.get("factor"))
    im = draw_heatmap(ax, probe, "%s probe, %s: exact match (%s)\ndashed: the training length "
                      "(%s tokens); effective length %s" % (probe.get("task"), model, what,
                                                            probe.get("train_length"), probe.get("effective_length")))
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    # Tight bounds widen the picture to its title (with few lengths the axes are narrower than it), and the
    # file is written whole or not at all.
    style.save(fig, out)


def length_curve(probe):
    """(lengths, exact, low, high) over the probe cells pooled over depths (Wilson bounds per length)."""
    by = {}
    for r in probe["results"]:
        if r.get("control") is not None and r.get("depth") is None:
            continue
        if r.get("control") == "adjacent" or r.get("status") != "ok" or r.get("axis") == "load":
            continue
        n, k = by.get(r["length"], (0, 0))
        by[r["length"]] = (n + r["trials"], k + round(r["exact"] * r["trials"]))
    lengths = sorted(by)
    exact, low, high = [], [], []
    for L in lengths:
        n, k = by[L]
        lo, hi = wilson(k, n)
        exact.append(k / n)
        low.append(lo)
        high.append(hi)
    return lengths, exact, low, high


def wilson(k, n, z=1.959963984540054):
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)
