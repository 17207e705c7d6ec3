"""Retrieval beside loss in the compare report: exact match against length with Wilson 95% bands per
encoding, each encoding's depth x length heat map, and the retrieval table (from results.json's
"probes" and each cell's probe-TASK.json).
"""

import json
import math
import os

from plots import probes as probe_plots
from plots.report_text import group_label
from plots.style import MARKERS, finite, no_data, num, plt, save, train_line


def tasks(res):
    return list((res.get("probes") or {}).keys())


def main_task(res):
    """The probe the report shows beside the metric: passkey when the experiment has it, else mqar."""
    t = tasks(res)
    return "passkey" if "passkey" in t else (t[0] if t else None)


def probe_groups(res, groups, task):
    """The groups a probe's picture and table show, in the report's order: the row groups it stands
    beside, then any it stands for alone ("as trained", where every evaluation variant scales RoPE)."""
    names = [x["group"] for x in res["probes"][task]["groups"]]
    return [g for g in groups if g in names] + [g for g in names if g not in groups]


def extra_groups(res, groups):
    """Probe groups beside no row, across the experiment's probes (colours are given to these too)."""
    extra = []
    for task in tasks(res):
        extra += [g for g in probe_groups(res, groups, task) if g not in groups and g not in extra]
    return extra


def setting(p, task):
    """A probe's setting in a few words, as in the titles."""
    if task == "mqar":
        return "distance axis, %s pairs, %s gaps" % (p.get("pairs"), p.get("gaps"))
    return "%s-digit keys, %s filler" % (p.get("digits"), p.get("haystack"))


def plot_retrieval(res, groups, colors, path, task="passkey"):
    """Exact match (depths pooled) against length, mean over seeds, with the Wilson band of all trials."""
    p = res["probes"][task]
    fig, ax = plt.subplots(figsize=(10, 5.5))
    drawn = 0
    for i, g in enumerate(probe_groups(res, groups, task)):
        entry = next((x for x in p["groups"] if x["group"] == g), None)
        if entry is None:
            continue
        pts = [l for l in entry["lengths"] if finite(l.get("exact_mean"))]
        if not pts:
            continue
        x = [l["length"] for l in pts]
        ax.plot(x, [l["exact_mean"] for l in pts], marker=MARKERS[i % len(MARKERS)], color=colors[g],
                label="%s (effective %s)" % (g, fmt_eff(entry, p)))
        ax.fill_between(x, [num(l["exact_low"]) for l in pts], [num(l["exact_high"]) for l in pts], color=colors[g], alpha=0.15)
        drawn += 1
    if not drawn:
        no_data(ax, "no probe results")
    ax.set_xscale("log", base=2)
    lengths = sorted({l["length"] for e in p["groups"] for l in e["lengths"]})
    if lengths:  # the tested lengths themselves on the axis, not powers of two
        ax.set_xticks(lengths)
        ax.set_xticklabels([str(L) for L in lengths])
        ax.minorticks_off()
    ax.set_ylim(-0.03, 1.03)
    train_line(ax, p["train_length"], "train length (%d tokens)" % p["train_length"])
    ax.axhline(p["threshold"], color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("example length (tokens)" if task == "mqar" else "document length (tokens)")
    ax.set_ylabel("exact match (distance axis)" if task == "mqar" else "exact match (depths pooled)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    name = res.get("experiment", "experiment")
    what = "retrieval" if name == task else "%s retrieval" % task  # "mqar: retrieval", not "mqar: mqar retrieval"
    ax.set_title("%s: %s against length (%s); bands: Wilson 95%%; dotted: threshold %.2f"
                 % (name, what, setting(p, task), p["threshold"]), pad=12)
    save(fig, path)


def fmt_eff(entry, p):
    eff = num(entry.get("effective_length_min"))
    return "none" if not finite(eff) or eff <= 0 else "%gx" % (eff / p["train_length"])


def mean_over_seeds(probes):
    """One probe JSON whose cells' exact match is the mean over the seeds' probes (cells matched by
    length, depth, axis and control); a cell missing or not ok in any seed is n/a."""
    if len(probes) == 1:
        return probes[0]
    key = lambda r: (r["length"], r.get("depth"), r.get("axis"), r.get("control"))
    seen = {}
    for p in probes:
        for r in p["results"]:
            seen.setdefault(key(r), []).append(r)
    merged = dict(probes[0])
    merged["results"] = []
    for r in probes[0]["results"]:
        rs = seen[key(r)]
        ok = len(rs) == len(probes) and all(x.get("status") == "ok" and finite(x.get("exact")) for x in rs)
        merged["results"].append(dict(r, exact=sum(x["exact"] for x in rs) / len(rs) if ok else None))
    return merged


def plot_heatmaps(res, results_dir, groups, path, task="passkey"):
    """One depth x length heat map per encoding (exact match, the mean over its seeds), side by side."""
    # Only the groups the probe stands for, each from the cells its entry pools: with an eval grid, a variant
    # with its own RoPE scaling shares the cell's probe file, which was decoded without that scaling.
    # (results.json from before "cells" was recorded: the cells of the same group.)
    seeds = {}
    for entry in res["probes"][task]["groups"]:
        g = str(entry["group"])
        dirs = entry.get("cells")
        if dirs is None:
            dirs = [c.get("dir", "") for c in res["cells"] if str(c.get("group")) == g]
        for d in dirs:
            f = os.path.join(results_dir, d, "probe-%s.json" % task)
            if not os.path.exists(f):
                continue
            try:
                with open(f, encoding="utf-8") as fh:
                    seeds.setdefault(g, []).append(json.load(fh))
            except (OSError, ValueError):
                continue
    per_group = {g: mean_over_seeds(ps) for g, ps in seeds.items()}
    n_seeds = sorted({len(ps) for ps in seeds.values()})
    shown = [g for g in probe_groups(res, groups, task) if g in per_group]
    if not shown:
        return False
    cols = min(4, len(shown))
    rows = int(math.ceil(len(shown) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.8 * cols, 3.4 * rows), squeeze=False)
    fig.subplots_adjust(hspace=0.55, wspace=0.45 if task == "mqar" else 0.3)
    im = None
    for k, g in enumerate(shown):
        ax = axes[k // cols][k % cols]
        im = probe_plots.draw_heatmap(ax, per_group[g], g)
        if k % cols:
            ax.set_ylabel("")
        if k + cols < len(shown):
            ax.set_xlabel("")
    for k in range(len(shown), rows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.colorbar(im, ax=axes, fraction=0.02, pad=0.02, label="exact match")
    over = ("one seed" if n_seeds == [1] else "mean over %s seeds" % "/".join(str(n) for n in n_seeds))
    fig.suptitle("%s: exact match by %s and length (%s); dashed: the training length"
                 % (res.get("experiment", "experiment"), "axis" if task == "mqar" else "needle depth", over))
    save(fig, path)
    return True


def retrieval_table(res, groups, task="passkey"):
    """(header, rows) with each cell "exact [low, high]" and the effective length."""
    p = res["probes"][task]
    lengths = sorted({l["length"] for g in p["groups"] for l in g["lengths"]})
    header = [group_label(res)] + ["%g tokens" % L for L in lengths] + ["effective length"]
    rows = []
    for g in probe_groups(res, groups, task):
        entry = next((x for x in p["groups"] if x["group"] == g), None)
        if entry is None:
            continue
        line = [(g, False)]
        for L in lengths:
            l = next((x for x in entry["lengths"] if x["length"] == L), None)
            if l is None:
                line.append(("-", False))
            elif finite(l.get("exact_mean")):
                line.append(("%.2f [%.2f, %.2f]" % (l["exact_mean"], l["exact_low"], l["exact_high"]),
                             l["exact_low"] >= p["threshold"]))
            else:
                line.append(("n/a" if str(l.get("status", "")).startswith("n/a") else "-", False))
        eff = num(entry.get("effective_length_min"))
        line.append(("%g (%s)" % (eff, fmt_eff(entry, p)) if finite(eff) else "-", False))
        rows.append(line)
    return header, rows


def retrieval_txt(res, task="passkey"):
    p = res["probes"][task]
    if task == "mqar":
        return ("Multi-query associative recall (Arora et al. 2023): %s key-value pairs, then queries of their keys; past the "
                "training length the query region is stretched (the distance axis, %s gaps). Exact match: every query of an "
                "example answered, %s trials a cell per seed, [Wilson 95%% interval]. Bold: the lower bound reaches %.2f. "
                "Effective length (after RULER): the longest length up to which the lower bound stays at or above %.2f at "
                "every length, in every seed. Ranking by retrieval: %s."
                % (p.get("pairs"), p.get("gaps"), p.get("trials"), p["threshold"], p["threshold"],
                   ", ".join(r["name"] for r in p.get("ranking", []))))
    return ("Passkey retrieval (Mohtashami & Jaggi 2023): a %s-digit key hidden at a depth in %s filler (%s template), asked "
            "for at the end and decoded greedily; exact match pooled over depths, %s trials a cell per seed, [Wilson 95%% "
            "interval]. Bold: the lower bound reaches %.2f. Effective length (after RULER): the longest length up to which "
            "the lower bound stays at or above %.2f at every length, in every seed. Ranking by retrieval: %s."
            % (p.get("digits"), p.get("haystack"), p.get("template"), p.get("trials"), p["threshold"], p["threshold"],
               ", ".join(r["name"] for r in p.get("ranking", []))))
