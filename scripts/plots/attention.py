"""`poslab attention` pictures: what a trained run's attention does in and past its training length.

  plot_stats         mean distance, entropy, normalised entropy, first-token share against length,
                     one line per (layer, head)
  plot_maps          one example's attention maps per layer and head, at the training length beside 4x
  plot_compare       compare's report: the same statistics per encoding (mean over layers and heads)
                     and each cell's maps at its longest length

Input: attention.json as `poslab attention` writes it (see src/eval/attention_stats.h).
"""

import json
import os

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from plots import style

STATS = [  # key, axis label, title
    ("distance", "mean attention distance (tokens)", "how far attention reaches: Σ_j p_ij·|i − j|"),
    ("entropy", "entropy (nats)", "attention entropy"),
    ("entropy_norm", "entropy / log(i + 1)", "normalised entropy (1 = uniform over visible keys)"),
    ("first_share", "attention on token 0", "share of attention on the first token"),
]


def stat_axis(ax, key):
    """Fractions on their whole range (so "near 1" reads as such), other statistics from zero."""
    ax.ticklabel_format(axis="y", useOffset=False)
    if key in ("entropy_norm", "first_share"):
        ax.set_ylim(-0.02, 1.05)
    else:
        ax.set_ylim(bottom=0)


def ok_entries(data):
    return [r for r in data.get("lengths", []) if r.get("status") == "ok"]


def na_note(data):
    bad = [r for r in data.get("lengths", []) if r.get("status") != "ok"]
    if not bad:
        return ""
    return "; n/a at %s (%s)" % (", ".join("%g" % r["length"] for r in bad), bad[0].get("status", "")[5:] or "n/a")


def run_label(data):
    return "%s on %s, trained at %s %s" % (data.get("encoding", "?"), data.get("data", "?"),
                                          style.fmt_g(data.get("train_length")), data.get("length_unit", "tokens"))


def sequences_note(rows, unit):
    """'8 validation sequences', or '8 validation sequences (2 at 8000 tokens)' where a length's split held fewer:
    the counts attention.json records per length, not the count requested."""
    counts = [(r.get("sequences"), r["length"]) for r in rows if style.finite(r.get("sequences"))]
    if not counts:
        return "the validation sequences"
    most = max(c for c, _ in counts)
    fewer = {}
    for c, length in counts:
        if c != most:
            fewer.setdefault(c, []).append("%g" % length)
    text = "%d validation sequence%s" % (most, "" if most == 1 else "s")
    if fewer:
        text += " (%s)" % ", ".join("%d at %s %s" % (c, " and ".join(ls), unit) for c, ls in fewer.items())
    return text


def uniform_reference(key, tokens):
    """What uniform causal attention over T tokens gives, for a dashed reference line (None: no line)."""
    T = np.asarray(tokens, dtype=float)
    if key == "distance":
        return (T - 1) / 4  # mean over queries i of i/2
    if key == "entropy_norm":
        return np.ones_like(T)
    if key == "first_share":  # mean over i >= 1 of 1/(i+1)
        return np.array([np.mean(1.0 / np.arange(2, t + 1)) if t > 1 else 1.0 for t in T])
    return None


def plot_stats(data, path):
    rows = ok_entries(data)
    L, H = data.get("n_layer", 0), data.get("n_head", 0)
    fig, axes = plt.subplots(2, 2, figsize=(14, 9.5))
    lengths = [r["length"] for r in data.get("lengths", [])]
    head_colors = plt.get_cmap("tab10")
    for ax, (key, ylabel, title) in zip(axes.flat, STATS):
        if rows:
            x = np.array([r["length"] for r in rows], dtype=float)
            vals = np.array([style.array(r[key]) for r in rows])  # (n_lengths, L, H)
            for l in range(vals.shape[1]):
                for h in range(vals.shape[2]):
                    ax.plot(x, vals[:, l, h], color=head_colors(h % 10), linestyle=style.LINESTYLES[l % 4],
                            marker=style.MARKERS[l % len(style.MARKERS)], markersize=4, linewidth=1.5)
            ref = uniform_reference(key, [r["tokens"] for r in rows])
            if ref is not None:
                ax.plot(x, ref, color="0.3", linestyle=(0, (1, 2)), linewidth=2, label="uniform over visible keys")
                ax.legend(fontsize=8, loc="best")
        else:
            style.no_data(ax, "no length could be evaluated")
        style.length_axis(ax, lengths or [1], data.get("train_length"), data.get("length_unit", "tokens"))
        for r in data.get("lengths", []):
            if r.get("status") != "ok":  # lengths the encoding cannot represent, as in `poslab eval`
                ax.annotate("n/a", xy=(r["length"], 0.03), xycoords=("data", "axes fraction"), ha="center",
                            fontsize=9, color="0.35")
        stat_axis(ax, key)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=11, pad=16)
        ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=head_colors(h % 10), linewidth=2, label="head %d" % h) for h in range(H)]
    handles += [Line2D([], [], color="0.3", linestyle=style.LINESTYLES[l % 4], marker=style.MARKERS[l % 12],
                       label="layer %d" % l) for l in range(L)]
    leg = fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.93), frameon=False,
                     title="colour: head\nline: layer")
    title = fig.suptitle("attention statistics: %s\n(mean over %s and all queries%s)"
                         % (run_label(data), sequences_note(rows, data.get("length_unit", "tokens")), na_note(data)),
                         fontsize=13)
    fig.tight_layout()
    style.save(fig, path, [leg, title])


def pick_map_lengths(data):
    """The training length and 4x it when both were evaluated, else the shortest and the longest."""
    rows = [r for r in ok_entries(data) if r.get("maps")]
    if not rows:
        return []
    by_len = {r["length"]: r for r in rows}
    tl = data.get("train_length")
    if tl in by_len and 4 * tl in by_len:
        return [by_len[tl], by_len[4 * tl]]
    rows.sort(key=lambda r: r["length"])
    return [rows[0]] if len(rows) == 1 else [rows[0], rows[-1]]


def map_value_label(blocks, log="log scale"):
    """The colour bar's label for maps pooled in these blocks: a pooled cell is the attention of a block's queries
    (their mean) on a block of keys (the sum of its probabilities), no longer one probability."""
    pooled = sorted(set(b for b in blocks if b > 1))
    if not pooled:
        return "attention probability (%s; grey: future)" % log
    if len(pooled) == len(set(blocks)):
        what = "attention summed over a block of %s keys" % " or ".join("%d" % b for b in pooled)
    else:
        what = "attention probability, or where pooled\nits sum over a block of keys"
    return "%s\n(%s; grey: future)" % (what, log)


def map_axes(ax):
    """Positions are whole numbers: integer ticks even on a map of a few tokens."""
    ax.xaxis.set_major_locator(MaxNLocator("auto", integer=True))
    ax.yaxis.set_major_locator(MaxNLocator("auto", integer=True))
    ax.tick_params(labelsize=7)


def causal_map(m, block, tokens):
    """A pooled map with the blocks entirely in the future masked (nan) for display."""
    m = np.array(m, dtype=float)
    n = m.shape[0]
    q = np.arange(n)[:, None] * block          # first query of a row block
    k = np.arange(n)[None, :] * block          # first key of a column block
    return np.where(k <= q + block - 1, m, np.nan)


def map_extent(m, block):
    """Cell j covers positions j·block .. j·block + block − 1: with half a position on each side, a tick at
    position p sits on the middle of its (unpooled) cell."""
    return (-0.5, m.shape[1] * block - 0.5, m.shape[0] * block - 0.5, -0.5)


def plot_maps(data, path):
    picks = pick_map_lengths(data)
    L, H = data.get("n_layer", 1), data.get("n_head", 1)
    if not picks:
        fig, ax = plt.subplots(figsize=(8, 4))
        style.no_data(ax, "no attention maps (no length could be evaluated)")
        ax.axis("off")
        style.save(fig, path)
        return
    tl = data.get("train_length")
    fig = plt.figure(figsize=(2.6 * H * len(picks) + 1.5, 2.5 * L + 1.6))
    subfigs = np.atleast_1d(fig.subfigures(1, len(picks), wspace=0.04))
    im = None
    for sub, r in zip(subfigs, picks):
        axes = np.array(sub.subplots(L, H, squeeze=False))
        sub.subplots_adjust(left=0.07, right=0.97, wspace=0.3)  # the two lengths close together
        T, block = r["tokens"], r.get("map_block", 1)
        for l in range(L):
            for h in range(H):
                ax = axes[l, h]
                m = causal_map(r["maps"][l][h], block, T)
                im = style.heatmap(ax, m, "layer %d, head %d" % (l, h), "key" if l == L - 1 else "",
                                   "query" if h == 0 else "", "", cmap=style.SEQUENTIAL, log=True, vmin=1e-4,
                                   vmax=1.0, extent=map_extent(m, block), colorbar=False)
                map_axes(ax)
        ratio = " (%gx)" % (r["length"] / tl) if style.finite(tl) and tl else ""
        pooled = "" if block == 1 else ", pooled in blocks of %d" % block
        sub.suptitle("length %g %s%s: %d tokens%s" % (r["length"], data.get("length_unit", "tokens"), ratio, T, pooled),
                     fontsize=11)
    cb = subfigs[-1].colorbar(im, ax=subfigs[-1].get_axes(), fraction=0.03, pad=0.02)
    cb.set_label(map_value_label([r.get("map_block", 1) for r in picks]))
    fig.suptitle("attention maps of validation sequence %s: %s" % (picks[0].get("example", 0), run_label(data)),
                 fontsize=13, y=1.04)
    style.save(fig, path)


# ----------------------------------------------------------------------------------------------
# compare


def load_cell_attention(results_dir, res):
    """[(group, cell name, attention.json)] for every cell that has one."""
    out = []
    for cell in res.get("cells", []):
        d = cell.get("dir") or os.path.join("cells", cell["name"])
        d = d if os.path.isabs(d) else os.path.join(results_dir, d)
        p = os.path.join(d, "attention.json")
        if os.path.isfile(p):
            try:
                with open(p, encoding="utf-8") as f:
                    out.append((str(cell.get("group")), cell["name"], json.load(f)))
            except (OSError, ValueError) as e:
                style_warn("cell %s: cannot use %s: %s" % (cell["name"], p, e))
    return out


def style_warn(msg):
    import sys
    sys.stderr.write("plots: warning: %s\n" % msg)


def plot_compare(cells, groups, colors, path, title):
    """Per encoding: distance, normalised entropy and first-token share against length (mean over layers,
    heads and seeds; band: range over heads), and each group's first cell's maps at its longest length."""
    if not cells:
        return False
    by_group = {}
    for g, name, data in cells:
        by_group.setdefault(g, []).append((name, data))
    groups = [g for g in groups if g in by_group] + [g for g in by_group if g not in groups]
    fig = plt.figure(figsize=(17, 10.5))
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.15, 1], hspace=0.05)
    axes = top.subplots(1, 3)
    all_lengths, unit, tl = [], "tokens", None
    for ax, (key, ylabel, ttl) in zip(axes, [STATS[0], STATS[2], STATS[3]]):
        for i, g in enumerate(groups):
            per_len = {}
            for _, data in by_group[g]:
                unit, tl = data.get("length_unit", unit), data.get("train_length", tl)
                for r in ok_entries(data):
                    per_len.setdefault(r["length"], []).append(style.array(r[key]))  # (L, H)
            if not per_len:
                continue
            x = np.array(sorted(per_len), dtype=float)
            all_lengths += list(x)
            mean = np.array([np.nanmean(np.array(per_len[L])) for L in sorted(per_len)])
            heads = [np.nanmean(np.array(per_len[L]), axis=(0, 1)) for L in sorted(per_len)]  # (H,) per length
            ax.fill_between(x, [h.min() for h in heads], [h.max() for h in heads], color=colors.get(g), alpha=0.15,
                            linewidth=0)
            ax.plot(x, mean, color=colors.get(g), marker=style.MARKERS[i % 12], linewidth=1.8, label=g)
        style.length_axis(ax, all_lengths or [1], tl, unit)
        stat_axis(ax, key)
        ax.set_ylabel(ylabel)
        ax.set_title(ttl, fontsize=10, pad=16)
        ax.grid(True, alpha=0.3)
    axes[-1].legend(title="encoding (band: range over heads)", fontsize=8, loc="upper left",
                    bbox_to_anchor=(1.02, 1.0), frameon=False)
    top.suptitle("%s: attention against evaluation length (mean over layers and heads)" % title, fontsize=12)

    maps_axes = np.atleast_1d(bottom.subplots(1, max(4, len(groups))))  # at least 4 columns: square-ish maps
    for ax in maps_axes[len(groups):]:
        ax.axis("off")
    maps_axes = maps_axes[:len(groups)]
    im, blocks = None, []
    for ax, g in zip(maps_axes, groups):
        name, data = by_group[g][0]
        rows = [r for r in ok_entries(data) if r.get("maps")]
        if not rows:
            style.no_data(ax, "n/a")
            ax.set_title(g, fontsize=10)
            ax.axis("off")
            continue
        r = max(rows, key=lambda r: r["length"])
        last = np.array(r["maps"][-1], dtype=float).mean(axis=0)  # last layer, mean over heads
        block = r.get("map_block", 1)
        m = causal_map(last, block, r["tokens"])
        blocks.append(block)
        im = style.heatmap(ax, m, "%s at %g %s" % (g, r["length"], unit), "key", "query" if ax is maps_axes[0] else "",
                           "", cmap=style.SEQUENTIAL, log=True, vmin=1e-4, vmax=1.0, extent=map_extent(m, block),
                           colorbar=False)
        map_axes(ax)
    if im is not None:
        # The bar's width is a fraction of the axes it sits beside (and its length 20 widths): beside fewer maps
        # than the four columns, a larger fraction keeps the bar as wide and as long as beside a full row.
        share = max(4, len(groups)) / len(maps_axes)
        cb = bottom.colorbar(im, ax=list(maps_axes), fraction=0.012 * share, pad=0.01 * share)
        cb.set_label(map_value_label(blocks, "log"))
    bottom.suptitle("each encoding's attention map at its longest evaluated length (last layer, mean over heads, "
                    "first cell of the group)", fontsize=11)
    style.save(fig, path)
    return True
