"""The compare report's heat maps show exact match averaged over an encoding's seeds: each cell of the
merged probe is the mean of that cell (length, depth, axis, control) over random seed probes, and a cell
that is not ok in some seed is n/a. Expected values are computed here from the inputs."""
import random
import sys

sys.path.insert(0, sys.argv[1])
from plots.report_probes import mean_over_seeds  # noqa: E402

rng = random.Random(7)
for trial in range(200):
    lengths = [64 * 2 ** i for i in range(rng.randint(1, 4))]
    depths = [0.0, 0.25, 0.5, 0.75][: rng.randint(1, 4)]
    n = rng.randint(1, 4)
    probes = []
    for s in range(n):
        results = []
        for L in lengths:
            for d in depths:
                bad = rng.random() < 0.1
                results.append({"length": L, "depth": d, "control": None, "status": "n/a" if bad else "ok",
                                "exact": None if bad else rng.randint(0, 50) / 50})
            results.append({"length": L, "depth": None, "control": "no_needle", "status": "ok", "exact": 0.0})
        rng.shuffle(results)  # cells are matched by key, not by position
        probes.append({"task": "passkey", "train_length": 64, "results": results})
    merged = mean_over_seeds(probes)
    assert len(merged["results"]) == len(probes[0]["results"])
    for r in merged["results"]:
        same = [x for p in probes for x in p["results"]
                if (x["length"], x["depth"], x["control"]) == (r["length"], r["depth"], r["control"])]
        assert len(same) == n
        if all(x["status"] == "ok" for x in same):
            want = sum(x["exact"] for x in same) / n
            assert abs(r["exact"] - want) < 1e-12, (r, want)
        else:
            assert r["exact"] is None or n == 1, r
    # The inputs are left as they were.
    assert all("exact" in x for p in probes for x in p["results"])
print("mean over seeds: 200 random probe sets ok")
