#!/usr/bin/env bash
# The inspection commands print what they claim: pe tables, data examples, samples, bench fields.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

out=$("$POSLAB" pe --kind sinusoidal --positions 10 --dim 8 --scale 1 --format csv)
check "pe sinusoidal csv: header + 10 x 8 table values + scale" test "$(printf '%s\n' "$out" | grep -c .)" -eq 82
check "pe sinusoidal row 0 is sin 0, cos 0 ..." bash -c 'printf "%s\n" "$1" | tr -d "\r" | grep "^\"table\",0," | cut -d, -f5 | tr "\n" " " | grep -qx "0 1 0 1 0 1 0 1 "' _ "$out"
out=$("$POSLAB" pe --kind alibi --positions 4 --dim 8 --heads 8 --format json)
check "pe alibi json has the 8-head slopes 1/2 .. 1/256" bash -c "printf '%s' '$out' | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); s=d[\"slopes\"]; assert abs(s[0]-0.5)<1e-7 and abs(s[7]-1/256)<1e-9 and len(d[\"bias\"])==8 and d[\"bias\"][0][3][0]==-1.5'"
out=$("$POSLAB" pe --kind rope --positions 5 --dim 8 --format json)
check "pe rope json: angles (5, 4), angle[2][0] = 2" bash -c "printf '%s' '$out' | /usr/bin/python3 -c 'import json,sys; a=json.load(sys.stdin)[\"angles\"]; assert len(a)==5 and len(a[0])==4 and a[2][0]==2.0'"
# binary without --bits on a table narrower than its 16: one bit per column, position p's bit k at column k
# (as +-1, the default signed bits, times scale 1/sqrt(8)).
"$POSLAB" pe --kind binary --positions 8 --dim 8 --format json > bin8.json 2> bin8.err
check "pe --kind binary --dim 8 (no --bits): 8 bits by the binary expansion ($(head -1 bin8.err))" /usr/bin/python3 -c '
import json, math
t = json.load(open("bin8.json"))["table"]
for p in range(8):
    want = [((p >> k) & 1) * 2 - 1 for k in range(8)]
    got = [v * math.sqrt(8) for v in t[p]]
    assert max(abs(a - b) for a, b in zip(got, want)) < 1e-5, (p, got, want)'
out=$("$POSLAB" pe --kind learned --positions 4 --dim 8 --format csv)
check "pe learned prints its (untrained) table" test "$(printf '%s\n' "$out" | grep -c '^"table",')" -eq 32
# Every kind and option in CSV and JSON: the CSV parses (RFC 4180) and holds exactly the JSON's values.
while read -r args; do
  "$POSLAB" pe $args --format csv > pe.csv 2> pe.err && "$POSLAB" pe $args --format json > pe.json 2>> pe.err
  check "pe $args: csv and json agree ($(tail -1 pe.err))" /usr/bin/python3 "$CLI_DIR/py/check_pe_csv.py" pe.csv pe.json
done <<'EOF'
--kind sinusoidal --positions 6 --dim 8
--kind index --positions 5 --dim 4
--kind binary --positions 5 --dim 8 --bits 4
--kind rope --positions 6 --dim 8
--kind rope --dim 16 --positions 4 --rope-scaling yarn --factor 4 --original-length 64
--kind rope --dim 16 --positions 4 --rope-scaling linear --factor 2
--kind xpos --positions 5 --dim 8
--kind xpos --positions 5 --dim 8 --rope-scaling ntk --factor 2
--kind alibi --positions 4 --dim 8 --heads 3
--kind t5 --positions 6 --dim 8 --heads 2
--kind kerple_log --positions 4 --dim 8 --heads 2
--kind fire --positions 4 --dim 8 --heads 2
--kind cope --positions 4 --dim 8
--kind rope --positions 6 --dim 8 --randomize 32 --seed 3
EOF
out=$("$POSLAB" pe --kind rope --dim 16 --positions 4 --rope-scaling yarn --factor 4 --original-length 64 --format csv)
check "pe --rope-scaling yarn csv prints inv_freq and attention_factor" \
  bash -c "printf '%s' \"\$1\" | grep -q '^\"inv_freq\",7,,,' && printf '%s' \"\$1\" | grep -q '^\"attention_factor\",,,,1\.1386'" _ "$out"

# --option sets a kind's own keys: T5's buckets with 4 buckets out to distance 16, from the T5 formula
# (causal: n = i - j; exact below num_buckets/2, then logarithmic up to max_distance, capped).
"$POSLAB" pe --kind t5 --positions 40 --dim 8 --option num_buckets=4 --option max_distance=16 --format json > t5.json 2> t5.err
check "pe --option num_buckets=4 --option max_distance=16: t5 buckets by the published formula" /usr/bin/python3 -c '
import json, math
b = json.load(open("t5.json"))["buckets"]
def bucket(n, nb=4, md=16):
    exact = nb // 2
    return n if n < exact else min(nb - 1, exact + int(math.log(n / exact) / math.log(md / exact) * (nb - exact)))
assert len(b) == 40
assert all(b[i][j] == bucket(i - j) for i in range(40) for j in range(i + 1))
assert {b[i][j] for i in range(40) for j in range(i + 1)} == {0, 1, 2, 3}'

# Text: the end-of-training eval.json holds the documented fields and scores the same targets at
# every length and in both protocols (the whole validation split).
printf '{"data": {"kind": "text", "path": "%s"}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16,
 "pos_encoding": {"kind": "alibi"}}, "train": {"max_iters": 3, "precision": "fp32", "threads": 1}, "eval": {"lengths": [16, 48, 100]}}\n' \
  "$CLI_DIR/../../data/text/licenses.txt" > text.json
"$POSLAB" train -c text.json --out text-run > /dev/null 2>&1
check "text eval.json holds the documented fields" \
  /usr/bin/python3 "$CLI_DIR/py/check_eval_json.py" text-run/eval.json "$CLI_DIR/../../docs/outputs.md"
check "text eval.json: scored_tokens equal at every length and in both protocols" /usr/bin/python3 -c '
import json, sys
r = json.load(open("text-run/eval.json"))["results"]
n = {x["scored_tokens"] for x in r} | {x["sliding"]["scored_tokens"] for x in r}
assert len(r) == 3 and len(n) == 1 and n.pop() > 10000, r'
# A length the encoding cannot represent (past a learned table): an n/a entry with the same fields, numbers null.
"$POSLAB" train -c text.json --set model.pos_encoding.kind=learned --set 'eval.lengths=[16,32]' --out text-learned > /dev/null 2>&1
check "an n/a text entry holds the documented fields, its numbers null" bash -c "grep -q '\"n/a: ' text-learned/eval.json && \
  /usr/bin/python3 '$CLI_DIR/py/check_eval_json.py' text-learned/eval.json '$CLI_DIR/../../docs/outputs.md'"

printf '{"data": {"task": "sort", "max_len": 6}, "model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16},\n "train": {"max_iters": 5, "precision": "fp32", "threads": 1}}\n' > sort.json
out=$("$POSLAB" data -c sort.json --n 4)
check "data prints 4 sort examples with sorted answers" bash -c "printf '%s\n' \"$out\" | grep -v '^#' | /usr/bin/python3 -c '
import sys
rows = [l.split(\"  >>\") for l in sys.stdin.read().splitlines()]
assert len(rows) == 4
for q, a in rows:
    q = q.split(\"|\")[0]
    assert a == \"\".join(sorted(q)) + \".\", (q, a)'"

"$POSLAB" train -c sort.json --out run > /dev/null 2>&1
out=$("$POSLAB" sample --run run --prompt "cab|" --tokens 5 --temperature 0)
check "sample continues the prompt with 5 tokens" test "${#out}" -eq 9

"$POSLAB" bench -c sort.json --steps 4 --warmup 1 --json bench.json > bench.txt
for key in train_tokens_per_s eval_tokens_per_s val_loss ms_per_step_median ms_per_step_p90 peak_rss_mb achieved_gflops matmul_peak_gflops mfu; do
  check "bench json has $key" grep -q "\"$key\"" bench.json
done
check "bench prints MFU" grep -q "of peak" bench.txt
check "bench's table names the CPU as its JSON records it" /usr/bin/python3 -c '
import json
cpu = json.load(open("bench.json"))["cpu"]
want = "  cpu    %s (%s family %s model %s, %d usable cores; " % (cpu["model_name"], cpu["vendor"], cpu["family"], cpu["model"], cpu["cores"])
assert want in open("bench.txt").read(), (want, open("bench.txt").read())'
# nanoGPT's count from the architecture (learned positions, no biases): N = V C + L (12 C^2 + 2 C) + C, the
# position table (block_size x C) left out; FLOPs per token 6 N + 12 L C T.
check "bench's FLOP count is nanoGPT's: the position table left out of N" /usr/bin/python3 -c '
import json, math
b = json.load(open("bench.json")); m = b["config"]
V, C, L, T = m["vocab_size"], m["n_embd"], m["n_layer"], m["block_size"]
N = V * C + L * (12 * C * C + 2 * C) + C
assert m["pos_encoding"] == "learned" and b["params"] == N + T * C and b["flop_params"] == N, b
want = (6 * N + 12 * L * C * T) * b["train_tokens_per_s"] / 1e9
assert math.isclose(b["achieved_gflops"], want, rel_tol=1e-9), (b["achieved_gflops"], want)
assert math.isclose(b["mfu"], want / b["matmul_peak_gflops"], rel_tol=1e-9), b'
check "bench json records the CPU as /proc/cpuinfo's first processor gives it" /usr/bin/python3 -c '
import json, os
cpu = json.load(open("bench.json"))["cpu"]
first = {}
if os.path.exists("/proc/cpuinfo"):
    for line in open("/proc/cpuinfo").read().split("\n\n")[0].splitlines():
        k, _, v = line.partition(":")
        first[k.strip()] = v.strip()
assert cpu["vendor"] == first.get("vendor_id", "unknown") and cpu["model_name"] == first.get("model name", "unknown"), cpu
assert cpu["family"] == first.get("cpu family", "unknown") and cpu["model"] == first.get("model", "unknown"), cpu
want = [f for f in first.get("flags", "").split() if f in ("avx2", "fma") or f.startswith(("avx512", "amx"))]
assert cpu["flags"] == want, (cpu["flags"], want)
assert cpu["cores"] == os.cpu_count(), cpu'
check "scripts/bench/cpu.py (the scripts' CPU line) reads the CPU as bench records it" /usr/bin/python3 -c '
import json, subprocess, sys
got = json.loads(subprocess.check_output([sys.executable, sys.argv[1] + "/scripts/bench/cpu.py", "--json"]))
assert got == json.load(open("bench.json"))["cpu"], got' "$CLI_DIR/../.."
check "bench runs under the caller's OMP_WAIT_POLICY (lib.sh sets PASSIVE)" grep -q '"omp_wait_policy": "PASSIVE"' bench.json
env -u OMP_WAIT_POLICY "$POSLAB" bench -c sort.json --steps 1 --warmup 0 --json bench_unset.json > /dev/null
check "commands that train choose ACTIVE when OMP_WAIT_POLICY is unset" grep -q '"omp_wait_policy": "ACTIVE"' bench_unset.json
# The choice costs a second load of LibTorch (the re-exec), paid only once the input is checked: a bad config
# is refused by the first image. The dynamic loader says each time it initialises libtorch_cpu (LD_DEBUG=files).
torch_inits() { grep -c "calling init: .*libtorch_cpu" "$1" || true; }
env -u OMP_WAIT_POLICY LD_DEBUG=files "$POSLAB" bench -c sort.json --steps 1 --warmup 0 > /dev/null 2> inits_ok.log
check "a command that trains loads LibTorch twice when it chooses OMP_WAIT_POLICY (the re-exec)" test "$(torch_inits inits_ok.log)" = 2
printf '{"model": {"n_layr": 2}}\n' > typo.json
for cmd in train bench compare; do
  env -u OMP_WAIT_POLICY LD_DEBUG=files "$POSLAB" $cmd -c typo.json > /dev/null 2> "inits_$cmd.log" || true
  check "$cmd refuses a bad config before the re-exec: one load of LibTorch" test "$(torch_inits "inits_$cmd.log")" = 1
  check "... with its one-line error" grep -q "^poslab: error: .*typo.json" "inits_$cmd.log"
done
: > not_a_dir
env -u OMP_WAIT_POLICY LD_DEBUG=files "$POSLAB" compare -c "$CLI_DIR/../../configs/experiments/quick.json" --out not_a_dir \
  > /dev/null 2> inits_out.log || true
check "compare refuses an --out that cannot be written before the re-exec too" test "$(torch_inits inits_out.log)" = 1
check "... naming it" grep -q "^poslab: error: --out not_a_dir: exists and is not a directory" inits_out.log
# The build tree's copy of libtorch_cpu without the libraries it never uses (scripts/slim_libtorch.sh), where
# the build made one: poslab loads it; it exports what the system's exports, names a subset of its libraries,
# and none of those it left out exports a symbol it imports (the loader would otherwise look there).
slim=$(dirname "$POSLAB")/libtorch-slim
if ls "$slim"/libtorch_cpu.so* > /dev/null 2>&1; then
  copy=$(ls "$slim"/libtorch_cpu.so* | head -1)
  check "poslab loads the build's copy of libtorch_cpu" bash -c "ldd '$POSLAB' | grep -q '=> $copy '"
  original=$(cat "$slim/source")  # the library it copied, as the build linked it
  check "the copy exports the same symbols as $original" bash -c \
    "cmp <(nm -D --defined-only '$copy' | sort) <(nm -D --defined-only '$original' | sort)"
  check "the libraries it left out export none of the symbols it imports" /usr/bin/python3 - "$copy" "$original" <<'PY'
import subprocess, sys
def dyn(path, what):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [l.split("[", 1)[1].rstrip("]") for l in out.splitlines() if f"({what})" in l]
def syms(path, flag):
    out = subprocess.run(["nm", "-D", flag, path], capture_output=True, text=True, check=True).stdout
    return {l.split()[-1].split("@")[0] for l in out.splitlines() if l.strip()}
copy, original = sys.argv[1:]
left_out = set(dyn(original, "NEEDED")) - set(dyn(copy, "NEEDED"))
assert set(dyn(copy, "NEEDED")) <= set(dyn(original, "NEEDED"))
assert left_out, "the copy names every library the original does"
paths = {}
for line in subprocess.run(["ldd", original], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) >= 3 and parts[1] == "=>":
        paths[parts[0]] = parts[2]
imports = syms(original, "--undefined-only")
for lib in sorted(left_out):
    used = imports & syms(paths[lib], "--defined-only")
    assert not used, f"{lib} exports {sorted(used)[:3]} that libtorch_cpu imports"
print(len(left_out), "left out, none used")
PY
fi
# The fp32 kernels: OpenBLAS prints the core it runs when it loads (OPENBLAS_VERBOSE=2), whether its own
# choice by CPU model or OPENBLAS_CORETYPE's; the JSON must name the same one ("" with another BLAS).
OPENBLAS_VERBOSE=2 "$POSLAB" bench -c sort.json --steps 1 --warmup 0 --json bench_blas.json > blas.out 2>&1
# A CPU OpenBLAS does not know loads its fallback kernels first, and poslab starts again on newer ones: the last
# core printed is the one that ran.
check "bench json records the OpenBLAS core that ran" /usr/bin/python3 -c '
import json, re
cores = re.findall(r"^Core: (\S+)", open("blas.out").read(), re.M)
got = json.load(open("bench_blas.json"))["blas_core"]
assert (cores[-1] == got) if cores else got == "", (cores, got)'
check "a run's summary.json records the OpenBLAS core, as bench does" /usr/bin/python3 -c '
import json
got, want = json.load(open("run/summary.json"))["blas_core"], json.load(open("bench_blas.json"))["blas_core"]
assert got == want, (got, want)'
OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=Zen "$POSLAB" bench -c sort.json --steps 1 --warmup 0 --json bench_zen.json > blas_zen.out 2>&1
check "bench json follows OPENBLAS_CORETYPE" /usr/bin/python3 -c '
import json, re
cores = set(re.findall(r"^Core: (\S+)", open("blas_zen.out").read(), re.M))
got = json.load(open("bench_zen.json"))["blas_core"]
assert (cores == {got} and got == "Zen") if cores else got == "", (cores, got)'
# OpenBLAS's fallback kernels (those of CPUs without AVX2, what it runs on a CPU its tables lack) only where the CPU
# has nothing newer: a training command starts again on the newest the flags allow (the rule, from OpenBLAS's
# kernel requirements, written out here), and a user's OPENBLAS_CORETYPE is kept.
"$POSLAB" train -c sort.json --set train.max_iters=1 --set train.precision=fp32 --out blas_run > blas_run.out 2>&1
OPENBLAS_CORETYPE=Prescott "$POSLAB" train -c sort.json --set train.max_iters=1 --set train.precision=fp32 \
  --out blas_kept > blas_kept.out 2>&1
check "training runs OpenBLAS's newest kernels the CPU allows; OPENBLAS_CORETYPE wins" /usr/bin/python3 -c '
import re
flags = set(open("/proc/cpuinfo").read().split("\nflags")[1].split("\n")[0].split(":")[1].split())
fallbacks = {"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2", "Penryn", "Dunnington",
             "Nehalem", "Sandybridge", "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat", "Bulldozer", "Piledriver",
             "Steamroller", "Excavator"}
def core(path):
    m = re.search(r"on OpenBLAS.s (\S+) kernels", open(path).read())
    return m and m.group(1)
ran, kept = core("blas_run.out"), core("blas_kept.out")
if ran is None:  # another BLAS: no core is named, with or without the variable
    assert kept is None, kept
else:
    avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags
    best = "SkylakeX" if avx512 else "Haswell" if {"avx2", "fma"} <= flags else None
    assert ran not in fallbacks or best is None, (ran, best)
    assert kept == "Prescott", kept
print(ran, kept)'
# train.precision auto on a CPU with bfloat16 instructions times both products at the model's shape and says so;
# bfloat16 only where its products are at least 1.2x as fast (printed to two decimals: at 1.20 either way).
"$POSLAB" train -c sort.json --set train.max_iters=1 --set train.precision=auto --out auto_run > auto_run.out 2>&1
check "precision auto: bf16 where its products are 1.2x as fast, and says how fast" /usr/bin/python3 -c '
import json, re
flags = open("/proc/cpuinfo").read()
out = open("auto_run.out").read()
got = json.load(open("auto_run/summary.json"))["precision"]
m = re.search(r"precision (bf16|fp32)(?: autocast)? \(auto: bf16 products ([0-9.]+)x as fast as fp32.s here", out)
if "avx512_bf16" in flags or "amx_bf16" in flags:
    assert m, out[:600]
    said, ratio = m.group(1), float(m.group(2))
    assert said == got, (said, got)
    assert got == ("bf16" if ratio >= 1.2 else "fp32") or abs(ratio - 1.2) < 0.006, (got, ratio)
else:
    assert m is None and got == "fp32", (got, out[:600])
print(got, m and m.group(2))'
# bench records the timing auto chose by (null where it took none: an explicit precision, a CPU without bf16).
"$POSLAB" bench -c sort.json --precision auto --steps 1 --warmup 0 --json bench_auto.json > bench_auto.out 2>&1
"$POSLAB" bench -c sort.json --steps 1 --warmup 0 --json bench_fixed.json > /dev/null 2>&1
check "bench records and prints the timing behind precision auto" /usr/bin/python3 -c '
import json
flags = open("/proc/cpuinfo").read()
b, fixed = json.load(open("bench_auto.json")), json.load(open("bench_fixed.json"))
assert fixed["auto_bf16_speedup"] is None, fixed["auto_bf16_speedup"]
r = b["auto_bf16_speedup"]
if "avx512_bf16" in flags or "amx_bf16" in flags:
    assert r > 0 and b["precision"] == ("bf16" if r >= 1.2 else "fp32"), (r, b["precision"])
    assert f"(auto: bf16 products {r:.2f}x as fast as fp32" in open("bench_auto.out").read()
else:
    assert r is None and b["precision"] == "fp32", (r, b["precision"])
print(b["precision"], r)'
# A run goes on in the precision auto chose when it started, kept in its checkpoint: resumed after a kill -9 (no
# summary.json), or with a summary.json whose precision is not a string, it says so and keeps it; its evaluation too.
"$POSLAB" train -c sort.json --set train.max_iters=4 --set train.eval_interval=2 --set train.precision=auto --stop-at 2 \
  --out auto_resume > /dev/null 2>&1
/usr/bin/python3 -c 'import json; print(json.load(open("auto_resume/summary.json"))["precision"])' > auto_resume.was
rm auto_resume/summary.json
"$POSLAB" train --resume auto_resume --stop-at 3 > auto_resume.out 2>&1
echo '{"precision": 5, "status": "interrupted", "step": 3}' > auto_resume/summary.json
"$POSLAB" train --resume auto_resume > auto_resume2.out 2>&1
echo "rc=$?" >> auto_resume2.out
"$POSLAB" eval --run auto_resume --lengths 8 > auto_eval.out 2>&1
check "a resumed run and its evaluation keep the precision auto chose at its start" /usr/bin/python3 -c '
import json
was = open("auto_resume.was").read().strip()
s = json.load(open("auto_resume/summary.json"))
assert s["step"] == 4 and s["precision"] == was, (s["step"], s["precision"], was)
for f, doing in [("auto_resume.out", "resuming"), ("auto_resume2.out", "resuming"), ("auto_eval.out", "evaluating")]:
    out = open(f).read()
    assert f"train.precision auto: {doing} in {was}, as the run trained" in out, (f, out[-800:])
# The start-up line gives no hint that --resume cannot follow (it takes its config from the run).
line = [l for l in open("auto_resume.out") if " params, " in l][0]
assert "(auto, as the run started)" in line and "set train.precision" not in line, line
assert "rc=0" in open("auto_resume2.out").read()
print(was)'
# 1 warm-up + 4 timed steps = the run's max_iters: the same steps, data and validation batches as train.
check "bench val_loss equals train's final_val_loss after the same 5 steps" /usr/bin/python3 -c '
import json
b, t = json.load(open("bench.json"))["val_loss"], json.load(open("run/summary.json"))["final_val_loss"]
assert abs(b - t) < 1e-5, (b, t)'
# scripts/bench/compare.sh stopped by Ctrl-C in its second repeat (SIGINT to its process group, as a
# terminal sends it): exit 130, the finished repeat summarised and said to be one of two, the unfinished
# repeat's files gone. Needs the twin's python3-torch.
if py_has /usr/bin/python3 torch; then
  printf '{"data": {"max_len": 8}, "model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 40},
 "train": {"max_iters": 3, "batch_size": 8, "eval_iters": 1}}\n' > bench-tiny.json
  /usr/bin/python3 - "$CLI_DIR/../.." "$POSLAB" "$WORK/bench-int" "$WORK/bench-tiny.json" > bench-int.rc <<'PY'
import os, signal, subprocess, sys, time
root, poslab, out, config = sys.argv[1:5]
env = dict(os.environ, WARMUP="1", REPEATS="2", POSLAB=poslab)
# SIGINT's default action restored in the child: a test run from a background job inherits it ignored, and
# bash can neither trap nor reset a signal ignored when it starts (compare.sh would run on to its end).
p = subprocess.Popen(["bash", "scripts/bench/compare.sh", config, "2", "1", out], cwd=root,
                     stdout=open(out + ".log", "w"), stderr=subprocess.STDOUT, start_new_session=True, env=env,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
while not os.path.exists(os.path.join(out, "r2", "poslab_default.json")) and p.poll() is None:
    time.sleep(0.05)
os.killpg(p.pid, signal.SIGINT)
print(p.wait())
PY
  check "compare.sh interrupted: exit 130 (got $(cat bench-int.rc))" test "$(cat bench-int.rc)" = 130
  check "...says how many repeats finished" grep -q "compare.sh: interrupted after 1 of 2 repeats: their summary follows" bench-int.log
  check "...and summarises those: summary.json parses, one repeat of two, the unfinished one's files gone" \
    /usr/bin/python3 -c '
import json, os, sys
d = json.load(open("bench-int/summary.json"))
assert (d["repeats"], d["repeats_asked"]) == (1, 2), d
r = d["ratios"]["defaults: poslab / nanoGPT-style twin (target >= 3.0)"]
assert len(r["per_repeat"]) == 1 and r["per_repeat"][0] > 0, r
assert os.path.isdir("bench-int/r1") and not os.path.exists("bench-int/r2"), os.listdir("bench-int")'
else
  echo "skip: /usr/bin/python3 lacks torch: compare.sh's interruption is not checked"
fi
finish
