"""`poslab pe --plot`: the pictures that explain a positional encoding.

The pictures are chosen by the JSON's `family` and by which keys are present, never by kind name,
so a new encoding gets its pictures as soon as `poslab pe` emits the usual keys:

  table (N, D)      additive: heat map, similarity, pairs on circles, columns as waves, norms
  by_base [...]     the table at several bases with the frequencies omega_i (when base changes it)
  angles, qk        rotary: rotation angle per pair against position, q.k against distance
  bias (H, N, N)    bias: the (query x key) bias per head and the bias against distance
"""

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from plots import style


# Keys the sections below draw (or that describe the encoding); any other array gets a generic panel.
# (`scale` and `positions` are numbers here, or arrays that get a panel: xpos's scales, randomized positions.)
KNOWN = {"kind", "family", "dim", "options", "trainable", "table", "similarity", "by_base", "angles", "qk", "bias",
         "slopes"}


def n_positions(data):
    """N: `positions` is a count, or (with --randomize) the drawn positions themselves."""
    p = data.get("positions")
    return len(p) if isinstance(p, list) else int(p)


def describe(data):
    """'sinusoidal: N=128 positions, D=64, base=1e4, scale=0.125' from the JSON's options."""
    opts = data.get("options") or {}
    parts = ["N=%d positions" % n_positions(data), "D=%d" % data["dim"] if data.get("family") == "additive"
             else "head size %d" % data["dim"]]
    parts += [style.fmt_option(k, v) for k, v in sorted(opts.items())]
    return "%s: %s" % (data.get("kind", "?"), ", ".join(parts))


# ----------------------------------------------------------------------------------------------
# Additive


def similarity_profiles(ax, sim, name, ylabel):
    """Rows of PE[p].PE[q] against the offset q - p for a few anchors p, and whether they coincide."""
    n = sim.shape[0]
    anchors = sorted(set([0, n // 4, n // 2]))
    cmap = plt.get_cmap("plasma")
    for i, p in enumerate(anchors):
        ax.plot(np.arange(n) - p, sim[p], color=cmap(i / max(1, len(anchors))), linewidth=1.5, label="p = %d" % p)
    # Compare the anchors on the offsets they share: equal rows = a function of q - p alone.
    spread = 0.0
    for k in range(0, n - anchors[-1]):
        vals = [sim[p, p + k] for p in anchors]
        spread = max(spread, max(vals) - min(vals))
    scale = max(1e-12, float(np.abs(sim).max()))
    verdict = "rows coincide: depends on q − p only" if spread <= 1e-4 * scale else \
        "rows differ: depends on p, not only on q − p"
    ax.axvline(0, color="0.5", linewidth=0.8)
    ax.set_title("%s against offset k = q − p\n(%s)" % (name, verdict), fontsize=10)
    ax.set_xlabel("offset q − p (positions)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(title="anchor", fontsize=8, loc="best")


def plot_additive(fig, data):
    table = style.array(data["table"])  # (N, D)
    n, d = table.shape
    gs = fig.add_gridspec(2, 6, hspace=0.45, wspace=1.3)
    init = "\n(initialisation: trained values live in a run's model.pt)" if data.get("trainable") else ""
    style.heatmap(fig.add_subplot(gs[0, 0:2]), table, "PE[p, i]: what is added to the token embedding" + init,
                  "dimension i", "position p", "value added", extent=(-0.5, d - 0.5, n - 0.5, -0.5))
    if "similarity" in data:
        sim = style.array(data["similarity"])
        style.heatmap(fig.add_subplot(gs[0, 2:4]), sim, "similarity PE[p] · PE[q]", "position q", "position p",
                      "dot product")
        similarity_profiles(fig.add_subplot(gs[0, 4:6]), sim, "PE[p] · PE[p + k]", "")  # named in its title

    # Pairs of dimensions as points in the plane, coloured by position: sinusoidal pairs on circles.
    pairs = min(3, d // 2)
    sc, circle_axes = None, []
    for i in range(pairs):
        ax = fig.add_subplot(gs[1, i])
        circle_axes.append(ax)
        sc = ax.scatter(table[:, 2 * i], table[:, 2 * i + 1], c=np.arange(n), cmap=style.SEQUENTIAL, s=9)
        ax.set_title("dims (%d, %d)" % (2 * i, 2 * i + 1), fontsize=10)
        ax.set_xlabel("PE[p, %d]" % (2 * i))
        ax.set_ylabel("PE[p, %d]" % (2 * i + 1))
        ax.set_aspect("equal", adjustable="datalim")
        r = float(np.abs(table[:, 2 * i:2 * i + 2]).max()) or 1.0
        ax.set_xticks([-r, 0, r])
        ax.set_yticks([-r, 0, r])
        ax.xaxis.set_major_formatter(lambda v, _: "%.2g" % v)
        ax.yaxis.set_major_formatter(lambda v, _: "%.2g" % v)
        ax.grid(True, alpha=0.3)
    if sc is not None:
        cb = fig.colorbar(sc, ax=circle_axes, fraction=0.02, pad=0.02)
        cb.set_label("position p")

    # The first columns as waves against position, stacked.
    ax = fig.add_subplot(gs[1, 3:5])
    cols = min(6, d)
    amp = max(1e-12, float(np.abs(table[:, :cols]).max()))
    for c in range(cols):
        ax.plot(np.arange(n), table[:, c] / amp + 2.4 * c, linewidth=1.3, drawstyle="steps-mid" if
                np.unique(table[:, c]).size <= 2 else "default")
    ax.set_yticks([2.4 * c for c in range(cols)])
    ax.set_yticklabels(["dim %d" % c for c in range(cols)])
    ax.set_xlabel("position p")
    ax.set_title("first %d dimensions against position\n(each scaled by %s, stacked)" % (cols, style.fmt_g(1 / amp, 3)),
                 fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)

    ax = fig.add_subplot(gs[1, 5])
    norms = np.linalg.norm(table, axis=1)
    ax.plot(np.arange(n), norms, color="C3", linewidth=1.6)
    ax.set_xlabel("position p")
    ax.set_ylabel("‖PE[p]‖")
    ax.set_title("norm against position", fontsize=10)
    ax.set_ylim(0, max(1e-12, float(norms.max())) * 1.15)
    ax.grid(True, alpha=0.3)


def plot_by_base(fig, data):
    sweep = data["by_base"]
    gs = fig.add_gridspec(1, len(sweep) + 1, wspace=0.55)
    tables = [style.array(s["table"]) for s in sweep]
    m = max(float(np.abs(t).max()) for t in tables) or 1.0
    for i, (s, t) in enumerate(zip(sweep, tables)):
        n, d = t.shape
        style.heatmap(fig.add_subplot(gs[0, i]), t, "base = %g" % s["base"], "dimension i", "position p",
                      "", vmin=-m, vmax=m, symmetric=False, extent=(-0.5, d - 0.5, n - 0.5, -0.5),
                      colorbar=(i == len(sweep) - 1))
    ax = fig.add_subplot(gs[0, len(sweep)])
    for i, s in enumerate(sweep):
        w = np.array([style.num(x) for x in s["frequencies"]])
        ax.plot(np.arange(len(w)), w, marker=style.MARKERS[i], markersize=3, linewidth=1.4,
                label="base = %g" % s["base"])
    ax.set_yscale("log")
    ax.set_xlabel("pair index i (dims 2i, 2i+1)")
    ax.set_ylabel("ω_i (radians per position)")
    ax.set_title("frequency ω_i = base^(−2i/D) of each pair", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("the same table at three bases (one colour scale): a larger base slows the later pairs",
                 fontsize=11)


# ----------------------------------------------------------------------------------------------
# Rotary


def qk_formula(data, pairs):
    """What the q·k curve is, from the keys the JSON has: a plain rotation, times per-pair scales (an (N, D/2)
    `scale`: xpos multiplies q_m by s_i(m) and k_n by 1/s_i(n)), times the square of an `attention_factor`
    (yarn multiplies cos and sin by it)."""
    one = pairs == 1
    term = "2cos(d·θ)" if one else "2cos(d·θ_i)"
    scales = isinstance(data.get("scale"), list)  # a number is an additive kind's scale, not drawn here
    if scales:
        term += "·s(d)/s(0)" if one else "·s_i(d)/s_i(0)"
    total = term if one else "Σ_i " + term
    af = data.get("attention_factor")
    what = ["xPos scales"] if scales else []
    if style.finite(af) and af != 1:
        total = "a²·" + total
        what.append("attention factor² (a = %s)" % style.fmt_g(af, 3))
    return ("rotation × %s: %s" % (" × ".join(what), total)) if what else "plain rotation: " + total


def plot_rotary(fig, data):
    n = n_positions(data)
    panels = (1 if "angles" in data else 0) + (2 if "qk" in data else 0) + (1 if "angles" in data else 0)
    gs = fig.add_gridspec(1, max(1, panels), wspace=0.5)
    col = 0
    angles = style.array(data["angles"]) if "angles" in data else None  # (N, D/2)
    if angles is not None and angles.ndim == 1:
        angles = angles[:, None]
    npairs = angles.shape[1] if angles is not None else max(1, int(data.get("dim", 2)) // 2)
    if angles is not None:
        ax = fig.add_subplot(gs[0, col])
        if npairs > 1:
            style.heatmap(ax, np.mod(angles, 2 * math.pi),
                          "rotation angle p·θ_i mod 2π per pair", "pair i (dims 2i, 2i+1)", "position p",
                          "angle (radians)", cmap=style.CYCLIC, symmetric=False, vmin=0, vmax=2 * math.pi,
                          extent=(-0.5, npairs - 0.5, n - 0.5, -0.5))
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        else:  # one pair (a head of 2 dims): a one-column heat map says little; its angle as a curve
            x, y = np.arange(n, dtype=float), np.mod(angles[:, 0], 2 * math.pi)
            wraps = np.where(np.diff(y) < 0)[0] + 1  # no line back down where the angle completes a turn
            ax.plot(np.insert(x, wraps, np.nan), np.insert(y, wraps, np.nan), color="C4", marker="o",
                    markersize=2.5, linewidth=1.0)
            ax.set_ylim(-0.2, 2 * math.pi + 0.2)
            ax.set_yticks([0, math.pi, 2 * math.pi])
            ax.set_yticklabels(["0", "π", "2π"])
            ax.set_xlabel("position p")
            ax.set_ylabel("angle (radians)")
            ax.set_title("rotation angle p·θ mod 2π\n(one pair: dims 0, 1; θ = %s)"
                         % style.fmt_g(angles[1, 0] if n > 1 else 0, 3), fontsize=10)
            ax.grid(True, alpha=0.3)
        col += 1
        ax = fig.add_subplot(gs[0, col])
        pairs = sorted(set(i for i in (0, 1, npairs // 4, npairs // 2, npairs - 1) if i < npairs))
        cmap = plt.get_cmap("plasma")
        for k, i in enumerate(pairs):
            ax.plot(np.arange(1, n), angles[1:, i], color=cmap(k / len(pairs)), linewidth=1.5,
                    label="pair %d (θ=%s)" % (i, style.fmt_g(angles[1, i] if n > 1 else 0, 3)))
        ax.axhline(2 * math.pi, color="0.4", linestyle=":", linewidth=1.2, label="one full turn (2π)")
        ax.set_yscale("log")
        ax.set_xlabel("position p")
        ax.set_ylabel("angle p·θ_i (radians, log scale)")
        ax.set_title("angles grow linearly; slow pairs barely turn" if npairs > 1 else
                     "the angle grows linearly with position\n(one pair)", fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(True, alpha=0.3)
        col += 1
    if "qk" in data:
        qk = style.array(data["qk"])  # (N, N): q_m . k_n
        causal = np.where(np.tril(np.ones_like(qk)) > 0, qk, np.nan)
        style.heatmap(fig.add_subplot(gs[0, col]), causal, "q_m · k_n after rotation (q = k = all-ones)",
                      "key position n", "query position m", "dot product")
        col += 1
        ax = fig.add_subplot(gs[0, col])
        score = qk[:, 0]  # query at m = d, key at 0
        envelope = np.maximum.accumulate(np.abs(score)[::-1])[::-1]
        ax.plot(np.arange(n), score, color="C0", linewidth=1.2, label="q·k at distance d")
        ax.plot(np.arange(n), envelope, color="C3", linestyle="--", linewidth=1.4, label="max |q·k| at distance ≥ d")
        formula = qk_formula(data, npairs)
        if isinstance(data.get("scale"), list) and angles is not None:
            # xpos: the same rotation without its scales, for comparison (angles[d] = d·θ_i)
            af = data.get("attention_factor")
            a2 = float(af) ** 2 if style.finite(af) else 1.0
            ax.plot(np.arange(n), a2 * 2 * np.cos(angles).sum(axis=1), color="0.45", linestyle=":", linewidth=1.3,
                    label="plain rotation %s (no scales)" % ("Σ_i 2cos(d·θ_i)" if npairs > 1 else "2cos(d·θ)"))
        ax.axhline(0, color="0.5", linewidth=0.8)
        ax.set_xlabel("relative distance d = m − n (positions)")
        ax.set_ylabel("q·k (all-ones q, k)")
        ax.set_title("%s\n(%s)" % ("long-term decay of q·k with distance" if npairs > 1 else
                                    "q·k against distance, one pair", formula), fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)


# ----------------------------------------------------------------------------------------------
# Bias


def plot_bias(fig, data):
    bias = np.array([style.array(h) for h in data["bias"]])  # (H, N, N)
    H, n, _ = bias.shape
    shown = min(H, 8)
    slopes = data.get("slopes")
    cols = min(shown, 4)  # at most 4 maps a row, so each keeps a readable colour bar
    rows = -(-shown // cols)
    gs = fig.add_gridspec(rows + 1, max(cols, 2), height_ratios=[1] * rows + [1.1], hspace=0.55, wspace=0.55)
    causal = np.tril(np.ones((n, n))) > 0
    for h in range(shown):
        ax = fig.add_subplot(gs[h // cols, h % cols])
        label = "head %d" % h + (" (m=%s)" % style.fmt_g(slopes[h], 3) if slopes and h < len(slopes) else "")
        # Each head on its own scale (a gentle head would look blank beside a steep one); the line
        # plot below compares the heads on one axis.
        style.heatmap(ax, np.where(causal, bias[h], np.nan), label, "key j", "query i" if h % cols == 0 else "",
                      "bias" if h % cols == cols - 1 else "")
    note = learned_note(data)
    fig.suptitle("bias added to the attention logit, per head (grey: future keys, masked)%s"
                 % ("; " + note if note else ""), fontsize=11)
    ax = fig.add_subplot(gs[rows, :])
    cmap = plt.get_cmap("viridis")
    for h in range(H):
        row = bias[h, n - 1, ::-1]  # the last query against distance 0..n-1
        label = "head %d" % h + (" (slope %s)" % style.fmt_g(slopes[h], 3) if slopes and h < len(slopes) else "")
        ax.plot(np.arange(n), row, color=cmap(h / max(1, H - 1)), linewidth=1.5, label=label)
    ax.set_xlabel("distance i − j (positions)")
    ax.set_ylabel("bias")
    ax.set_title("bias against distance, per head (query at the last position)%s"
                 % ("" if shown == H else "; heat maps show the first %d of %d heads" % (shown, H)), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=max(1, H // 8), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


# ----------------------------------------------------------------------------------------------
# No positional signal


def plot_nothing(fig, data):
    n = n_positions(data)
    ax = fig.add_subplot(1, 2, 1)
    mask = np.where(np.tril(np.ones((n, n))) > 0, 0.0, np.nan)
    style.heatmap(ax, mask, "the causal mask: every visible key gets logit bias 0", "key j", "query i",
                  "bias (grey: future, masked)", symmetric=False, vmin=-1, vmax=1)
    ax = fig.add_subplot(1, 2, 2)
    ax.axis("off")
    ax.text(0.02, 0.6, "No positional encoding is added, rotated or biased.\n"
            "The causal mask is the only source of order: a token at\n"
            "position p sees p + 1 tokens, so attention can still\n"
            "count (Kazemnejad et al. 2023: NoPE learns positions implicitly).",
            fontsize=11, va="center")


# ----------------------------------------------------------------------------------------------
# Anything else an encoding emits (t5 buckets, kerple's r1/r2, xpos scales, fire's input, cope's
# position embeddings, randomized positions): one panel per array, so nothing goes unseen, with its axes
# named where the key is known (OTHER_AXES) and generic otherwise.


def other_arrays(data):
    out = []
    for key in sorted(data):
        v = data[key]
        if key in KNOWN or not isinstance(v, list) or not v:
            continue
        a = np.array(v, dtype=float) if not isinstance(v[0], list) or not isinstance(v[0][0], list) \
            else np.array([style.array(x) for x in v])
        if a.ndim in (1, 2, 3) and a.size:
            out.append((key, a))
    return out


# What the axes of the arrays above are, by key (what `poslab pe` emits under that name); an array not
# listed gets generic axes. causal: a (query, key) matrix whose keys after the query are masked in a model,
# so drawn blank (grey) rather than as the 0 the encoding writes there.
QUERY_KEY = dict(x="key position j", y="query position i", causal=True)
PAIR = "pair i (dims 2i, 2i+1)"
OTHER_AXES = {
    "buckets": dict(QUERY_KEY, value="bucket (shared by every head)", about="T5's bucket of i − j"),
    "fire_input": dict(QUERY_KEY, value="MLP input",
                       about="the MLP's input,\nlog(c(i − j) + 1) / log(c·max(i, L) + 1)"),
    "scale": dict(x=PAIR, y="position p", value="scale s_i(p)",
                  about="xPos scales,\nq_m times s_i(m), k_n divided by s_i(n)"),
    "zeta": dict(x=PAIR, value="ζ_i", about="xPos ζ_i per pair"),
    "inv_freq": dict(x=PAIR, value="θ_i (radians per position)", about="frequency θ_i per pair"),
    "r1": dict(x="head", value="r1", about="per head"),
    "r2": dict(x="head", value="r2", about="per head"),
    "pos_emb": dict(x="position (count of gated keys)", y="head dim", value="embedding value",
                    about="position embeddings"),
    "positions": dict(x="draw (sorted)", value="position", about="randomized positions"),
}


# Options `poslab pe` records from its own flags; every other option in the JSON is a --param value.
PE_FLAGS = {"base", "bits", "scale", "heads", "rope_scaling", "factor", "original_length"}


def param_options(data):
    """The --param values in the JSON's options (kerple's r1, r2; fire's c, L), sorted by name."""
    opts = data.get("options") or {}
    return [(k, v) for k, v in sorted(opts.items()) if k not in PE_FLAGS]


def learned_note(data):
    """'' for an encoding without parameters; else what the pictures show of them: the initialisation, or the
    values given with --param (the JSON's options)."""
    if not data.get("trainable"):
        return ""
    given = param_options(data)
    if not given:
        return "learned parameters: shown at initialisation"
    return "learned parameters: shown at %s as given by --param, any other at initialisation" \
        % ", ".join(style.fmt_option(k, v) for k, v in given)


def plot_other(fig, data):
    arrays = other_arrays(data)
    gs = fig.add_gridspec(1, max(3, len(arrays)), wspace=0.5, top=0.76)  # room for 3-line titles
    for i, (key, a) in enumerate(arrays):
        ax = fig.add_subplot(gs[0, i])
        axes = OTHER_AXES.get(key, {})
        about = (": " + axes["about"]) if "about" in axes else ""
        shape = "×".join(str(s) for s in a.shape)
        if a.ndim == 2 and a.shape[1] == 1:  # one column (e.g. one rotary pair): a curve against the rows
            a, axes = a[:, 0], dict(axes, x=axes.get("y", "index"))
        if a.ndim == 1 and a.size == 1:  # a single number (one head, one pair): say it
            ax.axis("off")
            text = "%s = %s" % (key, style.fmt_g(float(a[0])))
            if "about" in axes:
                text += "\n(%s)" % axes["about"]
            ax.text(0.0, 0.6, text, fontsize=11, va="center", transform=ax.transAxes)
        elif a.ndim == 1:
            ax.plot(np.arange(a.size), a, marker="o", markersize=3, linewidth=1.4, color="C%d" % (i % 10))
            ax.set_xlabel(axes.get("x", "index"))
            ax.set_ylabel(axes.get("value", key))
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(True, alpha=0.3)
            ax.set_title("%s (%s)%s" % (key, shape, about), fontsize=10)
        elif np.nanmin(a) == np.nanmax(a):  # e.g. parameters initialised to zero: say so, not a flat colour
            ax.axis("off")
            ax.text(0.0, 0.6, "%s (%s):\nevery value is %s" % (key, shape, style.fmt_g(float(np.nanmin(a)))),
                    fontsize=11, va="center", transform=ax.transAxes)
        else:
            m = a if a.ndim == 2 else a[0]  # a 3-D array: its first slice (e.g. head 0)
            masked = ""
            if axes.get("causal") and m.shape[0] == m.shape[1]:
                m = np.where(np.tril(np.ones(m.shape)) > 0, m, np.nan)
                masked = "\n(grey: keys after the query, masked)"
            signed = bool((m[np.isfinite(m)] < 0).any())
            style.heatmap(ax, m, "%s (%s%s)%s%s" % (key, shape, ", first slice" if a.ndim == 3 else "", about, masked),
                          axes.get("x", "column"), axes.get("y", "row"), axes.get("value", key),
                          cmap=style.DIVERGING if signed else style.SEQUENTIAL, symmetric=signed)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    note = learned_note(data)
    fig.suptitle("other numbers this encoding emits%s" % (" (%s)" % note if note else ""), fontsize=11,
                 x=0.01, ha="left")


SECTIONS = [  # (test on the JSON, drawer, height in inches or a function of the JSON)
    (lambda d: d.get("family") == "none", plot_nothing, 4.2),
    (lambda d: "table" in d and d.get("family") != "none", plot_additive, 8.5),
    (lambda d: "by_base" in d, plot_by_base, 4.0),
    (lambda d: "angles" in d or "qk" in d, plot_rotary, 4.4),
    (lambda d: "bias" in d, plot_bias, lambda d: 3.6 * -(-min(len(d["bias"]), 8) // 4) + 3.8),
    (lambda d: d.get("family") != "none" and bool(other_arrays(d)), plot_other, 4.0),
]


def plot_pe(data, path):
    """Every section whose keys the JSON has, stacked, under one title naming the kind and options."""
    sections = [(draw, h(data) if callable(h) else h) for test, draw, h in SECTIONS if test(data)]
    heights = [0.5] + [h for _, h in sections]  # a strip on top for the title
    fig = plt.figure(figsize=(18, sum(heights)))
    subfigs = np.atleast_1d(fig.subfigures(len(heights), 1, height_ratios=heights, hspace=0.04))
    # Left-aligned: a figure with few panels is cropped on the right, which would push a centred title off.
    subfigs[0].text(0.01, 0.3, describe(data) + "   (family: %s)" % data.get("family", "?"), ha="left",
                    va="center", fontsize=14, fontweight="bold")
    for sub, (draw, _) in zip(subfigs[1:], sections):
        draw(sub, data)
    style.save(fig, path)
