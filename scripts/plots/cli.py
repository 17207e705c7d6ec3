"""Command line of the plots package.

  python3 scripts/plots pe PE.json OUT.png
  python3 scripts/plots attention ATTENTION.json STATS.png MAPS.png
  python3 scripts/plots probe PROBE.json OUT.png
  python3 scripts/plots compare-attention RESULTS_DIR [OUT.png]     (default RESULTS_DIR/attention.png)

Exit status: 0 written, 2 unreadable or malformed input (one line naming the file).
"""

import argparse
import json
import os
import sys


class InputError(Exception):
    pass


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise InputError("%s: no such file" % path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError("%s: %s" % (path, e))


def require(data, path, keys):
    if not isinstance(data, dict) or any(k not in data for k in keys):
        raise InputError("%s: expected a JSON object with %s" % (path, ", ".join('"%s"' % k for k in keys)))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plots", description="Draw poslab's pictures from its JSON.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pe", help="an encoding, from `poslab pe --format json` plus plot keys")
    p.add_argument("input")
    p.add_argument("output")
    p = sub.add_parser("attention", help="a run's attention.json: statistics and maps")
    p.add_argument("input")
    p.add_argument("stats_png")
    p.add_argument("maps_png")
    p = sub.add_parser("probe", help="a run's probe-TASK.json: the depth x length heat map")
    p.add_argument("input")
    p.add_argument("output")
    p = sub.add_parser("compare-attention", help="a compare results directory's attention summary")
    p.add_argument("results_dir")
    p.add_argument("output", nargs="?")
    args = ap.parse_args(argv)
    try:
        if args.command == "pe":
            from plots import encodings
            data = read_json(args.input)
            require(data, args.input, ["kind", "family", "positions", "dim"])
            encodings.plot_pe(data, args.output)
        elif args.command == "attention":
            from plots import attention
            data = read_json(args.input)
            require(data, args.input, ["lengths", "n_layer", "n_head"])
            attention.plot_stats(data, args.stats_png)
            attention.plot_maps(data, args.maps_png)
        elif args.command == "probe":
            from plots import probes
            data = read_json(args.input)
            require(data, args.input, ["task", "results", "train_length"])
            probes.plot_probe(data, args.output)
        else:
            from plots import attention, style
            res_path = os.path.join(args.results_dir, "results.json")
            res = read_json(res_path)
            require(res, res_path, ["cells"])
            groups = []
            for c in res["cells"]:
                if str(c.get("group")) not in groups:
                    groups.append(str(c.get("group")))
            out = args.output or os.path.join(args.results_dir, "attention.png")
            cells = attention.load_cell_attention(args.results_dir, res)
            if attention.plot_compare(cells, groups, style.group_colors(groups), out, res.get("experiment", "experiment")):
                print(out)
            else:
                sys.stderr.write("plots: no cell has an attention.json; nothing drawn\n")
    except InputError as e:
        sys.stderr.write("plots: %s\n" % e)
        return 2
    return 0
