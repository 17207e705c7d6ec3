#!/usr/bin/env python3
"""Plots and a report for one `poslab compare` results directory.

Usage: plot_report.py RESULTS_DIR

Reads RESULTS_DIR/results.json (written by `poslab compare`) and, for each cell, the cell's
metrics.jsonl and eval.json. Writes into RESULTS_DIR:

  loss_curves.png     training and validation loss against step, per group, mean over seeds
  extrapolation.png   the task metric (exact match) or loss against evaluation length
  position_loss.png   loss against token position at each group's longest evaluated length
  report.md           description, results tables, cells table, the three images
  report.html         the same, self-contained (images inlined as data URIs)

Needs numpy and matplotlib (Debian: /usr/bin/python3 has both). Exit status: 0 on success,
2 when results.json is missing or malformed.
"""

import os
import sys


def _reexec_with_system_python():
    """The shebang may find an interpreter without numpy/matplotlib (pyenv); fall back to Debian's."""
    system = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(system) and os.access(system, os.X_OK) \
            and not os.environ.get("POSLAB_PLOT_REEXEC"):
        os.environ["POSLAB_PLOT_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    sys.stderr.write("plot_report: needs numpy and matplotlib (try /usr/bin/python3 %s)\n" % " ".join(sys.argv))
    sys.exit(1)


try:
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
except ImportError:
    _reexec_with_system_python()

import argparse
import base64
import html
import json
import math

IMAGES = [  # the first picture is the headline: what happens past the training length
    ("extrapolation.png", "Length extrapolation"),
    ("loss_curves.png", "Training and validation loss"),
    ("position_loss.png", "Loss by token position"),
]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*", "h", "p"]
DPI = 130


class InputError(Exception):
    pass


def warn(msg):
    sys.stderr.write("plot_report: warning: %s\n" % msg)


# ----------------------------------------------------------------------------------------------
# Input


def num(v):
    """A JSON number as float; null, missing, bool or non-numeric as nan."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return float("nan")
    return float(v)


def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_results(results_dir):
    path = os.path.join(results_dir, "results.json")
    try:
        with open(path, encoding="utf-8") as f:
            res = json.load(f)
    except FileNotFoundError:
        raise InputError("%s: no such file" % path)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("%s: %s" % (path, e))
    except json.JSONDecodeError as e:
        raise InputError("%s: invalid JSON: %s" % (path, e))
    if not isinstance(res, dict):
        raise InputError("%s: expected a JSON object at the top level" % path)
    for key, kind in (("cells", list), ("rows", list), ("lengths", list)):
        if not isinstance(res.get(key), kind):
            raise InputError("%s: missing or malformed \"%s\" (expected a list)" % (path, key))
    for i, c in enumerate(res["cells"]):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise InputError("%s: cells[%d]: expected an object with a string \"name\"" % (path, i))
    for i, r in enumerate(res["rows"]):
        if not isinstance(r, dict) or "group" not in r or not finite(r.get("length")):
            raise InputError("%s: rows[%d]: expected an object with \"group\" and a numeric \"length\"" % (path, i))
    if not all(finite(x) for x in res["lengths"]):
        raise InputError("%s: \"lengths\" must be a list of numbers" % path)
    metric = res.get("metric", "loss")
    if metric not in ("exact_match", "loss"):
        raise InputError("%s: \"metric\" must be \"exact_match\" or \"loss\", got %r" % (path, metric))
    res["metric"] = metric
    return res


def group_order(res):
    """Groups in a stable order: the grid's order when there is one group key, else first appearance."""
    seen = []
    for item in res["cells"] + res["rows"]:
        g = item.get("group")
        if g is not None and str(g) not in seen:
            seen.append(str(g))
    keys = res.get("group_keys") or []
    grid = res.get("grid") or {}
    if len(keys) == 1 and isinstance(grid.get(keys[0]), list):
        order = [str(v) for v in grid[keys[0]]]
        return [g for g in order if g in seen] + [g for g in seen if g not in order]
    return seen


def group_colors(groups):
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    return {g: cmap(i % cmap.N) for i, g in enumerate(groups)}


def cell_dir(results_dir, cell):
    d = cell.get("dir") or os.path.join("cells", cell["name"])
    return d if os.path.isabs(d) else os.path.join(results_dir, d)


def read_metrics(path):
    train, val = [], []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                warn("%s:%d: skipping a malformed line" % (path, lineno))
                continue
            if not isinstance(rec, dict) or not finite(rec.get("step")):
                continue
            if finite(rec.get("train_loss")):
                train.append((rec["step"], rec["train_loss"]))
            if finite(rec.get("val_loss")):
                val.append((rec["step"], rec["val_loss"]))
    return train, val


def load_cells(results_dir, res):
    """Per cell: its metrics and eval results, or None where files are missing (warned once)."""
    out = []
    for cell in res["cells"]:
        d = cell_dir(results_dir, cell)
        entry = {"cell": cell, "group": str(cell.get("group")), "train": None, "val": None, "eval": None}
        status = cell.get("status")
        why = " (status %s)" % status if status not in (None, "done") else ""
        if not os.path.isdir(d):
            warn("cell %s: directory %s is missing%s; skipped in plots" % (cell["name"], d, why))
            out.append(entry)
            continue
        mpath = os.path.join(d, "metrics.jsonl")
        if os.path.isfile(mpath):
            try:
                entry["train"], entry["val"] = read_metrics(mpath)
            except (OSError, UnicodeDecodeError) as e:
                warn("cell %s: cannot read %s: %s" % (cell["name"], mpath, e))
        else:
            warn("cell %s: %s is missing%s; skipped in loss curves" % (cell["name"], mpath, why))
        epath = os.path.join(d, "eval.json")
        if os.path.isfile(epath):
            try:
                with open(epath, encoding="utf-8") as f:
                    ev = json.load(f)
                if not isinstance(ev, dict) or not isinstance(ev.get("results"), list):
                    raise ValueError("no \"results\" list")
                entry["eval"] = {r["length"]: r for r in ev["results"] if isinstance(r, dict) and "length" in r}
            except (OSError, UnicodeDecodeError, ValueError) as e:
                warn("cell %s: cannot use %s: %s" % (cell["name"], epath, e))
        else:
            warn("cell %s: %s is missing%s; skipped in position plot" % (cell["name"], epath, why))
        out.append(entry)
    return out


def rows_by_group(res):
    table = {}
    for r in res["rows"]:
        table.setdefault(str(r["group"]), {})[r["length"]] = r
    return table


def train_tokens(res):
    """Model input tokens at the training length; for text the length is already in tokens."""
    tt = res.get("train_tokens")
    if finite(tt):
        return tt
    if res.get("length_unit") == "tokens" and finite(res.get("train_length")):
        return res["train_length"]
    return None


def has_exact_match(res):
    """Tasks report exact match, except those without a single answer (dyck): then only loss is shown."""
    return res["metric"] == "exact_match" and any(finite(r.get("exact_match_mean")) for r in res["rows"])


def is_ok(row):
    return isinstance(row, dict) and row.get("status") == "ok"


# ----------------------------------------------------------------------------------------------
# Plot helpers


def length_axis(ax, lengths, train_length, unit):
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


def maybe_log_y(ax, values, ratio=8.0):
    v = [x for x in values if finite(x) and x > 0]
    if v and max(v) / min(v) > ratio:
        ax.set_yscale("log")


def no_data(ax, text="no data"):
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=12, color="0.4",
            bbox=dict(facecolor="white", edgecolor="none"), zorder=5)


def save(fig, path, extra=()):
    fig.savefig(path, dpi=DPI, bbox_inches="tight", bbox_extra_artists=list(extra) or None)
    plt.close(fig)


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


# ----------------------------------------------------------------------------------------------
# Plots


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
        leg = ax.legend(handles=handles, title="encoding", loc="upper left", bbox_to_anchor=(1.01, 1.0),
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


def plot_extrapolation(res, groups, colors, table, path):
    lengths = sorted(set(res["lengths"]) | {L for g in table for L in table[g]})
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
        fig.legend(handles=legend_handles, labels=[h.get_label() for h in legend_handles], title="encoding",
                   loc="upper left", bbox_to_anchor=(1.0, 0.92), frameon=False)
    trained = " (trained at %s %s)" % (fmt_g(tl), unit) if finite(tl) else ""
    fig.suptitle("%s: length extrapolation%s" % (name, trained), fontsize=13)
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
        ax.legend(handles=handles, title="encoding", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
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
# Report


def fmt_g(v, digits=4):
    return "%.*g" % (digits, v) if finite(v) else "-"


def fmt_ppl(v):
    if not finite(v):
        return "-"
    return "%.2f" % v if v < 1e4 else "%.3g" % v


def fmt_pm(mean, ci, digits=3):
    """The mean, with its 95% half-width only where there was one (2+ seeds)."""
    if not finite(mean):
        return "-"
    s = "%.*f" % (digits, mean)
    return s + (" ± %.*f" % (digits, ci) if finite(ci) else "")


def seed_count(res):
    return int(num(res.get("seeds")) if finite(res.get("seeds")) else
               max([int(num(r.get("n"))) for r in res.get("rows", []) if finite(r.get("n"))] or [0]))


def seeds_phrase(res):
    n = seed_count(res)
    return "1 seed" if n <= 1 else "mean ± 95%% interval over %d seeds" % n


def fmt_int(v):
    return "{:,}".format(int(round(v))) if finite(v) else "-"


def build_tables(res, groups, table):
    """Tables as (header, rows) where each cell is (text, bold)."""
    lengths = sorted(set(res["lengths"]) | {L for g in table for L in table[g]})
    unit = res.get("length_unit", "tokens")
    has_em = has_exact_match(res)
    primary = "exact_match" if has_em else "loss"

    summary_header = ["encoding"] + ["%g %s" % (L, unit) for L in lengths]
    summary = []
    for g in groups:
        cells = [(g, False)]
        for L in lengths:
            r = table.get(g, {}).get(L)
            if r is None:
                cells.append(("-", False))
            elif not is_ok(r):
                st = str(r.get("status", ""))
                cells.append(("n/a" if st.startswith("n/a") else st or "-", False))
            else:
                cells.append((fmt_pm(num(r.get(primary + "_mean")), num(r.get(primary + "_ci95"))),
                              bool(r.get("best"))))
        summary.append(cells)

    show_tokens = unit != "tokens"
    header = ["encoding", "length (%s)" % unit] + (["tokens"] if show_tokens else []) + ["n", "loss"]
    header += ["exact match"] if has_em else ["ppl"]
    header += ["token acc", "status"]
    full = []
    for L in lengths:
        for g in groups:
            r = table.get(g, {}).get(L)
            if r is None:
                continue
            ok = is_ok(r)
            line = [(g, False), ("%g" % L, False)] + ([(fmt_int(num(r.get("tokens"))), False)] if show_tokens else [])
            line += [(fmt_int(num(r.get("n"))), False),
                    (fmt_pm(num(r.get("loss_mean")), num(r.get("loss_ci95"))), ok and primary == "loss" and bool(r.get("best")))]
            if has_em:
                line.append((fmt_pm(num(r.get("exact_match_mean")), num(r.get("exact_match_ci95"))),
                             ok and bool(r.get("best"))))
            else:
                line.append((fmt_ppl(num(r.get("ppl_mean"))), False))
            line.append((fmt_pm(num(r.get("token_acc_mean")), num(r.get("token_acc_ci95"))), False))
            line.append((str(r.get("status", "-")), False))
            full.append(line)

    cells_header = ["cell", "encoding", "status", "error", "params", "tokens/s", "wall s", "final val loss"]
    cells_rows = []
    for c in res["cells"]:
        err = c.get("error")
        cells_rows.append([(c["name"], False), (str(c.get("group", "-")), False), (str(c.get("status", "-")), False),
                           ("" if err in (None, "") else str(err), False), (fmt_int(num(c.get("params"))), False),
                           (fmt_int(num(c.get("tokens_per_s"))), False), (fmt_g(num(c.get("wall_s")), 4), False),
                           (fmt_g(num(c.get("final_val_loss")), 4), False)])
    metric_name = {"exact_match": "exact match", "loss": "loss in nats/token"}[primary] + " (%s)" % seeds_phrase(res)
    ranking = res.get("ranking") or {}
    rank_rows = [[(str(it.get("name")), False), (fmt_g(num(it.get("mrr")), 3), False),
                  (" ".join(str(x).rstrip("0").rstrip(".") if isinstance(x, float) else str(x) for x in it.get("ranks", [])), False)]
                 for it in ranking.get("items", [])]
    return {
        "summary": (summary_header, summary, metric_name),
        "ranking": (["encoding", "MRR", "rank in each scenario"], rank_rows),
        "full": (header, full),
        "cells": (cells_header, cells_rows),
    }


def describe(res, groups):
    unit = res.get("length_unit", "tokens")
    grid = res.get("grid") or {}
    grid_txt = "; ".join("`%s` ∈ {%s}" % (k, ", ".join(str(v) for v in vs) if isinstance(vs, list) else str(vs))
                         for k, vs in grid.items()) or "-"
    cells = res["cells"]
    counts = {}
    for c in cells:
        st = str(c.get("status", "unknown"))
        counts[st] = counts.get(st, 0) + 1
    status_txt = ", ".join("%d %s" % (n, st) for st, n in sorted(counts.items(), key=lambda kv: (kv[0] != "done", kv[0])))
    tl, tt = res.get("train_length"), train_tokens(res)
    train_txt = "%s %s" % (fmt_g(tl), unit)
    if finite(tt) and unit != "tokens":
        train_txt += " (%s model input tokens)" % fmt_g(tt)
    lengths = ", ".join("%g" % L for L in sorted(set(res["lengths"])))
    metric_txt = ("exact match (fraction of examples whose whole answer is greedily correct) and loss"
                  if has_exact_match(res) else "loss (nats/token) and perplexity")
    head = str(res.get("description") or "").strip()
    if head:
        head += ("" if head[-1] in ".!?" else ".") + " "
    if not finite(tl):  # poslab writes no metric/unit/train_length when no cell finished
        return (head + "Base config `%s`, grid %s: %d cell%s (%s). No cell finished, so there are no results yet."
                % (res.get("config", "?"), grid_txt, len(cells), "" if len(cells) == 1 else "s", status_txt or "none"))
    return head + ("Base config `%s`, grid %s: %d cell%s (%s), %d group%s by %s. "
            "Every model was trained at length %s and evaluated at lengths %s %s; the metric is %s. "
            "%s "
            "\"n/a\" marks lengths an encoding cannot represent (for example, past a learned table)."
            % (res.get("config", "?"), grid_txt, len(cells), "" if len(cells) == 1 else "s", status_txt or "none",
               len(groups), "" if len(groups) == 1 else "s",
               ", ".join("`%s`" % k for k in (res.get("group_keys") or ["group"])), train_txt, lengths, unit,
               metric_txt, noise_txt(res)))


def noise_txt(res):
    n = seed_count(res)
    if n <= 1:
        return ("One seed per cell, so there is no estimate of seed noise and no ± is shown; **bold** marks a value "
                "only where it is best by more than 0.01.")
    return ("Numbers are means ± the 95%% confidence half-width (Student t) over %d seeds; the plots show the "
            "interval as a band; **bold** marks a value only where it is best beyond both intervals." % n)


def ranking_txt(res):
    rk = res.get("ranking") or {}
    lengths = ", ".join("%g" % L for L in rk.get("lengths", []))
    return ("Mean reciprocal rank (as Kazemnejad et al. 2023 rank encodings): each encoding's rank by %s in each "
            "of %s scenario(s) (lengths %s %s%s), 1/rank averaged; ties share the better rank, n/a ranks last."
            % ("loss" if rk.get("metric") == "loss" else "exact match", rk.get("scenarios", 0), lengths,
               res.get("length_unit", ""), ", per task" if any(r.get("scenario") for r in res.get("rows", [])) else ""))


def md_escape(s):
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def md_table(header, rows):
    out = ["| " + " | ".join(md_escape(h) for h in header) + " |",
           "|" + "|".join("---" if i < 1 else "---:" if header[i] not in ("status", "error", "encoding") else "---"
                          for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(("**%s**" % md_escape(t)) if b and t not in ("", "-") else md_escape(t)
                                     for t, b in r) + " |")
    return "\n".join(out)


def write_markdown(path, res, groups, tables, images):
    name = res.get("experiment", "experiment")
    sh, srows, metric_name = tables["summary"]
    lines = ["# poslab report: %s" % name, "", describe(res, groups), "",
             "## Summary: %s by length" % metric_name, "", md_table(sh, srows), ""]
    if res.get("what_this_shows"):
        lines += ["**What this shows.** " + res["what_this_shows"], ""]
    if images:  # the headline picture right under the headline table
        lines += ["![%s](%s)" % (images[0][1], images[0][0]), ""]
    if tables["ranking"][1]:
        lines += ["### Ranking", "", ranking_txt(res), "", md_table(*tables["ranking"]), ""]
    lines += [
             "## Results", "", md_table(*tables["full"]), "",
             "## Cells", "", md_table(*tables["cells"]), "", "## Plots", ""]
    for fname, title in images[1:]:
        lines += ["### %s" % title, "", "![%s](%s)" % (title, fname), ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1150px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.5; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { margin-top: 2em; border-bottom: 1px solid #eee; padding-bottom: .2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 4px 10px; }
th { background: #f4f4f4; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fafafa; }
td.err { color: #a00; max-width: 30em; }
img { max-width: 100%; border: 1px solid #eee; }
code { background: #f4f4f4; padding: 1px 4px; border-radius: 3px; }
"""


def html_table(header, rows):
    out = ["<table>", "<tr>" + "".join("<th>%s</th>" % html.escape(h) for h in header) + "</tr>"]
    for r in rows:
        tds = []
        for i, (t, b) in enumerate(r):
            col = header[i]
            cls = "err" if col == "error" else "" if col in ("encoding", "status", "cell") else "num"
            text = html.escape(t)
            if b and t not in ("", "-"):
                text = "<b>%s</b>" % text
            tds.append("<td%s>%s</td>" % (' class="%s"' % cls if cls else "", text))
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def md_inline_to_html(s):
    """The description paragraph uses only `code` and **bold**."""
    s = html.escape(s)
    parts = s.split("`")
    s = "".join(("<code>%s</code>" % p) if i % 2 else p for i, p in enumerate(parts))
    parts = s.split("**")
    return "".join(("<b>%s</b>" % p) if i % 2 else p for i, p in enumerate(parts))


def write_html(path, results_dir, res, groups, tables, images):
    name = res.get("experiment", "experiment")
    sh, srows, metric_name = tables["summary"]
    body = ["<h1>poslab report: %s</h1>" % html.escape(str(name)),
            "<p>%s</p>" % md_inline_to_html(describe(res, groups)),
            "<h2>Summary: %s by length</h2>" % html.escape(metric_name), html_table(sh, srows)]
    if res.get("what_this_shows"):
        body.append("<p><b>What this shows.</b> %s</p>" % html.escape(res["what_this_shows"]))
    if tables["ranking"][1]:
        body += ["<h3>Ranking</h3>", "<p>%s</p>" % html.escape(ranking_txt(res)), html_table(*tables["ranking"])]
    body += ["<h2>Results</h2>", html_table(*tables["full"]),
            "<h2>Cells</h2>", html_table(*tables["cells"]), "<h2>Plots</h2>"]
    def img(fname, title):
        with open(os.path.join(results_dir, fname), "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        return '<img alt="%s" src="data:image/png;base64,%s">' % (html.escape(title), data)
    if images:  # the headline picture right under the headline table
        body.insert(body.index("<h2>Results</h2>"), img(*images[0]))
    for fname, title in images[1:]:
        body += ["<h3>%s</h3>" % html.escape(title), img(fname, title)]
    doc = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
           "<title>poslab report: %s</title>\n<style>%s</style>\n</head>\n<body>\n%s\n</body>\n</html>\n"
           % (html.escape(str(name)), CSS, "\n".join(body)))
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)


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
    colors = group_colors(groups)
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

    tables = build_tables(res, groups, table)
    p = os.path.join(results_dir, "report.md")
    write_markdown(p, res, groups, tables, IMAGES)
    written.append(p)
    p = os.path.join(results_dir, "report.html")
    write_html(p, results_dir, res, groups, tables, IMAGES)
    written.append(p)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
