#!/usr/bin/env python3
"""Whether two `poslab compare` runs' results.json say the same thing: every loss, score, interval, ranking
and sentence equal to the last digit, everything but what measures the machine (time, speed, the CPU's
name, the config's path) compared.

    results_diff.py SAVED NEW     # exit 0: the same; 1: the differences, one line each (the first 20); 2: bad input

scripts/check_main_job.sh uses it to hold docs/results/main-job.json (the README's numbers) to what the code
produces now.
"""

import json
import sys

# What a run measures of its machine, not of the models: left out of the comparison.
MACHINE_KEYS = {
    "": {"config"},                                 # the path the experiment was read from
    "cells[]": {"core_share", "cpu", "tokens_per_s", "wall_s"},
    "machines[]": {"cpu"},
    "rows[]": {"tokens_per_s_mean", "wall_s_mean"},
}
SHOWN = 20


def fail(message):
    print("results_diff.py: error: " + message, file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON ({e})")


def diff(saved, new, path, kind, out):
    """Appends one line per difference under path; kind is the path with list indices as []."""
    if isinstance(saved, dict) and isinstance(new, dict):
        skip = MACHINE_KEYS.get(kind, set())
        for key in sorted(set(saved) | set(new)):
            if key in skip:
                continue
            where = f"{path}.{key}" if path else key
            if key not in new:
                out.append(f"{where}: in the saved run only")
            elif key not in saved:
                out.append(f"{where}: in the new run only")
            else:
                diff(saved[key], new[key], where, f"{kind}.{key}" if kind else key, out)
    elif isinstance(saved, list) and isinstance(new, list):
        if len(saved) != len(new):
            out.append(f"{path}: {len(saved)} entries saved, {len(new)} new")
            return
        for i, (a, b) in enumerate(zip(saved, new)):
            # A cell or row is named by what identifies it, so that a difference says which.
            name = (a.get("name") or a.get("group")) if isinstance(a, dict) else None
            label = f"{i}" if name is None else f"{i} {name}"
            if isinstance(a, dict) and "length" in a:
                label += f" @{a['length']}"
            diff(a, b, f"{path}[{label}]", f"{kind}[]", out)
    elif saved != new or type(saved) is not type(new):
        out.append(f"{path}: {json.dumps(saved)} saved, {json.dumps(new)} new")


def main(argv):
    if len(argv) != 3:
        print("usage: results_diff.py SAVED_RESULTS_JSON NEW_RESULTS_JSON", file=sys.stderr)
        return 2
    saved, new = load(argv[1]), load(argv[2])
    if not isinstance(saved, dict) or not isinstance(new, dict):
        fail("both files must hold a compare run's results.json (a JSON object)")
    out = []
    diff(saved, new, "", "", out)
    if not out:
        print(f"results_diff.py: {argv[2]} says what {argv[1]} says (time, speed and the CPU's name aside)")
        return 0
    print(f"results_diff.py: {len(out)} difference(s) between {argv[1]} (saved) and {argv[2]} (new):")
    for line in out[:SHOWN]:
        print("  " + line)
    if len(out) > SHOWN:
        print(f"  ... and {len(out) - SHOWN} more")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
