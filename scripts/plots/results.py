"""Reading a `poslab compare` results directory: results.json, and each cell's metrics and eval.

Shared by the report's plots (plots.report) and its tables (plots.report_text).
"""

import json
import os
import sys

from plots.style import finite, num


class InputError(Exception):
    pass


def warn(msg):
    sys.stderr.write("plot_report: warning: %s\n" % msg)


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


def seed_count(res):
    return int(num(res.get("seeds")) if finite(res.get("seeds")) else
               max([int(num(r.get("n"))) for r in res.get("rows", []) if finite(r.get("n"))] or [0]))


def seeds_phrase(res):
    n = seed_count(res)
    return "1 seed" if n <= 1 else "mean ± 95%% interval over %d seeds" % n


def item_label(res):
    """What the groups compare: the encoding, or an evaluation variant (eval_grid), or a grid key."""
    key = (res.get("ranking") or {}).get("item_key") or "model.pos_encoding.kind"
    return {"model.pos_encoding.kind": "encoding", "eval": "evaluation variant"}.get(key, key.rsplit(".", 1)[-1])
