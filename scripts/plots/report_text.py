"""The written part of the compare report: results tables, report.md and report.html.

Tables are (header, rows) with each cell (text, bold); markdown and HTML render the same tables.
"""

import base64
import html
import json
import os

from plots.results import has_exact_match, is_ok, seed_count, seeds_phrase, train_tokens
from plots.style import finite, fmt_g, num, write_text

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


def fmt_int(v):
    return "{:,}".format(int(round(v))) if finite(v) else "-"


def group_label(res):
    """What a row's group is: the encoding, an evaluation variant, or the grid keys that form it."""
    keys = [k for k in (res.get("group_keys") or []) if k != "seed"]
    if keys == ["model.pos_encoding.kind"]:
        return "encoding"
    if keys == ["eval"]:
        return "evaluation"
    return ", ".join(k.rsplit(".", 1)[-1] for k in keys) or "group"


def build_tables(res, groups, table):
    """Tables as (header, rows) where each cell is (text, bold)."""
    label = group_label(res)
    lengths = sorted(set(res["lengths"]) | {L for g in table for L in table[g]})
    unit = res.get("length_unit", "tokens")
    has_em = has_exact_match(res)
    primary = "exact_match" if has_em else "loss"

    summary_header = [label] + ["%g %s" % (L, unit) for L in lengths]
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
    header = [label, "length (%s)" % unit] + (["tokens"] if show_tokens else []) + ["n", "loss"]
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

    cells_header = ["cell", label, "status", "error", "params", "tokens/s", "wall s", "final val loss"]
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
    retrieval = None
    if res.get("probes"):
        from plots import report_probes
        task = report_probes.main_task(res)
        retrieval = report_probes.retrieval_table(res, groups, task) + (report_probes.retrieval_txt(res, task),)
    return {
        "retrieval": retrieval,
        "summary": (summary_header, summary, metric_name),
        "ranking": ([label, "MRR", "rank in each scenario"], rank_rows),
        "full": (header, full),
        "cells": (cells_header, cells_rows),
    }


def describe(res, groups):
    unit = res.get("length_unit", "tokens")
    grid = res.get("grid") or {}
    def value(v):  # as the experiment file writes it: true, not Python's True; strings bare
        return v if isinstance(v, str) else json.dumps(v)
    grid_txt = "; ".join("`%s` ∈ {%s}" % (k, ", ".join(value(v) for v in vs) if isinstance(vs, list) else value(vs))
                         for k, vs in grid.items()) or "-"
    cells = res["cells"]
    # With an eval grid every (trained model, variant) pair is a cell of the results: say both numbers.
    models = len({c.get("dir") for c in cells})
    variants = len(res.get("eval_grid") or {})
    cells_txt = "%d cell%s" % (len(cells), "" if len(cells) == 1 else "s")
    if variants:
        cells_txt = "%d trained model%s, each evaluated %d way%s: %s" % (
            models, "" if models == 1 else "s", variants, "" if variants == 1 else "s", cells_txt)
    counts = {}
    for c in cells:
        st = str(c.get("status", "unknown"))
        counts[st] = counts.get(st, 0) + 1
    status_txt = ", ".join("%d %s" % (n, st) for st, n in sorted(counts.items(), key=lambda kv: (kv[0] != "done", kv[0])))
    tl, tt = res.get("train_length"), train_tokens(res)
    train_txt = "length %s %s" % (fmt_g(tl), unit)
    trained = res.get("train_lengths") or []
    if len(trained) > 1:  # a grid over block_size: no one training length
        train_txt = "lengths %s %s (past training: past the longest, %s)" % (
            ", ".join(fmt_g(L) for L in trained[:-1]) + " and " + fmt_g(trained[-1]), unit, fmt_g(tl))
    if finite(tt) and unit != "tokens" and len(trained) <= 1:
        train_txt += " (%s model input tokens)" % fmt_g(tt)
    lengths = ", ".join("%g" % L for L in sorted(set(res["lengths"])))
    metric_txt = ("exact match (fraction of examples whose whole answer is greedily correct) and loss"
                  if has_exact_match(res) else "loss (nats/token) and perplexity")
    head = str(res.get("description") or "").strip()
    if head:
        head += ("" if head[-1] in ".!?" else ".") + " "
    if not finite(tl):  # poslab writes no metric/unit/train_length when no cell finished
        return (head + "Experiment `%s`, grid %s: %s (%s). No cell finished, so there are no results yet."
                % (res.get("config", "?"), grid_txt, cells_txt, status_txt or "none"))
    return head + probe_failures_txt(res) + ("Experiment `%s`, grid %s: %s (%s), %d group%s by %s. "
            "Every model was trained at %s and evaluated at lengths %s %s; the metric is %s. "
            "%s "
            "\"n/a\" marks lengths an encoding cannot represent (for example, past a learned table)."
            % (res.get("config", "?"), grid_txt, cells_txt, status_txt or "none",
               len(groups), "" if len(groups) == 1 else "s",
               ", ".join("`%s`" % k for k in (res.get("group_keys") or ["group"])), train_txt, lengths, unit,
               metric_txt, noise_txt(res))) + machines_txt(res)


def precision_txt(m):
    return {"bf16": "bf16 autocast", "fp32": "fp32"}.get(m.get("precision"), "unknown precision")


def hardware_txt(m):
    """Where one machine of results.json's "machines" ran, as summary.json records it: its CPU, or its GPU."""
    cpu = m.get("cpu") or "an unrecorded CPU"
    if m.get("device") == "cuda":
        return "%s (host CPU %s)" % ("the GPU " + m["gpu"] if m.get("gpu") else "a CUDA GPU", cpu)
    return "the CPU %s" % cpu


def machine_txt(m):
    """One machine of results.json's "machines": precision, device, CPU and GPU, as summary.json records them."""
    return "%s on %s" % (precision_txt(m), hardware_txt(m))


def machines_txt(res):
    """Which machines trained the cells: bf16 or fp32 and other kernels give other numbers (and speeds). An entry
    of "machines" is a machine in one precision: one machine in two precisions (a grid over train.precision) is
    said as one machine."""
    machines = res.get("machines") or []
    if not machines:
        return ""
    if len(machines) == 1:
        return " Trained with %s." % machine_txt(machines[0])
    def cells(m):
        return "%d cell%s" % (m.get("cells", 0), "" if m.get("cells", 0) == 1 else "s")
    hardware = {(m.get("device"), m.get("cpu"), m.get("gpu")) for m in machines}
    if len(hardware) == 1:
        return (" Trained on one machine, %s, in %d precisions, whose numbers and speeds differ: %s." % (
            hardware_txt(machines[0]), len(machines),
            "; ".join("%s (%s)" % (precision_txt(m), cells(m)) for m in machines)))
    return (" Trained on %d machines, whose numbers and speeds differ (precision, kernels): %s." % (
        len(hardware), "; ".join("%s (%s)" % (machine_txt(m), cells(m)) for m in machines)))


def probe_failures_txt(res):
    """Probes that failed on trained cells: their seeds are missing from the retrieval numbers, which would
    otherwise read as if every seed were in them."""
    errors = res.get("probe_errors") or []
    if not errors:
        return ""
    each = "; ".join("`%s` (%s): %s" % (e.get("cell"), e.get("task"), str(e.get("error", "")).rstrip(".")) for e in errors)
    return ("**%d probe%s failed**, so %s cell%s missing from the retrieval numbers below: %s. "
            % (len(errors), "" if len(errors) == 1 else "s", "that" if len(errors) == 1 else "those",
               " is" if len(errors) == 1 else "s are", each))


def noise_txt(res):
    n = seed_count(res)
    if n <= 1:
        return ("One seed per cell, so there is no estimate of seed noise and no ± is shown; **bold** marks a value "
                "only where it is best by more than 0.01.")
    return ("Numbers are means ± the 95%% confidence half-width (Student t) over %d seeds; the plots show the "
            "interval as a band; **bold** marks a value only where it is best beyond both intervals." % n)


def shared_cores_txt(res):
    """The cells that ran less than 80% of the time they were ready to (summary.json's core_share): other work
    shared their cores, so their tokens/s is not their encoding's speed. "" when none."""
    shared = [c for c in res.get("cells", []) if finite(num(c.get("core_share"))) and num(c.get("core_share")) < 0.8]
    if not shared:
        return ""
    one = len(shared) == 1
    return ("The tokens/s of %s is not %s encoding's speed: %s ran only part of the time %s could (%s), with other work "
            "beside %s (another process on the machine, or compare's last cells, which run one beyond --jobs; "
            "a cell's results are the same either way)." % (
                "this cell" if one else "these cells", "its" if one else "their", "it" if one else "they",
                "it" if one else "they", ", ".join("%s %d%%" % (c["name"], round(100 * num(c["core_share"]))) for c in shared),
                "it" if one else "them"))


def ranking_txt(res):
    rk = res.get("ranking") or {}
    lengths = ", ".join("%g" % L for L in rk.get("lengths", []))
    n = rk.get("scenarios", 0)
    # A scenario is a length under one setting of the other grid keys; with none varied, it is a length.
    where = ("in each of %s scenarios (lengths %s %s%s)" % (n, lengths, res.get("length_unit", ""), scenarios_txt(res))
             if rk.get("settings", 1) > 1 or scenarios_txt(res) else
             "at each of %s length%s (%s %s)" % (n, "" if n == 1 else "s", lengths, res.get("length_unit", "")))
    return ("Mean reciprocal rank (as Kazemnejad et al. 2023 rank encodings): each encoding's rank by %s %s, "
            "1/rank averaged; ties share the better rank, n/a ranks last."
            % ("loss" if rk.get("metric") == "loss" else "exact match", where)
            + (" (%s.)" % (rk["fallback"][0].upper() + rk["fallback"][1:]) if rk.get("fallback") else ""))


def scenarios_txt(res):
    """What a scenario is beside a length: a task, an evaluation variant, or whatever else the grid varies."""
    keys = res.get("scenario_keys")
    if keys is None:  # results.json written before it named them: values holding ", " split wrongly here
        keys = {k.split("=")[0].strip() for r in res.get("rows", []) for k in str(r.get("scenario") or "").split(", ") if k}
    if not keys:
        return ""
    return ", per " + " and ".join(sorted(keys))


def text_columns(header):
    """Leading columns that hold names, not numbers: the group (after the cell's name in the cells table)."""
    return 2 if header and header[0] == "cell" else 1


def md_escape(s):
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def md_table(header, rows):
    out = ["| " + " | ".join(md_escape(h) for h in header) + " |",
           "|" + "|".join("---" if i < text_columns(header) else "---:" if header[i] not in ("status", "error") else "---"
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
    if tables["retrieval"]:
        rh, rrows, rtxt = tables["retrieval"]
        lines += ["## Beside it: retrieval by length", "", rtxt, "", md_table(rh, rrows), ""]
    if res.get("what_this_shows"):
        lines += ["**What this shows.** " + res["what_this_shows"], ""]
    if images:  # the headline pictures right under the headline tables
        lines += ["![%s](%s)" % (images[0][1], images[0][0]), ""]
        if tables["retrieval"] and len(images) > 1:
            lines += ["![%s](%s)" % (images[1][1], images[1][0]), ""]
    if tables["ranking"][1]:
        lines += ["### Ranking", "", ranking_txt(res), "", md_table(*tables["ranking"]), ""]
    lines += [
             "## Results", "", md_table(*tables["full"]), "",
             "## Cells", "", md_table(*tables["cells"]), ""]
    if shared_cores_txt(res):
        lines += [shared_cores_txt(res), ""]
    lines += ["## Plots", ""]
    for fname, title in images[2 if tables["retrieval"] else 1:]:
        lines += ["### %s" % title, "", "![%s](%s)" % (title, fname), ""]
    write_text(path, "\n".join(lines))


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
            cls = "err" if col == "error" else "" if i < text_columns(header) or col == "status" else "num"
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
    if tables["retrieval"]:
        rh, rrows, rtxt = tables["retrieval"]
        body += ["<h2>Beside it: retrieval by length</h2>", "<p>%s</p>" % html.escape(rtxt), html_table(rh, rrows)]
    if res.get("what_this_shows"):
        body.append("<p><b>What this shows.</b> %s</p>" % html.escape(res["what_this_shows"]))
    if tables["ranking"][1]:
        body += ["<h3>Ranking</h3>", "<p>%s</p>" % html.escape(ranking_txt(res)), html_table(*tables["ranking"])]
    body += ["<h2>Results</h2>", html_table(*tables["full"]),
            "<h2>Cells</h2>", html_table(*tables["cells"])]
    if shared_cores_txt(res):
        body.append("<p>%s</p>" % html.escape(shared_cores_txt(res)))
    body.append("<h2>Plots</h2>")
    def img(fname, title):
        with open(os.path.join(results_dir, fname), "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        return '<img alt="%s" src="data:image/png;base64,%s">' % (html.escape(title), data)
    headline = images[:2] if tables["retrieval"] else images[:1]
    for k, im in enumerate(headline):  # the headline pictures right under the headline tables
        body.insert(body.index("<h2>Results</h2>"), img(*im))
    for fname, title in images[len(headline):]:
        body += ["<h3>%s</h3>" % html.escape(title), img(fname, title)]
    doc = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
           "<title>poslab report: %s</title>\n<style>%s</style>\n</head>\n<body>\n%s\n</body>\n</html>\n"
           % (html.escape(str(name)), CSS, "\n".join(body)))
    write_text(path, doc)
