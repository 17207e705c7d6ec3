"""eval.json against docs/outputs.md: every field of every entry of `results` is documented in the
table under "## eval.json", and every documented field is there (those the table marks "text:" only
for text runs, "tasks:" ones for both since they are then null).
usage: check_eval_json.py EVAL_JSON DOCS_OUTPUTS_MD"""
import json
import re
import sys

path, doc = sys.argv[1], sys.argv[2]
section = open(doc).read().split("## eval.json", 1)[1].split("\n## ", 1)[0]
fields = dict(re.findall(r"^\| `([a-z0-9_]+)` \| ([^|]*)\|", section, re.M))
assert fields, "docs/outputs.md documents the eval.json fields"
data = json.load(open(path))
text = data["length_unit"] == "tokens"
for entry in data["results"]:
    if not entry["status"] == "ok":
        continue
    undocumented = set(entry) - set(fields)
    assert not undocumented, ("undocumented eval.json fields", sorted(undocumented))
    expected = {k for k, meaning in fields.items() if text or not meaning.strip().startswith("text:")}
    missing = expected - set(entry)
    assert not missing, ("documented fields missing", sorted(missing))
    if text:
        assert set(entry["sliding"]) == {"stride", "loss", "ppl", "token_acc", "scored_tokens"}, entry["sliding"]
print("ok: %d entries, fields as documented" % len(data["results"]))
