#!/usr/bin/env bash
# poslab as a library: `cmake --install` gives a prefix whose poslab finds its plotting scripts in
# share/poslab/ (and a copy of the build-tree executable finds the source tree's, as a build directory
# outside the source tree does); examples/plugin/ built against the install with find_package(poslab)
# trains, evaluates at 8x, resumes exactly, runs in compare beside built-in kinds, and prints its pe table.
source "$(dirname "$0")/lib.sh"
ROOT=$(pwd)
BUILD=$(dirname "$POSLAB")
PY=/usr/bin/python3
unset POSLAB_SCRIPTS
cd "$WORK"
P=$WORK/prefix

if ! cmake --install "$BUILD" --prefix "$P" > install.log 2>&1; then
  cat install.log
  echo "FAIL: cmake --install"
  exit 1
fi
check "installed: bin/poslab" test -x "$P/bin/poslab"
check "installed: the library" bash -c "ls $P/lib*/libposlab_core.so* >/dev/null 2>&1"
check "installed: the public headers" test -f "$P/include/poslab/model/positional/plugin.h" -a -f "$P/include/poslab/config/config.h"
check "installed: no CLI headers" test ! -e "$P/include/poslab/cli"
check "installed: the CMake package" bash -c "ls $P/lib*/cmake/poslab/poslabConfig.cmake >/dev/null 2>&1"
check "installed: the plotting scripts" test -f "$P/share/poslab/scripts/plots/__main__.py" -a -f "$P/share/poslab/scripts/plot_report.py"
check "the installed poslab runs from anywhere" bash -c "cd / && '$P/bin/poslab' --help | grep -q 'pe'"

# The plotting scripts, without POSLAB_SCRIPTS, from a directory that has none.
mkdir -p elsewhere/build
cp "$POSLAB" elsewhere/build/poslab  # a build-tree executable away from the source tree
if $PY -c 'import matplotlib, numpy' 2>/dev/null; then
  (cd elsewhere && "$P/bin/poslab" pe --kind sinusoidal -n 16 -d 8 --plot installed.png > /dev/null 2>&1)
  check "the installed poslab draws with share/poslab/scripts" test -s elsewhere/installed.png
  (cd elsewhere && ./build/poslab pe --kind alibi -n 16 -d 8 --plot outside.png > /dev/null 2>&1)
  check "a build directory outside the source tree draws with the source tree's scripts" test -s elsewhere/outside.png
  # The install looks in its own share/ only: without it, it says so (and does not fall back on the source tree).
  mv "$P/share/poslab" "$P/share/poslab.away"
  (cd elsewhere && "$P/bin/poslab" pe --kind sinusoidal -n 16 -d 8 --plot gone.png > gone.log 2>&1)
  check "an install without its scripts says so" grep -q "scripts/plots not found" elsewhere/gone.log
  mv "$P/share/poslab.away" "$P/share/poslab"
else
  echo "matplotlib missing: pictures not checked"
fi

# examples/plugin against the install, configured as poslab was (its LibTorch, compiler and flags).
cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD/CMakeCache.txt"; }
args=(-DCMAKE_PREFIX_PATH="$P;$(cache CMAKE_PREFIX_PATH)" -DCMAKE_CXX_COMPILER="$(cache CMAKE_CXX_COMPILER)"
      -DCMAKE_CXX_FLAGS="$(cache CMAKE_CXX_FLAGS)" -DCMAKE_BUILD_TYPE=Release)
[ -n "$(cache CMAKE_CUDA_COMPILER)" ] && args+=(-DCMAKE_CUDA_COMPILER="$(cache CMAKE_CUDA_COMPILER)" -DCUDAToolkit_ROOT="$(cache CUDAToolkit_ROOT)")
if ! { cmake -S "$ROOT/examples/plugin" -B ex -G Ninja "${args[@]}" && cmake --build ex; } > example.log 2>&1; then
  tail -30 example.log
  echo "FAIL: examples/plugin does not build against the install"
  exit 1
fi
SO=$WORK/ex/libgaussian_bias.so
check "examples/plugin builds libgaussian_bias.so" test -f "$SO"

# A program linking poslab::poslab from the install: builds a model through the library, with the plug-in's
# kind, and finds the installed scripts beside the installed library.
mkdir -p app
cat > app/CMakeLists.txt <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(poslab_app LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(poslab CONFIG REQUIRED)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE poslab::poslab)
CMAKE
cat > app/main.cpp <<'CPP'
#include <poslab/config/config.h>
#include <poslab/model/gpt.h>
#include <poslab/util/scripts.h>
#include <iostream>
int main(int argc, char** argv) {
  nlohmann::json j = {{"model", {{"n_layer", 1}, {"n_embd", 16}, {"n_head", 2}, {"block_size", 8},
                                 {"pos_encoding", {{"kind", "gaussian_bias"}, {"plugin", argv[1]}}}}}};
  poslab::Config c = poslab::config_from_json(j);
  c.model.vocab_size = 11;
  poslab::GPT model(c.model);
  auto logits = model->forward(torch::zeros({2, 8}, torch::kLong));  // (B, T, vocab)
  std::cout << logits.size(0) << "x" << logits.size(1) << "x" << logits.size(2) << " " << model->pos->kind() << "\n"
            << poslab::find_script("plots") << "\n";
}
CPP
if ! { cmake -S app -B app/build -G Ninja "${args[@]}" && cmake --build app/build; } > app.log 2>&1; then
  tail -30 app.log
  echo "FAIL: a program linking poslab::poslab does not build against the install"
  exit 1
fi
(cd elsewhere && ../app/build/app "$SO" > ../app.out 2> ../app.err)
check "a program linking poslab::poslab runs the plug-in's kind ($(head -c 300 app.err))" grep -qx "2x8x11 gaussian_bias" app.out
check "...and finds the scripts installed beside the library" grep -qx "$P/share/poslab/scripts/plots" app.out

# A config naming the plug-in relative to itself; run from another directory.
mkdir -p cfg wd
printf '{"data": {"task": "copy", "max_len": 4}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16,\n "pos_encoding": {"kind": "gaussian_bias", "plugin": "../ex/libgaussian_bias.so", "gauss_sigma": 2.0}},\n "train": {"max_iters": 20, "eval_interval": 10, "precision": "fp32", "threads": 1}, "eval": {"lengths": [4, 8], "batches": 1}}\n' > cfg/tiny.json
cd wd
"$P/bin/poslab" train -c ../cfg/tiny.json --out straight > straight.log 2>&1
check "a plug-in kind trains" grep -q '"status": "done"' straight/summary.json
check "the run records the plug-in's absolute path and SHA-256 (as sha256sum computes it)" $PY - straight/config.json "$SO" <<'PYEOF'
import json, subprocess, sys
pe = json.load(open(sys.argv[1]))["model"]["pos_encoding"]
digest = subprocess.run(["sha256sum", sys.argv[2]], capture_output=True, text=True, check=True).stdout.split()[0]
assert pe["plugin"] == sys.argv[2], pe["plugin"]
assert pe["plugin_sha256"] == digest, (pe["plugin_sha256"], digest)
assert pe["gauss_sigma"] == 2.0 and pe["kind"] == "gaussian_bias", pe
PYEOF
if py_has $PY torch; then
  check "the widths were trained (log sigma moved from log(2 * 2^h))" $PY - straight <<'PYEOF'
import glob, math, sys, torch
files = [f for f in glob.glob(sys.argv[1] + "/*.pt") if "checkpoint" not in f]
weights = torch.load(files[0])
name = [k for k in weights if k.endswith("log_sigma")]
assert len(name) == 1, sorted(weights)
got = weights[name[0]].flatten().tolist()
start = [math.log(2.0 * 2 ** h) for h in range(2)]
assert len(got) == 2 and max(abs(a - b) for a, b in zip(got, start)) > 1e-4, (got, start)
PYEOF
fi

"$P/bin/poslab" eval --run straight --lengths 4,32 > eval.log 2>&1
check "evaluated at 8x the training length" $PY - straight/eval.json <<'PYEOF'
import json, math, sys
rows = {r["length"]: r for r in json.load(open(sys.argv[1]))["results"]}
assert rows[32]["status"] == "ok" and math.isfinite(rows[32]["loss"]), rows[32]
PYEOF

"$P/bin/poslab" train -c ../cfg/tiny.json --out split --stop-at 10 > split.log 2>&1
"$P/bin/poslab" train --resume split > resume.log 2>&1
check "the resumed run's losses equal the unbroken run's exactly" $PY - straight/metrics.jsonl split/metrics.jsonl <<'PYEOF'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
assert len(a) == len(b) > 0, (len(a), len(b))
for x, y in zip(a, b):
    assert x["step"] == y["step"], (x, y)
    for k in ("train_loss", "val_loss"):
        assert x.get(k) == y.get(k), (k, x, y)
PYEOF

# An experiment two directories down names the plug-in relative to itself, over a config without one.
mkdir -p ../exps/deep
printf '{"data": {"task": "copy", "max_len": 4}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16},\n "train": {"max_iters": 10, "eval_interval": 5, "precision": "fp32", "threads": 1}, "eval": {"lengths": [4, 32], "batches": 1}}\n' > ../cfg/plain.json
printf '{"name": "plugin", "base": "../../cfg/plain.json", "set": {"model.pos_encoding.plugin": "../../ex/libgaussian_bias.so"},\n "grid": {"model.pos_encoding.kind": ["alibi", "gaussian_bias"]}}\n' > ../exps/deep/exp.json
plots=--no-plots
$PY -c 'import matplotlib' 2>/dev/null && plots=  # the report's plots with the installed scripts
"$P/bin/poslab" compare -c ../exps/deep/exp.json --out grid $plots > compare.log 2>&1
check "compare runs the plug-in kind beside a built-in one (exit $?)" grep -q '"status": "done"' grid/cells/kind=gaussian_bias/summary.json
[ -z "$plots" ] && check "compare draws its report with the installed scripts" test -s grid/report.md -a -s grid/extrapolation.png
check "compare's results name both kinds" $PY - grid/results.csv <<'PYEOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
kinds = {r.get("kind") or r.get("model.pos_encoding.kind") or r.get("group") for r in rows}
assert {"alibi", "gaussian_bias"} <= kinds, kinds
PYEOF

"$P/bin/poslab" pe --plugin "$SO" --kind gaussian_bias -n 6 -d 4 --heads 2 --format csv > pe.csv 2> pe.err
check "pe prints the plug-in's bias: -(i-j)^2 / (2 (4 * 2^h)^2)" $PY - pe.csv <<'PYEOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
assert rows[0] == ["tensor", "dim0", "dim1", "dim2", "value"], rows[0]
bias = {(int(h), int(i), int(j)): float(v) for t, h, i, j, v in rows[1:] if t == "bias"}
assert len(bias) == 2 * 6 * 6, len(bias)
for (h, i, j), v in bias.items():
    want = -((i - j) ** 2) / (2 * (4.0 * 2 ** h) ** 2)
    assert abs(v - want) <= 1e-5 * max(1, abs(want)), ((h, i, j), v, want)
sigma = {int(h): float(v) for t, h, _, _, v in rows[1:] if t == "sigma"}
assert sigma == {0: 4.0, 1: 8.0}, sigma
PYEOF
"$P/bin/poslab" pe --plugin "$SO" --kind gaussian_bias -n 6 -d 4 --heads 2 --option gauss_sigma=1.5 > pe-opt.csv 2> pe-opt.err
check "pe --option sets the plug-in's option: widths 1.5 * 2^h, and the bias with them" $PY - pe-opt.csv <<'PYEOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
sigma = {int(h): float(v) for t, h, _, _, v in rows[1:] if t == "sigma"}
assert sigma == {0: 1.5, 1: 3.0}, sigma
for t, h, i, j, v in rows[1:]:
    if t == "bias":
        want = -((int(i) - int(j)) ** 2) / (2 * (1.5 * 2 ** int(h)) ** 2)
        assert abs(float(v) - want) <= 1e-5 * max(1, abs(want)), ((h, i, j), v, want)
PYEOF
expect_fail 2 "--option gauss_sigma must be a number" -- "$P/bin/poslab" pe --plugin "$SO" --kind gaussian_bias -n 6 -d 4 --option gauss_sigma=wide

# A moved plug-in: the run's recorded path is gone; POSLAB_PLUGIN_PATH points at the directory now holding a
# file of that name, which is used only with the recorded SHA-256.
mkdir -p ../moved ../rebuilt
cp "$SO" ../rebuilt/ && printf 'x' >> ../rebuilt/libgaussian_bias.so  # another build: same name, other bytes
mv "$SO" ../moved/
expect_fail 2 "libgaussian_bias.so: no such file (the run recorded it there; if it moved, set POSLAB_PLUGIN_PATH" -- \
  "$P/bin/poslab" eval --run straight --lengths 4,32
expect_fail 2 "POSLAB_PLUGIN_PATH holds only other builds of it: $(cd ../rebuilt && pwd)/libgaussian_bias.so" -- \
  env POSLAB_PLUGIN_PATH="$(cd ../rebuilt && pwd)" "$P/bin/poslab" eval --run straight --lengths 4,32
cp straight/eval.json eval-before-move.json
POSLAB_PLUGIN_PATH="/nonexistent:$(cd ../rebuilt && pwd):$(cd ../moved && pwd)" "$P/bin/poslab" eval --run straight --lengths 4,32 > moved.log 2>&1
check "a moved plug-in is found by POSLAB_PLUGIN_PATH, and says where" grep -q "using $(cd ../moved && pwd)/libgaussian_bias.so (the same SHA-256" moved.log
check "... and evaluates the run as before it moved" $PY - eval-before-move.json straight/eval.json <<'PYEOF'
import json, sys
a, b = (json.load(open(p))["results"] for p in sys.argv[1:3])
assert [(r["length"], r["loss"]) for r in a] == [(r["length"], r["loss"]) for r in b], (a, b)
PYEOF
mv ../moved/libgaussian_bias.so "$SO"
finish
