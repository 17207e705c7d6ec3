#!/usr/bin/env python3
"""A results table in the docs, written from a `poslab compare` run's results.json, so the docs say
what the binary printed.

    readme_table.py print RESULTS_JSON                  # the table (markdown) and its ranking line
    readme_table.py write DOC NAME RESULTS_JSON         # replace the block NAME in DOC; keep a copy of the
                                                        # results beside it (docs/results/NAME.json)
    readme_table.py check DOC NAME                      # DOC's block NAME equals the table from its saved results

A block is the text between `<!-- table NAME: ... -->` and `<!-- end table NAME -->` in DOC. Columns: the
loss (nats/token, 3 decimals, bold where the report marks it best; with several seeds their mean and the
t-based 95% half-width across seeds) at each evaluation length, and the last length minus the first (of
the means); the ranking line is the report's mean reciprocal rank.
Exit status: 0 ok, 1 check found a difference (printed), 2 bad input.
"""

import json
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print("readme_table.py: error: " + message, file=sys.stderr)
    sys.exit(2)


def table(res):
    """The markdown table and ranking line of one results.json (loss only, one row per group)."""
    lengths = sorted(res["lengths"])
    groups = []
    cell = {}
    for r in res["rows"]:
        if r["group"] not in groups:
            groups.append(r["group"])
        cell[(r["group"], r["length"])] = r
    first, last = lengths[0], lengths[-1]
    lines = ["| encoding | " + " | ".join(str(L) for L in lengths) + " | %d minus %d |" % (last, first),
             "|---|" + "---|" * (len(lengths) + 1)]
    for g in groups:
        values = []
        for L in lengths:
            r = cell.get((g, L))
            if r is None or r.get("loss_mean") is None:
                values.append("n/a")
            else:
                text = "%.3f" % r["loss_mean"]
                if (r.get("n") or 1) > 1 and r.get("loss_ci95") is not None:
                    text += " ± %.3f" % r["loss_ci95"]  # t-based 95% half-width across seeds
                values.append("**%s**" % text if r.get("best") else text)
        a, b = cell.get((g, first)), cell.get((g, last))
        both = a and b and a.get("loss_mean") is not None and b.get("loss_mean") is not None
        diff = "%+.2f" % (round(b["loss_mean"], 3) - round(a["loss_mean"], 3)) if both else "n/a"
        lines.append("| %s | %s | %s |" % (g, " | ".join(values), diff.replace("-0.00", "+0.00")))
    rk = res.get("ranking") or {}
    if rk.get("items"):
        span = rk["lengths"]
        where = ("%d-%d" % (span[0], span[-1]) if len(span) > 1 else "%d" % span[0]) + " " + res.get("length_unit", "tokens")
        items = ", ".join("%s %.2f" % (it["name"], it["mrr"]) for it in rk["items"] if it.get("mrr") is not None)
        lines += ["", "Ranking by mean reciprocal rank over %s: %s." % (where, items)]
    lines += retrieval_table(res)
    return "\n".join(lines)


def retrieval_table(res):
    """With a passkey probe: exact match by length (depths pooled, [Wilson 95%]) and the effective length."""
    pk = (res.get("probes") or {}).get("passkey")
    if not pk:
        return []
    lengths = sorted({l["length"] for g in pk["groups"] for l in g["lengths"]})
    train = pk["train_length"]
    out = ["", "Passkey retrieval, exact match (%d-digit keys, %s filler, depths pooled, [Wilson 95%%]):" % (pk["digits"], pk["haystack"]),
           "", "| encoding | " + " | ".join(str(L) for L in lengths) + " | effective length |",
           "|---|" + "---|" * (len(lengths) + 1)]
    for g in pk["groups"]:
        values = []
        for L in lengths:
            l = next((x for x in g["lengths"] if x["length"] == L), None)
            if l is None or l.get("exact_mean") is None:
                values.append("n/a")
            else:
                text = "%.2f [%.2f, %.2f]" % (l["exact_mean"], l["exact_low"], l["exact_high"])
                values.append("**%s**" % text if l["exact_low"] >= pk["threshold"] else text)
        eff = g["effective_length_min"]
        out.append("| %s | %s | %s |" % (g["group"], " | ".join(values), "%d (%gx)" % (eff, eff / train) if eff else "none"))
    out += ["", "Ranking by retrieval (effective length, then exact match past %d tokens, then at it): %s." %
            (train, ", ".join(r["name"] for r in pk["ranking"]))]
    return out


def block(text, name):
    m = re.search(r"(<!-- table %s: [^\n]*-->\n)(.*?)(<!-- end table %s -->)" % (re.escape(name), re.escape(name)),
                  text, re.S)
    if not m:
        fail("no block '<!-- table %s: ... -->' ... '<!-- end table %s -->'" % (name, name))
    return m


def saved_path(name):
    return os.path.join(ROOT, "docs", "results", name + ".json")


def load(path):
    try:
        with open(path) as f:
            res = json.load(f)
        res["rows"], res["lengths"]  # noqa: B018 (the fields the table needs)
        return res
    except (OSError, ValueError, KeyError) as e:
        fail("%s: not a poslab results.json (%s)" % (path, e))


def main(argv):
    if len(argv) >= 2 and argv[0] == "print":
        print(table(load(argv[1])))
        return 0
    if len(argv) == 4 and argv[0] == "write":
        doc, name, results = argv[1:]
        res = load(results)
        text = open(doc).read()
        m = block(text, name)
        text = text[:m.start(2)] + table(res) + "\n" + text[m.end(2):]
        os.makedirs(os.path.dirname(saved_path(name)), exist_ok=True)
        if not os.path.exists(saved_path(name)) or not os.path.samefile(results, saved_path(name)):
            shutil.copyfile(results, saved_path(name))  # rewriting from the saved copy itself is fine
        with open(doc, "w") as f:
            f.write(text)
        return 0
    if len(argv) == 3 and argv[0] == "check":
        doc, name = argv[1:]
        if not os.path.exists(saved_path(name)):
            fail("%s: missing; write the table from a run first (readme_table.py write %s %s RUN/results.json)"
                 % (os.path.relpath(saved_path(name), ROOT), doc, name))
        want = table(load(saved_path(name))).strip()
        have = block(open(doc).read(), name).group(2).strip()
        if have != want:
            print("%s: table %s differs from %s:\n--- in the doc\n%s\n--- from the results\n%s"
                  % (doc, name, os.path.relpath(saved_path(name), ROOT), have, want))
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
