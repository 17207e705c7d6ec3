"""results.csv against results.json (both written by `poslab compare`): RFC 4180 as Python's csv reads
it, one header naming the documented fields (docs/outputs.md) in order, one record per row of
results.json with every value equal to the JSON's, and no field of a JSON row left out.
usage: check_results_csv.py OUT_DIR DOCS_OUTPUTS_MD"""
import csv
import json
import re
import sys

out, doc = sys.argv[1], sys.argv[2]
# The documented fields: the backquoted names in the table under "### results.csv".
text = open(doc).read()
section = text.split("### results.csv", 1)[1].split("\n#", 1)[0]
documented = re.findall(r"^\| `([a-z0-9_]+)` \|", section, re.M)
assert documented, "docs/outputs.md lists the results.csv fields"

raw = open(f"{out}/results.csv", newline="").read()
assert raw.endswith("\r\n") and "\n" not in raw.replace("\r\n", ""), "CRLF record ends only"
records = list(csv.reader(open(f"{out}/results.csv", newline=""), strict=True))
header, body = records[0], records[1:]
assert header == documented, (header, documented)
assert all(len(r) == len(header) for r in records), "the same field count on every record"
rows = json.load(open(f"{out}/results.json"))["rows"]
assert len(body) == len(rows) > 0, (len(body), len(rows))
for record, row in zip(body, rows):
    assert set(row) == set(header), ("JSON row fields not in the CSV", set(row) ^ set(header))
    for name, text in zip(header, record):
        want = row[name]
        if want is None:
            assert text == "", (name, text)
        elif isinstance(want, bool):
            assert text == ("true" if want else "false"), (name, text, want)
        elif isinstance(want, (int, float)):
            assert float(text) == want and text != "-0", (name, text, want)
        else:
            assert text == want, (name, text, want)
# params is a count: an integer in the file, the one every done cell of the row's group has (empty where
# none is done; such a row is failed or missing, and every group has a row at every length).
cells = json.load(open(f"{out}/results.json"))["cells"]
for record, row in zip(body, rows):
    text = record[header.index("params")]
    counts = {c["params"] for c in cells if c["group"] == row["group"] and c["status"] == "done"}
    if not counts:
        failed = any(c["group"] == row["group"] and c["status"] == "failed" for c in cells)
        assert text == "" and row["status"] == ("failed" if failed else "missing"), ("no cell done", text, row["status"])
        continue
    assert re.fullmatch(r"[0-9]+", text) and counts == {int(text)}, ("params", text, counts)
groups = {c["group"] for c in cells}
lengths = json.load(open(f"{out}/results.json"))["lengths"]
assert {(r["group"], r["length"]) for r in rows} == {(g, L) for g in groups for L in lengths}, "a row per group and length"
# Strings are quoted in the file itself (a group holding a comma or a quote stays one field).
for line, row in zip(raw.split("\r\n")[1:], rows):
    assert line.startswith('"' + row["group"].replace('"', '""') + '",'), line
print(f"ok: {len(body)} records of {len(header)} fields")
