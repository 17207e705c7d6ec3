"""`poslab compare` report: plots and tables for one results directory (entry: scripts/plot_report.py).

Reads RESULTS_DIR/results.json (written by `poslab compare`) and, for each cell, the cell's
metrics.jsonl, eval.json and attention.json. Writes into RESULTS_DIR:

  loss_curves.png     training and validation loss against step, per group, mean over seeds
  extrapolation.png   the task metric (exact match) or loss against evaluation length
  position_loss.png   loss against token position at each group's longest evaluated length
  attention.png       attention distance, entropy and first-token share against length, per group,
                      and each group's attention map at its longest length (when cells have attention.json)
  report.md           description, results tables, cells table, the images
  report.html         the same, self-contained (images inlined as data URIs)

Exit status: 0 on success, 2 when results.json is missing or malformed.
"""

import argparse
import os
import sys

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from plots import attention, report_probes
from plots.report_text import build_tables, write_html, write_markdown
from plots.results import (InputError, group_order, has_exact_match, is_ok, item_label, load_cells, load_results,
                           rows_by_group, seeds_phrase, train_tokens, warn)
from plots.style import MARKERS, finite, fmt_g, group_colors, length_axis, no_data, num, save, train_line

IMAGES = [  # the first picture is the headline: what happens past the training length
    ("extrapolation.png", "Length extrapolation"),
    ("loss_curves.png", "Training and validation loss"),
    ("position_loss.png", "Loss by token position"),
]
ATTENTION_IMAGE = ("attention.png", "Attention by length (per encoding)")


# ----------------------------------------------------------------------------------------------
# Plots


def maybe_log_y(ax, values, ratio=8.0):
    v = [x for x in values if finite(x) and x > 0]
    if v and max(v) / min(v) > ratio:
        ax.set_yscale("log")


def mean_on_steps(series_list):
    """Mean, min and max across seeds at each step present in any series."""
    per_step = {}
    for series in series_list:
        for step, v in series:
            per_step.setdefault(step, []).append(v)
    steps = np.array(sorted(per_step), dtype=float)
    vals = [per_step[s] for s in sorted(per_step)]
    return (steps, np.array([np.mean(v) for v in vals]), np.array([np.min(v) for v in vals]),
            np.array([np.max(v) for v in vals]))


def nan_moving_average(y, window):
    """Centred moving average that ignores nans; positions with no finite value stay nan."""
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(y)
    kernel = np.ones(window)
    s = np.convolve(np.where(ok, y, 0.0), kernel, mode="same")
    n = np.convolve(ok.astype(float), kernel, mode="same")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = s / n
    out[~ok] = np.nan  # keep unscored positions (prompts) blank rather than smeared
    return out


def plot_loss_curves(res, cells, groups, colors, path):
    fig, ax = plt.subplots(figsize=(11, 6))
    handles, all_vals, extra = [], [], []
    for i, g in enumerate(groups):
        mine = [c for c in cells if c["group"] == g]
        trains = [c["train"] for c in mine if c["train"]]
        vals = [c["val"] for c in mine if c["val"]]
        if not trains and not vals:
            continue
        color = colors[g]
        n_seeds = max(len(trains), len(vals))
        if trains:
            s, m, lo, hi = mean_on_steps(trains)
            ax.plot(s, m, color=color, linewidth=0.9, alpha=0.45, zorder=2)
            all_vals.extend(m)
        if vals:
            s, m, lo, hi = mean_on_steps(vals)
            ax.plot(s, m, color=color, linewidth=1.8, marker=MARKERS[i % len(MARKERS)], markersize=4.5, zorder=3)
            if n_seeds > 1:
                ax.fill_between(s, lo, hi, color=color, alpha=0.15, linewidth=0, zorder=1)
            all_vals.extend(m)
        handles.append(Line2D([], [], color=color, marker=MARKERS[i % len(MARKERS)], linewidth=1.8,
                              label="%s (%d seed%s)" % (g, n_seeds, "" if n_seeds == 1 else "s")))
    if handles:
        maybe_log_y(ax, all_vals, ratio=4.0)
        style = [Line2D([], [], color="0.3", linewidth=0.9, alpha=0.45, label="train (mean)"),
                 Line2D([], [], color="0.3", linewidth=1.8, marker="o", markersize=4.5, label="validation (mean)"),
                 plt.Rectangle((0, 0), 1, 1, color="0.3", alpha=0.15, label="validation min-max")]
        leg = ax.legend(handles=handles, title=item_label(res), loc="upper left", bbox_to_anchor=(1.01, 1.0),
                        frameon=False)
        ax.add_artist(leg)
        extra = [leg, ax.legend(handles=style, loc="lower left", bbox_to_anchor=(1.01, 0.0), frameon=False,
                                fontsize=9)]
    else:
        no_data(ax, "no metrics.jsonl found")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title("%s: training and validation loss (mean over seeds)" % res.get("experiment", "experiment"))
    save(fig, path, extra)


def na_suffix(row_map, lengths):
    ok = [L for L in lengths if is_ok(row_map.get(L))]
    bad = [L for L in lengths if not is_ok(row_map.get(L))]
    if not bad:
        return ""
    word = "n/a" if all(str((row_map.get(L) or {}).get("status", "")).startswith("n/a") for L in bad) else "no result"
    if not ok:
        return " (%s)" % word
    if min(bad) > max(ok):
        return " (%s past %g)" % (word, max(ok))
    return " (%s at %s)" % (word, ", ".join("%g" % L for L in bad))


def plot_metric_vs_length(ax, res, groups, colors, table, lengths, key, ylabel):
    n = len(groups)
    values, handles = [], []
    for i, g in enumerate(groups):
        row_map = table.get(g, {})
        pts = [(L, num(row_map[L].get(key + "_mean")), num(row_map[L].get(key + "_ci95")))
               for L in lengths if is_ok(row_map.get(L)) and finite(row_map[L].get(key + "_mean"))]
        label = g + na_suffix(row_map, lengths)
        if not pts:
            continue
        # Dodge groups sideways a little so overlapping error bars stay apart.
        dodge = 2 ** (0.035 * (i - (n - 1) / 2))
        x = np.array([p[0] for p in pts], dtype=float) * dodge
        y = np.array([p[1] for p in pts])
        e = np.array([p[2] if finite(p[2]) else 0.0 for p in pts])
        h, = ax.plot(x, y, color=colors[g], marker=MARKERS[i % len(MARKERS)], markersize=6, linewidth=1.8,
                     label=label, zorder=3)
        if e.any():  # the 95% interval over seeds as a band (one seed has none)
            ax.fill_between(x, y - e, y + e, color=colors[g], alpha=0.18, linewidth=0, zorder=2)
            values.extend(y - e)
            values.extend(y + e)
        handles.append(h)
        values.extend(y)
    return handles, values


def lengths_with_numbers(table, lengths, keys):
    """The lengths where some group has a number for one of keys: an axis tick where every group is n/a (a length
    past the validation split, say) would hold nothing and squeeze the rest to one side."""
    return [L for L in lengths if any(is_ok(table[g].get(L)) and any(finite(table[g][L].get(k + "_mean")) for k in keys)
                                      for g in table)]


def plot_extrapolation(res, groups, colors, table, path):
    every = sorted(set(res["lengths"]) | {L for g in table for L in table[g]})
    keys = ["exact_match", "loss"] if has_exact_match(res) else ["loss"]
    lengths = lengths_with_numbers(table, every, keys) or every
    left_out = [L for L in every if L not in lengths]
    unit = res.get("length_unit", "tokens")
    tl = res.get("train_length")
    name = res.get("experiment", "experiment")
    if has_exact_match(res):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.8))
        panels = [(ax1, "exact_match", "exact match (fraction of examples)"), (ax2, "loss", "loss (nats/token)")]
    else:
        fig, ax1 = plt.subplots(figsize=(10.5, 5.8))
        panels = [(ax1, "loss", "loss (nats/token)")]
    legend_handles = None
    for ax, key, ylabel in panels:
        handles, values = plot_metric_vs_length(ax, res, groups, colors, table, lengths, key, ylabel)
        if legend_handles is None or len(handles) > len(legend_handles):
            legend_handles = handles
        length_axis(ax, lengths, tl, unit)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        if key == "exact_match":
            ax.set_ylim(-0.03, 1.05)
            ax.set_title("exact match by length (%s)" % seeds_phrase(res), pad=18)
        else:
            maybe_log_y(ax, values)
            ax.set_title("loss by length (%s)" % seeds_phrase(res), pad=18)
        if not handles:
            no_data(ax)
    if legend_handles:
        fig.legend(handles=legend_handles, labels=[h.get_label() for h in legend_handles], title=item_label(res),
                   loc="upper left", bbox_to_anchor=(1.0, 0.92), frameon=False)
    trained = " (trained at %s %s)" % (fmt_g(tl), unit) if finite(tl) else ""
    nowhere = ("; no %s has a number at %s %s (n/a)" % (item_label(res), ", ".join("%g" % L for L in left_out), unit)
               if left_out else "")
    fig.suptitle("%s: length extrapolation%s%s" % (name, trained, nowhere), fontsize=13)
    fig.tight_layout()
    save(fig, path)


def plot_position_loss(res, cells, groups, colors, table, path):
    fig, ax = plt.subplots(figsize=(11, 6))
    unit = res.get("length_unit", "tokens")
    smoothed, all_vals, handles = set(), [], []
    for i, g in enumerate(groups):
        ok_lengths = [L for L, r in table.get(g, {}).items() if is_ok(r)]
        if not ok_lengths:
            continue
        L = max(ok_lengths)
        curves = []
        for c in cells:
            if c["group"] != g or not c["eval"]:
                continue
            r = c["eval"].get(L)
            if r is None:  # the length may be stored as an int in one file and a float in another
                r = next((v for k, v in c["eval"].items() if finite(k) and float(k) == float(L)), None)
            if r and r.get("status") == "ok" and isinstance(r.get("position_loss"), list) and r["position_loss"]:
                curves.append([num(v) for v in r["position_loss"]])
        if not curves:
            warn("group %s: no position_loss at length %g in any cell's eval.json" % (g, L))
            continue
        T = max(len(cv) for cv in curves)
        stack = np.full((len(curves), T), np.nan)
        for k, cv in enumerate(curves):
            stack[k, :len(cv)] = cv
        with np.errstate(invalid="ignore"):
            cnt = np.isfinite(stack).sum(0)
            y = np.where(cnt > 0, np.nansum(stack, 0) / np.maximum(cnt, 1), np.nan)
        if T > 200:
            w = max(5, T // 50)
            y = nan_moving_average(y, w)
            smoothed.add(w)
        x = np.arange(T)
        h, = ax.plot(x, y, color=colors[g], linewidth=1.6,
                     label="%s (at %g %s, %d seed%s)" % (g, L, unit, len(curves), "" if len(curves) == 1 else "s"))
        handles.append(h)
        all_vals.extend(y[np.isfinite(y)])
    tt = train_tokens(res)
    if finite(tt):
        train_line(ax, tt, "train length (%g tokens)" % tt)
    if handles:
        maybe_log_y(ax, all_vals, ratio=20.0)
        ax.legend(handles=handles, title=item_label(res), loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        no_data(ax, "no position_loss data")
    ax.set_xlabel("token position in the model input")
    ax.set_ylabel("loss at position (nats, mean over seeds)")
    ax.grid(True, alpha=0.3)
    title = "%s: loss by position at each encoding's longest evaluated length" % res.get("experiment", "experiment")
    if smoothed:
        ws = sorted(smoothed)
        title += "\nsmoothed: moving average over %s positions (curves longer than 200)" % "/".join(str(w) for w in ws)
    ax.set_title(title, pad=18)
    save(fig, path)


# ----------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description="Plots and a markdown/HTML report for a `poslab compare` results directory.")
    ap.add_argument("results_dir", metavar="RESULTS_DIR", help="directory holding results.json")
    args = ap.parse_args(argv)
    results_dir = args.results_dir
    try:
        res = load_results(results_dir)
    except InputError as e:
        sys.stderr.write("plot_report: %s\n" % e)
        return 2

    groups = group_order(res)
    colors = group_colors(groups + report_probes.extra_groups(res, groups))  # rows' colours first, unchanged
    table = rows_by_group(res)
    cells = load_cells(results_dir, res)

    written = []
    p = os.path.join(results_dir, "loss_curves.png")
    plot_loss_curves(res, cells, groups, colors, p)
    written.append(p)
    p = os.path.join(results_dir, "extrapolation.png")
    plot_extrapolation(res, groups, colors, table, p)
    written.append(p)
    p = os.path.join(results_dir, "position_loss.png")
    plot_position_loss(res, cells, groups, colors, table, p)
    written.append(p)
    images = list(IMAGES)
    task = report_probes.main_task(res)
    if task:
        # Retrieval right after the loss picture: the two headline pictures side by side in the report.
        p = os.path.join(results_dir, "retrieval.png")
        report_probes.plot_retrieval(res, groups, colors, p, task)
        written.append(p)
        images.insert(1, ("retrieval.png", "Retrieval against length (%s)" % task))
        p = os.path.join(results_dir, "retrieval_heatmaps.png")
        if report_probes.plot_heatmaps(res, results_dir, groups, p, task):
            written.append(p)
            images.insert(2, ("retrieval_heatmaps.png", "Retrieval by %s and length (%s)"
                              % ("axis" if task == "mqar" else "depth", task)))
    p = os.path.join(results_dir, ATTENTION_IMAGE[0])
    if attention.plot_compare(attention.load_cell_attention(results_dir, res), groups, colors, p,
                              res.get("experiment", "experiment")):
        written.append(p)
        images.append(ATTENTION_IMAGE)

    tables = build_tables(res, groups, table)
    p = os.path.join(results_dir, "report.md")
    write_markdown(p, res, groups, tables, images)
    written.append(p)
    p = os.path.join(results_dir, "report.html")
    write_html(p, results_dir, res, groups, tables, images)
    written.append(p)
    for p in written:
        print(p)
    return 0
