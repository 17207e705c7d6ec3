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
numbers = ("loss", "ppl", "token_acc", "exact_match", "scored_tokens", "first_target", "sliding", "key_tokens")
for entry in data["results"]:
    if entry["status"] != "ok":
        # n/a: the same documented fields, the numbers null (key_tokens only where the ok entries have it)
        assert entry["status"].startswith("n/a: "), entry["status"]
        assert not set(entry) - set(fields), ("undocumented eval.json fields", sorted(set(entry) - set(fields)))
        want = {k for k, meaning in fields.items() if text or not meaning.strip().startswith("text:")} - {"key_tokens"}
        assert not want - set(entry), ("documented fields missing in an n/a entry", sorted(want - set(entry)))
        assert all(entry[k] is None for k in numbers if k in entry), entry
        continue
    undocumented = set(entry) - set(fields)
    assert not undocumented, ("undocumented eval.json fields", sorted(undocumented))
    expected = {k for k, meaning in fields.items() if text or not meaning.strip().startswith("text:")}
    missing = expected - set(entry)
    assert not missing, ("documented fields missing", sorted(missing))
    if text:
        assert set(entry["sliding"]) == {"stride", "loss", "ppl", "token_acc", "scored_tokens"}, entry["sliding"]
print("ok: %d entries, fields as documented" % len(data["results"]))
