"""The report's sentences on hand-made results: an eval grid says how many models trained and how
many results they gave, the first column is named after what the rows compare, the experiment file
is called what it is, the ranking's fallback note is a whole sentence, the scenarios are named by
their keys even where a value holds ", ", and the machines that trained the cells are named.
usage: report_text_check.py SCRIPTS_DIR"""
import sys

sys.path.insert(0, sys.argv[1])
from plots import report_text  # noqa: E402

cells = [{"name": "kind=rope@%s" % v, "dir": "cells/kind=rope", "group": v, "status": "done"} for v in ("none", "yarn", "ntk")]
cells += [{"name": "kind=rope_seed=2@%s" % v, "dir": "cells/kind=rope_seed=2", "group": v, "status": "done"}
          for v in ("none", "yarn", "ntk")]
res = {"experiment": "rope-scaling", "config": "configs/experiments/rope-scaling.json", "grid": {"seed": [1, 2]},
       "group_keys": ["eval"], "eval_grid": {"none": [], "yarn": [], "ntk": []}, "lengths": [64, 128],
       "length_unit": "tokens", "train_length": 64, "metric": "loss", "seeds": 2, "cells": cells, "rows": [],
       "ranking": {"metric": "exact_match", "scenarios": 1, "lengths": [128], "items": [],
                   "fallback": "exact match is 0.000 for every configuration past the training length, so the "
                               "ranking is by loss"}}
text = report_text.describe(res, ["none", "yarn", "ntk"])
assert "2 trained models, each evaluated 3 ways: 6 cells" in text, text
assert "Experiment `configs/experiments/rope-scaling.json`" in text and "Base config" not in text, text
assert report_text.group_label(res) == "evaluation"
tables = report_text.build_tables(res, ["none", "yarn", "ntk"], {})
assert tables["summary"][0][0] == "evaluation" and tables["full"][0][0] == "evaluation", tables["summary"][0]
res["group_keys"] = ["model.pos_encoding.kind"]
assert report_text.group_label(res) == "encoding"
note = report_text.ranking_txt(res)
assert note.endswith(" (Exact match is 0.000 for every configuration past the training length, so the ranking is "
                     "by loss.)"), note
# A probe that failed on a cell is said first, naming the cell: its seed is missing from the retrieval rows.
res["probe_errors"] = [{"cell": "kind=rope_seed=1", "task": "passkey", "error": "checkpoint.pt: truncated"}]
text = report_text.describe(res, ["none", "yarn", "ntk"])
assert text.startswith("**1 probe failed**, so that cell is missing from the retrieval numbers below: "
                       "`kind=rope_seed=1` (passkey): checkpoint.pt: truncated. "), text
del res["probe_errors"]
res["rows"] = [{"item": "rope", "scenario": "path=data/a, b.txt, learning_rate=0.001"}]
res["scenario_keys"] = ["learning_rate", "path"]
assert report_text.scenarios_txt(res) == ", per learning_rate and path", report_text.scenarios_txt(res)
# Grid values as the experiment file writes them (JSON): true, not Python's True; strings bare.
res["grid"] = {"model.bias": [True, False], "model.pos_encoding.kind": ["rope", "alibi"], "train.learning_rate": [0.001]}
text = report_text.describe(res, ["none", "yarn", "ntk"])
assert "`model.bias` ∈ {true, false}" in text and "`model.pos_encoding.kind` ∈ {rope, alibi}" in text, text
assert "True" not in text and "`train.learning_rate` ∈ {0.001}" in text, text
# The machines that trained the cells: one named in a sentence; several named each with their count of cells.
res["machines"] = [{"device": "cpu", "precision": "fp32", "cpu": "AMD EPYC (AuthenticAMD family 25 model 1)", "cells": 6}]
text = report_text.describe(res, ["none", "yarn", "ntk"])
assert text.endswith(" Trained with fp32 on the CPU AMD EPYC (AuthenticAMD family 25 model 1)."), text
res["machines"].append({"device": "cuda", "precision": "bf16", "cpu": "Intel Xeon", "gpu": "NVIDIA H200 (143771 MB, "
                        "compute capability 9.0)", "cells": 1})
text = report_text.describe(res, ["none", "yarn", "ntk"])
assert text.endswith(" Trained on 2 machines, whose numbers and speeds differ (precision, kernels): fp32 on the CPU "
                     "AMD EPYC (AuthenticAMD family 25 model 1) (6 cells); bf16 autocast on the GPU NVIDIA H200 (143771 "
                     "MB, compute capability 9.0) (host CPU Intel Xeon) (1 cell)."), text
res["machines"][1]["gpu"] = None  # a GPU run without a recorded name
assert "bf16 autocast on a CUDA GPU (host CPU Intel Xeon) (1 cell)." in report_text.describe(res, ["none"]), res
# One machine in two precisions (a grid over train.precision) is one machine, named once with each precision's cells.
amd = {"device": "cpu", "cpu": "AMD EPYC (AuthenticAMD family 25 model 1)"}
res["machines"] = [dict(amd, precision="bf16", cells=3), dict(amd, precision="fp32", cells=2)]
text = report_text.describe(res, ["none"])
assert text.endswith(" Trained on one machine, the CPU AMD EPYC (AuthenticAMD family 25 model 1), in 2 precisions, "
                     "whose numbers and speeds differ: bf16 autocast (3 cells); fp32 (2 cells)."), text
# Two CPUs, one of them in two precisions: two machines, three entries.
res["machines"].append({"device": "cpu", "precision": "fp32", "cpu": "Intel Xeon", "cells": 1})
text = report_text.describe(res, ["none"])
assert " Trained on 2 machines, whose numbers and speeds differ (precision, kernels): bf16 autocast on the CPU AMD " in text, text
assert text.endswith("; fp32 on the CPU Intel Xeon (1 cell)."), text
res["machines"] = []  # results.json written before machines were recorded: nothing said
assert "Trained" not in report_text.describe(res, ["none", "yarn", "ntk"])
# Cells that ran under 80% of the time they were ready to (summary.json's core_share) are named with their
# share; a cell near a whole core, or without the figure, is not.
res["cells"] = [{"name": "a", "threads": 1, "core_share": 0.46}, {"name": "b", "threads": 1, "core_share": 0.95},
                {"name": "c", "threads": 2, "core_share": 0.5}, {"name": "d", "threads": 1, "core_share": None},
                {"name": "e", "threads": 1, "core_share": 0.799}, {"name": "f", "threads": 1}]
note = report_text.shared_cores_txt(res)
assert "(a 46%, c 50%, e 80%)" in note and "these cells" in note, note
res["cells"] = [res["cells"][i] for i in (1, 3, 5)]
assert report_text.shared_cores_txt(res) == "", report_text.shared_cores_txt(res)
res["cells"] = [{"name": "a", "threads": 1, "core_share": 0.5}]
assert report_text.shared_cores_txt(res).startswith("The tokens/s of this cell is not its encoding's speed: it ran "
                                                    "only part of the time it could (a 50%)"), res
print("ok: report sentences")
