"""`poslab pe --format csv` against `--format json` of the same encoding: RFC 4180 as Python's csv reads
it (one header, five fields on every record, no comment lines, no "-0"), every tensor of the JSON present
with every value equal, and nothing else.
usage: check_pe_csv.py CSV_FILE JSON_FILE"""
import csv
import json
import math
import sys

csv_path, json_path = sys.argv[1], sys.argv[2]
raw = open(csv_path, newline="").read()
assert raw.endswith("\r\n"), "records end in CRLF"
assert not any(line.startswith("#") for line in raw.split("\r\n")), "no comment lines"
rows = list(csv.reader(open(csv_path, newline=""), strict=True))
assert rows[0] == ["tensor", "dim0", "dim1", "dim2", "value"], rows[0]
assert all(len(r) == 5 for r in rows), "five fields on every record"
data = json.load(open(json_path))
tensors = {}
for name, d0, d1, d2, value in rows[1:]:
    assert value != "-0", "no negative zero"
    idx = tuple(int(d) for d in (d0, d1, d2) if d != "")
    assert (d0, d1, d2)[len(idx):] == ("",) * (3 - len(idx)), "indices fill dim0 first"
    tensors.setdefault(name, {})[idx] = float(value)


def flatten(v, prefix=()):
    if isinstance(v, list):
        for i, x in enumerate(v):
            yield from flatten(x, prefix + (i,))
    else:
        yield prefix, v


# Everything but the description is a tensor ("positions" is the count N, unless --randomize printed
# the positions themselves under that name).
meta = {"kind", "family", "dim"} | ({"positions"} if not isinstance(data.get("positions"), list) else set())
expected = {k: dict(flatten(v)) for k, v in data.items() if k not in meta}
assert set(tensors) == set(expected), (sorted(tensors), sorted(expected))
for name, values in expected.items():
    got = tensors[name]
    assert set(got) == set(values), f"{name}: indices differ"
    for idx, want in values.items():
        have = got[idx]
        if want is None:  # JSON writes non-finite values as null
            assert not math.isfinite(have), (name, idx, have)
        else:
            assert math.isclose(have, want, rel_tol=1e-7, abs_tol=1e-12), (name, idx, have, want)
print(f"ok: {len(rows) - 1} values in {len(tensors)} tensors")
