#!/usr/bin/env bash
# Run ON a CUDA machine, from the repository root: every CUDA path of a built poslab once, in one go.
#   bash scripts/gpu/check.sh POSLAB_BINARY OUT_DIR [SECTION...]
# Sections (default all): parity (every encoding against the twin: poslab on the GPU in fp32, the twin on
# the CPU), subcommands (train, resume, eval, probe, attention, KV-cache sampling on a small run), bench
# (poslab, the twin and the compiled twin, interleaved, POSLAB_GPU_REPEATS times), mainjob. Logs: OUT_DIR.
set -u
P=${1:?usage: check.sh POSLAB_BINARY OUT_DIR [SECTION...]}
O=${2:?usage: check.sh POSLAB_BINARY OUT_DIR [SECTION...]}
shift 2
sections=${*:-parity subcommands bench mainjob}
want() { [[ " $sections " == *" $1 "* ]]; }
mkdir -p "$O"
PY=${POSLAB_PARITY_PYTHON:-python3}
ok=0
step() { echo; echo "== $* ($(date +%T))"; }
fail() { echo "FAIL: $*"; ok=1; }

step "machine"
nvidia-smi -L
"$PY" -c 'import torch; print("python torch", torch.__version__, "cuda", torch.cuda.is_available())'
"$P" --version || { fail "poslab does not start"; exit 1; }

# The parity run starts ~60 processes; in the background, beside the main job (16 CPUs, one GPU).
parity=
if want parity; then
  step "parity with the twin, poslab on cuda (background)"
  POSLAB_FIXTURE_DEVICE=cuda POSLAB_PARITY_PYTHON="$PY" bash scripts/reference/run_parity.sh "$P" >"$O/parity.log" 2>&1 &
  parity=$!
fi

if want subcommands; then
  step "subcommands on a small rope run"
  r=$O/rope
  "$P" train --config configs/base.json --set model.pos_encoding.kind=rope --set train.max_iters=300 \
    --set train.eval_interval=100 --set data.probes.passkey.fraction=0.6 --out "$r" --stop-at 150 >"$O/train1.log" 2>&1 || fail "train to 150"
  "$P" train --resume "$r" >"$O/train2.log" 2>&1 || fail "resume"
  "$P" train --config configs/base.json --set model.pos_encoding.kind=rope --set train.max_iters=300 \
    --set train.eval_interval=100 --set data.probes.passkey.fraction=0.6 --out "$O/rope-straight" >"$O/train3.log" 2>&1 || fail "straight train"
  grep -h -E "device|step +(100|200|300)\b" "$O/train1.log" "$O/train2.log" "$O/train3.log" | head -20
  "$PY" -c 'import json, sys; a, b = (json.load(open(d + "/summary.json"))["final_val_loss"] for d in sys.argv[1:])
print("resumed and straight runs: final val loss", a, b, "the same" if a == b else "DIFFERENT")' "$r" "$O/rope-straight"
  "$P" eval --run "$r" || fail "eval"
  "$P" probe --run "$r" --trials 20 || fail "probe"
  "$P" attention --run "$r" --lengths 64,256 --no-plot | tail -n 8 || fail "attention"
  "$P" sample --run "$r" --prompt "The " --tokens 64 --temperature 0 || fail "sample (cache)"
  "$P" sample --run "$r" --prompt "The " --tokens 64 --temperature 0 --no-cache || fail "sample (no cache)"
fi

if want bench; then
  step "bench on cuda: poslab, the twin, the twin compiled"
  # The small model once each (launch-bound); the GPU recipe interleaved, REPEATS times (docs/benchmarks.md).
  c=configs/bench/nanogpt-cpu.json
  "$P" bench --config $c --precision fp32 --steps 50 --json "$O/bench-nanogpt-cpu-fp32.json" | tail -n 8 \
    || fail "bench small"
  "$PY" scripts/bench/train_twin.py --config $c --device cuda --precision fp32 --steps 50 \
    --json "$O/twin-nanogpt-cpu-fp32.json" | tail -n 1 || fail "twin small"
  c=configs/bench/shakespeare-char-gpu.json
  for rep in $(seq "${POSLAB_GPU_REPEATS:-3}"); do
    for prec in bf16 fp32; do
      "$P" bench --config $c --precision $prec --steps 200 --json "$O/bench-gpu-$prec-$rep.json" | tail -n 8 \
        || fail "bench $prec"
    done
    "$PY" scripts/bench/train_twin.py --config $c --device cuda --precision bf16 --steps 200 \
      --json "$O/twin-gpu-bf16-$rep.json" | tail -n 1 || fail "twin"
    "$PY" scripts/bench/train_twin.py --config $c --device cuda --precision bf16 --compile --steps 200 \
      --json "$O/twin-compiled-gpu-bf16-$rep.json" | tail -n 1 || fail "compiled twin"
  done
  "$P" bench --config configs/bench/nanogpt-cpu.json --generate 256 | tail -n 3 || fail "bench --generate"
fi

if want mainjob; then
  step "main job on cuda"
  start=$(date +%s)
  timeout "${POSLAB_MAINJOB_TIMEOUT:-300}" "$P" compare --config configs/experiments/quick.json --out "$O/mainjob" >"$O/mainjob.log" 2>&1 || fail "main job"
  echo "main job: $(( $(date +%s) - start )) s"
  tail -n 40 "$O/mainjob.log"
fi

if [ -n "$parity" ]; then
  step "parity (waiting)"
  wait $parity || fail "parity"
  grep -E "^  \[|reference parity" "$O/parity.log"
fi
echo
[ $ok -eq 0 ] && echo "gpu check: PASS" || echo "gpu check: FAIL"
exit $ok
