#!/usr/bin/env bash
# Data-parallel training over c10d: two ranks on 127.0.0.1, launched directly through RANK/WORLD_SIZE
# (and through torchrun where it is installed). Skipped (77) on a build without Gloo.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
PY=/usr/bin/python3
export POSLAB_DIST_TIMEOUT_S=30  # a broken test fails in 30 s instead of the default 300

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Tasks (copy): targets outside the answer are -1, so the loss normalisation is exercised.
printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},
 "train": {"max_iters": 20, "batch_size": 8, "eval_interval": 10, "eval_iters": 3, "log_interval": 1,
           "precision": "fp32", "threads": 1}}\n' > tiny.json

# ranks2 OUTPREFIX -- poslab args...: rank 0 and 1 at once; logs in OUTPREFIX.r0/.r1, statuses in OUTPREFIX.rc0/.rc1.
# Each waits for its own two ranks only: the lone launches below run in the background meanwhile.
ranks2() {
  local prefix=$1 port
  local -a jobs=()
  shift 2
  port=$(free_port)
  for r in 0 1; do
    (RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port POSLAB_DIST_CHECK_WEIGHTS=1 \
       "$POSLAB" "$@" > "$prefix.r$r" 2>&1; echo $? > "$prefix.rc$r") &
    jobs+=($!)
  done
  wait "${jobs[@]}"
}
ok2() { [ "$(cat "$1.rc0")" = 0 ] && [ "$(cat "$1.rc1")" = 0 ]; }

# A build without Gloo refuses a distributed launch at once, naming what to install.
out=$(RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) POSLAB_DIST_TIMEOUT_S=2 \
      "$POSLAB" train -c tiny.json --out probe 2>&1)
if [[ "$out" == *"no Gloo"* ]]; then
  check "the refusal names libgloo-dev" grep -q libgloo-dev <<< "$out"
  echo "SKIP: this poslab was built without Gloo (install libgloo-dev and rebuild): $out"
  exit 77
fi
check "no peer: rank 1 fails to connect within the timeout, one line (got: $out)" \
  bash -c '[[ "$1" == *"connecting to MASTER_ADDR=127.0.0.1"* ]] && [ $(printf "%s\n" "$1" | grep -c .) -eq 1 ]' _ "$out"
check "no peer: nothing written" test ! -e probe

# Four lone rank-0 launches that only wait, doing no work (3 s and 7 s to their timeouts, 4 s to a signal),
# run in the background from here beside the training below; each case's checks are where it is told.
ports=()
while [ ${#ports[@]} -lt 4 ]; do
  p=$(free_port)
  [[ " ${ports[*]} " == *" $p "* ]] || ports+=("$p")
done
lone_start=$(date +%s)
# (f) A config refused for the world size on a rank 0 alone (below).
{ RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=${ports[0]} POSLAB_DIST_TIMEOUT_S=3 \
    "$POSLAB" train -c tiny.json --out bad5 > lone5.log 2>&1
  echo $? > lone5.rc; } &
lone_jobs=($!)
# (f) A rank 0 started alone with a valid config (below).
{ RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=${ports[1]} POSLAB_DIST_TIMEOUT_S=7 \
    "$POSLAB" train -c tiny.json --out alone7 > alone7.log 2>&1
  echo $? > alone7.rc; } &
lone_jobs+=($!)
# Stray launch variables, and a signal at the rendezvous (below).
{ RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=${ports[2]} POSLAB_DIST_TIMEOUT_S=30 \
    timeout --preserve-status 4 "$POSLAB" train -c tiny.json --set model.n_layer=0 --out stray > stray.log 2>&1
  echo $? > stray.rc; date +%s > stray.end; } &
lone_jobs+=($!)
{ RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=${ports[3]} POSLAB_DIST_TIMEOUT_S=30 \
    timeout --preserve-status -s INT 4 "$POSLAB" train -c tiny.json --out alone > alone.log 2>&1
  echo $? > alone.rc; date +%s > alone.end; } &
lone_jobs+=($!)

# losses_match A B TOL: every train/val loss of metrics A equals B's within TOL (absolute).
losses_match() {
  "$PY" - "$1" "$2" "$3" <<'PY'
import json, sys
rows = [[json.loads(l) for l in open(p)] for p in sys.argv[1:3]]
tol = float(sys.argv[3])
assert len(rows[0]) == len(rows[1]) > 0, (len(rows[0]), len(rows[1]))
worst = 0.0
for a, b in zip(*rows):
    assert a["step"] == b["step"]
    for k in ("train_loss", "val_loss"):
        if k in a:
            worst = max(worst, abs(a[k] - b[k]))
print("largest difference", worst)
sys.exit(0 if worst <= tol else 1)
PY
}

# (a) Two ranks, the same global batch: the losses of one process to float tolerance. The gradient
# all-reduce adds the ranks' partial sums in another order than one process does (~1e-7 relative
# per step, compounding over 20 steps): 1e-5 absolute on losses of ~3.8.
"$POSLAB" train -c tiny.json --out single > single.log 2>&1
ranks2 two -- train -c tiny.json --out two
# Under OpenMP binding, ranks on one machine given the same CPUs all pin their first thread to the same CPU:
# each says so, naming what to do; without binding nothing is said.
OMP_PROC_BIND=true ranks2 bound -- train -c tiny.json --set train.max_iters=2 --out bound
check "OMP_PROC_BIND=true with two local ranks: each warns of the shared CPUs" \
  bash -c 'grep -q "rank 0: OpenMP binds threads .*(taskset -c" bound.r0 && grep -q "rank 1: OpenMP binds threads" bound.r1'
check "... and still trains" ok2 bound
check "without binding no such warning" bash -c '! grep -q "OpenMP binds threads" two.r0 two.r1'
check "two ranks finish (exit $(cat two.rc0), $(cat two.rc1))" ok2 two
check "two ranks log the single-process losses within 1e-5" losses_match single/metrics.jsonl two/metrics.jsonl 1e-5
# (b) ...with bit-identical weights on both ranks after every step (POSLAB_DIST_CHECK_WEIGHTS).
check "weights compared after all 20 steps" grep -q '"replicas_verified_steps": 20' two/summary.json
check "the summary reports the all-reduce time" grep -q '"allreduce_ms"' two/summary.json
check "rank 1 writes nothing and logs no progress" bash -c '! grep -q "step " two.r1 && [ $(ls two | wc -l) -eq 6 ]'

# Randomized positions are drawn from the stream every rank shares: still the single-process losses.
rnd="--set model.pos_encoding.randomize.max_position=64"
"$POSLAB" train -c tiny.json $rnd --out single-rnd > single-rnd.log 2>&1
ranks2 two-rnd -- train -c tiny.json $rnd --out two-rnd
check "randomized positions: two ranks log the single-process losses" losses_match single-rnd/metrics.jsonl two-rnd/metrics.jsonl 1e-5

# LibTorch's clipping and AdamW (not the fused CPU pass) read the all-reduced .grad() too.
"$POSLAB" train -c tiny.json --set train.fused_adamw=false --out single-unfused > /dev/null 2>&1
ranks2 two-unfused -- train -c tiny.json --set train.fused_adamw=false --out two-unfused
check "LibTorch's AdamW: two ranks log the single-process losses" losses_match single-unfused/metrics.jsonl two-unfused/metrics.jsonl 1e-5

# (c) Exact resume under two ranks, with dropout (each rank's own RNG stream is in the checkpoint).
drop="--set model.dropout=0.1"
ranks2 straight -- train -c tiny.json $drop --out straight
ranks2 split -- train -c tiny.json $drop --out split --stop-at 7
check "two ranks stop at --stop-at" grep -q '"status": "interrupted"' split/summary.json
ranks2 resumed -- train --resume split
check "two ranks resume (exit $(cat resumed.rc0), $(cat resumed.rc1))" ok2 resumed
check "dropout: weights identical on both ranks after the resumed steps" grep -q '"replicas_verified_steps": 13' split/summary.json
check "resumed losses equal the unbroken run's exactly" losses_match straight/metrics.jsonl split/metrics.jsonl 0

# (e) Another world size on resume is refused, naming both sizes.
"$POSLAB" train -c tiny.json $drop --out split1 --stop-at 5 > /dev/null 2>&1
expect_fail 2 "written by 2 rank(s), this launch has 1" -- "$POSLAB" train --resume split
ranks2 wrong -- train --resume split1
check "a one-rank checkpoint resumed by two ranks is refused on both" \
  bash -c 'grep -q "written by 1 rank(s), this launch has 2" wrong.r0 && [ "$(cat wrong.rc0)" = 2 ] && [ "$(cat wrong.rc1)" = 2 ]'

# (f) Bad launch variables: one line, exit 2, nothing written.
export MASTER_PORT=29500
expect_fail 2 "RANK=2 must be below WORLD_SIZE=2" -- env RANK=2 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "$POSLAB" train -c tiny.json --out bad1
expect_fail 2 "WORLD_SIZE='two' is not an integer" -- env RANK=0 WORLD_SIZE=two MASTER_ADDR=127.0.0.1 "$POSLAB" train -c tiny.json --out bad2
expect_fail 2 "MASTER_ADDR is not set" -- env RANK=0 WORLD_SIZE=2 "$POSLAB" train -c tiny.json --out bad3
expect_fail 2 "WORLD_SIZE is missing" -- env RANK=0 "$POSLAB" train -c tiny.json --out bad4
# A config refused for the world size on a rank 0 alone: it waits (3 s here) for ranks that never come to
# read why, saying so first, then ends with the error as its one error line.
wait "${lone_jobs[0]}"
check "batch not divisible by the world size: exit 2 (got $(cat lone5.rc)), the wait said, then one error line" \
  bash -c '[ "$(cat lone5.rc)" = 2 ] && [ $(grep -c . lone5.log) -eq 2 ] &&
           grep -q "^poslab: distributed launch (RANK/WORLD_SIZE, world size 3): rank 0 stopped before the rendezvous: train.batch_size: 8 is not divisible by the world size 3.*; waiting up to 3 s" lone5.log &&
           tail -1 lone5.log | grep -q "^poslab: error: train.batch_size: 8 is not divisible by the world size 3 (it is the global batch" &&
           [ ! -e bad5 ]'
# A rank 0 started alone with a valid config waits for ranks not started yet: after a few seconds it says so
# (the launch looked hung), then gives up at the timeout naming it.
wait "${lone_jobs[1]}"
check "rank 0 alone: the wait is said after a few seconds, then it fails at the timeout (exit $(cat alone7.rc))" \
  bash -c '[ "$(cat alone7.rc)" != 0 ] && grep -q "distributed (rank 0 of 2): waiting for the other ranks at the rendezvous (127.0.0.1:[0-9]*), up to 7 s in all (POSLAB_DIST_TIMEOUT_S)" alone7.log && [ ! -e alone7/checkpoint.pt ]'
expect_fail 2 "SLURM_PROCID=4 must be below SLURM_NTASKS=4" -- env SLURM_PROCID=4 SLURM_NTASKS=4 MASTER_ADDR=h "$POSLAB" train -c tiny.json --out bad6
expect_fail 2 "OMPI_COMM_WORLD_SIZE='' is not an integer" -- env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE= MASTER_ADDR=h "$POSLAB" train -c tiny.json --out bad7
unset MASTER_PORT
check "bad launches write nothing" bash -c '! ls -d bad* 2> /dev/null'

# (g) Every rank must run rank 0's config: one launched with another is refused at the rendezvous,
# and every rank stops with one line naming the key, before anything is written (these used to run on
# silently, abort in Gloo, or hang until the timeout).
# ranks2_sets OUTPREFIX "ARGS OF RANK 0" "ARGS OF RANK 1" -- poslab args...: as ranks2, each rank with its own args.
ranks2_sets() {
  local prefix=$1 port r extra
  local -a own=("$2" "$3") jobs=()
  shift 4
  port=$(free_port)
  for r in 0 1; do
    read -r -a extra <<< "${own[$r]}"
    (RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port POSLAB_DIST_TIMEOUT_S=10 \
       "$POSLAB" "$@" "${extra[@]}" > "$prefix.r$r" 2>&1; echo $? > "$prefix.rc$r") &
    jobs+=($!)
  done
  wait "${jobs[@]}"
}
# refused2 OUTPREFIX: both ranks exited 2, each with one "poslab:" line, and no run directory appeared.
refused2() {
  [ "$(cat "$1.rc0")" = 2 ] && [ "$(cat "$1.rc1")" = 2 ] && [ "$(grep -c "poslab:" "$1.r0")" -eq 1 ] &&
    [ "$(grep -c "poslab:" "$1.r1")" -eq 1 ] && [ ! -e "$1" ]
}
start=$(date +%s)
ranks2_sets lr "" "--set train.learning_rate=0.05" -- train -c tiny.json --out lr
check "another learning rate on rank 1: both ranks refuse, exit 2, nothing written (exit $(cat lr.rc0), $(cat lr.rc1))" refused2 lr
check "...rank 1 names the key and both values" \
  grep -q "^poslab: error: rank 1's config differs from rank 0's at train.learning_rate: 0.05 here, 0.001 on rank 0" lr.r1
check "...and so does rank 0" grep -q "^poslab: error: rank 1's config differs from rank 0's at train.learning_rate: 0.05 on rank 1, 0.001 here" lr.r0
ranks2_sets iters "--set train.max_iters=30" "" -- train -c tiny.json --out iters
check "another max_iters (which hung both ranks): refused on both" refused2 iters
check "...naming train.max_iters" grep -q "at train.max_iters: 20 here, 30 on rank 0" iters.r1
ranks2_sets embd "" "--set model.n_embd=32" -- train -c tiny.json --out embd
check "another n_embd (which aborted in Gloo): refused on both" refused2 embd
check "...naming model.n_embd" grep -q "at model.n_embd: 32 on rank 1, 16 here" embd.r0
ranks2_sets bucket "" "--set train.dist_bucket_mb=1" -- train -c tiny.json --out bucket
check "another dist_bucket_mb: refused on both" refused2 bucket
# A rank told another world size (it would wait for ranks that never come): refused on both.
port=$(free_port) ws_jobs=()
for r in 0 1; do
  (RANK=$r WORLD_SIZE=$(( r == 0 ? 2 : 4 )) MASTER_ADDR=127.0.0.1 MASTER_PORT=$port POSLAB_DIST_TIMEOUT_S=10 \
     "$POSLAB" train -c tiny.json --out ws > "ws.r$r" 2>&1; echo $? > "ws.rc$r") &
  ws_jobs+=($!)
done
wait "${ws_jobs[@]}"
check "another WORLD_SIZE on rank 1: refused on both" refused2 ws
check "...naming the world sizes" grep -q "at resolved.world_size: 4 here, 2 on rank 0" ws.r1
check "five refusals at once, well within the timeouts ($(( $(date +%s) - start )) s)" test $(( $(date +%s) - start )) -le 20
# Ranks that would start differently call different collectives and used to wait for each other until the
# timeout: --stop-at on one rank only, and a run directory that one rank finds and another does not.
start=$(date +%s)
ranks2_sets stopat "--stop-at 7" "" -- train -c tiny.json --out stopat
check "--stop-at on rank 0 only: refused on both" refused2 stopat
check "...naming it" grep -q "at resolved.stop_at: 0 here, 7 on rank 0; every rank stops: give every rank the same --stop-at" stopat.r1
"$POSLAB" train -c tiny.json --out found --stop-at 5 > found.log 2>&1
ranks2_sets startdiff "--out found" "--out notfound" -- train -c tiny.json --resume-if-exists
check "one rank finds the run, the other does not: both exit 2 (exit $(cat startdiff.rc0), $(cat startdiff.rc1))" \
  bash -c '[ "$(cat startdiff.rc0)" = 2 ] && [ "$(cat startdiff.rc1)" = 2 ] && [ ! -e notfound ]'
check "...naming what differs and why" grep -q 'at resolved.start: a new run here, resuming a run on rank 0; every rank stops: every rank must find the same run directory' startdiff.r1
check "...both well within the 10 s timeout ($(( $(date +%s) - start )) s)" test $(( $(date +%s) - start )) -le 20

# A rank that stops on its own checks before the rendezvous tells the others, which stop at once naming
# its error (they used to wait for it until the timeout): rank 1, then rank 0.
start=$(date +%s)
ranks2_sets early1 "" "--set model.n_layer=0" -- train -c tiny.json --out early1
check "rank 1 refuses its config: it exits 2, rank 0 exits 1 (exit $(cat early1.rc0), $(cat early1.rc1))" \
  bash -c '[ "$(cat early1.rc0)" = 1 ] && [ "$(cat early1.rc1)" = 2 ]'
check "...rank 0 names rank 1 and its error, in one line" \
  bash -c 'grep -q "^poslab: failed: distributed (rank 0 of 2): rank 1 stopped before the rendezvous: .*model.n_layer must be positive, got 0; every rank stops$" early1.r0 && [ $(grep -c . early1.r0) -eq 1 ]'
ranks2_sets early0 "--set model.n_layer=0" "" -- train -c tiny.json --out early0
check "rank 0 refuses its config: rank 1 exits 1 naming it" \
  bash -c '[ "$(cat early0.rc1)" = 1 ] && grep -q "(rank 1 of 2): rank 0 stopped before the rendezvous: .*model.n_layer must be positive" early0.r1'
check "...both pairs well within the 10 s timeout ($(( $(date +%s) - start )) s)" test $(( $(date +%s) - start )) -le 15
check "...and nothing written" bash -c '! ls -d early0 early1 2> /dev/null'
# A lone process with launch variables left set by accident: no other rank will read why rank 0 stopped.
# It says so at once (it used to be silent for the whole wait), and a signal then ends it at once (it used
# to promise a checkpoint and wait on).
# (Started in the background at the top; it and the lone rank below wait 4 s for their signals.)
# A signal while rank 0 waits at the rendezvous for a rank that never comes ends it at once (exit 130,
# nothing written); it used to promise a checkpoint and wait on until the timeout.
wait "${lone_jobs[@]}"
check "stray launch variables: rank 0 names its error and the wait before the signal" \
  grep -q "^poslab: distributed launch (RANK/WORLD_SIZE, world size 2): rank 0 stopped before the rendezvous: model.n_layer must be positive, got 0; waiting up to 30 s for the other ranks to read it" stray.log
check "...the signal ends it at once, exit 130, not 30 s later ($(( $(cat stray.end) - lone_start )) s, exit $(cat stray.rc))" \
  bash -c '[ "$(cat stray.rc)" = 130 ] && [ $(( $(cat stray.end) - $1 )) -le 10 ]' _ "$lone_start"
check "...naming the error again, and no checkpoint promised" \
  bash -c 'grep -q "^poslab: error: model.n_layer must be positive, got 0 (stopped by a signal" stray.log && ! grep -q checkpoint stray.log'
check "...and nothing written" test ! -e stray
check "a signal at the rendezvous: exit 130 at once ($(( $(cat alone.end) - lone_start )) s, exit $(cat alone.rc))" \
  bash -c '[ "$(cat alone.rc)" = 130 ] && [ $(( $(cat alone.end) - $1 )) -le 10 ]' _ "$lone_start"
check "...saying so, no checkpoint promised, nothing written" \
  bash -c 'grep -q "^poslab: interrupted at the rendezvous, before training began (nothing written)" alone.log &&
           ! grep -q checkpoint alone.log && [ ! -e alone ]'
# What may differ between machines: train.threads, and the path of the same data.
"$PY" -c 'import random; r = random.Random(0); print("\n".join(" ".join(r.choice(["ab", "ba", "cab", "d"]) for _ in range(12)) for _ in range(200)))' > a.txt
mkdir -p elsewhere && cp a.txt elsewhere/a.txt && { cat a.txt; echo "ab ba cab d"; } > other.txt
text="--set data.kind=text --set train.max_iters=4 --set train.eval_interval=2"
ranks2_sets paths "--set data.path=$WORK/a.txt --set train.threads=2" "--set data.path=$WORK/elsewhere/a.txt" -- \
  train -c tiny.json $text --out paths
check "the same data at another path, other threads: two ranks train (exit $(cat paths.rc0), $(cat paths.rc1))" ok2 paths
ranks2_sets data "--set data.path=$WORK/a.txt" "--set data.path=$WORK/other.txt" -- train -c tiny.json $text --out data
check "other data (one line more) under the data path: refused on both" refused2 data
check "...naming its count of training tokens" grep -q "at resolved.train_tokens: " data.r0

# (d) A rank killed mid-run: the other exits non-zero, in one line, well within the timeout, and
# the last checkpoint still loads.
sed 's/"max_iters": 20/"max_iters": 100000/' tiny.json > long.json
# start_two_ranks OUT TIMEOUT_S: two ranks of a long run in the background (pids[0], pids[1]; logs
# OUT.r0, OUT.r1), returning once the first checkpoint is written.
start_two_ranks() {
  local out=$1 timeout_s=$2 port r
  port=$(free_port)
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port POSLAB_DIST_TIMEOUT_S=$timeout_s \
      "$POSLAB" train -c long.json --out "$out" > "$out.r$r" 2>&1 &
    pids[$r]=$!
  done
  for _ in $(seq 1 300); do [ -f "$out/checkpoint.pt" ] && break; sleep 0.1; done
}
start_two_ranks killed 20
sleep 1
kill -9 "${pids[1]}"
start=$(date +%s)
wait "${pids[0]}"
status=$? took=$(( $(date +%s) - start ))
wait "${pids[1]}" 2> /dev/null
check "the surviving rank exits 1 (got $status)" test "$status" -eq 1
check "...within the 20 s timeout (took ${took} s)" test "$took" -le 20
check "...with one line naming the failure" bash -c 'grep -qE "^poslab: failed( (while|during) [^:]*)?: distributed \(rank 0 of 2\)" killed.r0 && [ $(grep -c "poslab:" killed.r0) -eq 1 ]'
check "...and marks the run failed" grep -q '"status": "failed"' killed/summary.json
"$POSLAB" eval --run killed --lengths 8 --batches 1 > /dev/null 2>&1
check "the last checkpoint loads" test $? -eq 0

# SIGTERM to one rank: the ranks agree to stop, rank 0 checkpoints, and every rank exits 130 (not only
# the one that saw the signal), so a launcher reading any rank's status sees the interruption.
start_two_ranks termed 20
kill -TERM "${pids[1]}"
wait "${pids[0]}"
status0=$?
wait "${pids[1]}"
status1=$?
check "SIGTERM to rank 1: both ranks exit 130 (got $status0, $status1)" test "$status0" -eq 130 -a "$status1" -eq 130
check "...and the run is marked interrupted" grep -q '"status": "interrupted"' termed/summary.json

# A rank that hangs (stopped, not dead: its sockets stay open) is given up after POSLAB_DIST_TIMEOUT_S.
start_two_ranks hung 4
kill -STOP "${pids[1]}"
start=$(date +%s)
wait "${pids[0]}"
status=$? took=$(( $(date +%s) - start ))
kill -KILL "${pids[1]}"
wait "${pids[1]}" 2> /dev/null
check "a hung peer: rank 0 exits 1 (got $status)" test "$status" -eq 1
check "...after the 4 s timeout, not much later (took ${took} s)" test "$took" -le 10
check "...saying it timed out, in one line" bash -c 'grep -qE "^poslab: failed( (while|during) [^:]*)?: distributed \(rank 0 of 2\): .*Timed out" hung.r0 && [ $(grep -c "poslab:" hung.r0) -eq 1 ]'

# torchrun (Debian 12's 1.13 wants the underscore flags, and -r/-t set: its default of 0 crashes on
# Python 3.11). Its agent owns MASTER_PORT; the ranks join as store clients. Same ranks, same layout:
# the very losses of the direct launch.
# The launcher must match the build's LibTorch (its agent hosts the store the ranks join): POSLAB_TORCHRUN
# names it (scripts/libtorch2/pypi_cuda.sh passes the wheel's own), else Debian's.
TORCHRUN=${POSLAB_TORCHRUN:-/usr/bin/torchrun}
if [ -x "$TORCHRUN" ] && "$TORCHRUN" --help > /dev/null 2>&1; then
  "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node 2 --master_port "$(free_port)" \
    "$POSLAB" train -c tiny.json --out via-torchrun > torchrun.log 2>&1
  check "torchrun with two ranks finishes (exit $?)" test -f via-torchrun/model.pt
  check "torchrun logs the direct launch's losses exactly" losses_match two/metrics.jsonl via-torchrun/metrics.jsonl 0
  # A rank SIGKILLed twice mid-run under `torchrun --max_restarts`: torchrun restarts every rank with
  # the same command, `--resume-if-exists` continues from the last checkpoint (every 10 steps here),
  # and the final weights equal an uninterrupted run's bit for bit.
  # (2 layers, 64 wide: steps slow enough, ~10 ms, for the kills to land mid-run on a fast machine too)
  sed 's/"max_iters": 20/"max_iters": 400, "checkpoint_interval": 10/; s/"log_interval": 1/"log_interval": 10/;
       s/"n_layer": 1, "n_embd": 16/"n_layer": 2, "n_embd": 64/' tiny.json > restart.json
  elastic() {  # elastic OUT: the run under torchrun, restarted up to 3 times
    "$TORCHRUN" --no_python -r 1 -t 1 --nproc_per_node 2 --max_restarts 3 --monitor_interval 1 \
      --master_port "$(free_port)" "$POSLAB" train -c restart.json --out "$1" --resume-if-exists
  }
  start=$(date +%s)
  elastic uninterrupted > uninterrupted.log 2>&1
  check "the uninterrupted elastic run finishes (exit $?, $(( $(date +%s) - start )) s)" test -f uninterrupted/model.pt
  last_step() { tail -1 restarted/metrics.jsonl 2> /dev/null | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read() or "{}").get("step", -1))' 2> /dev/null || echo -1; }
  rank1_pid() {  # the live rank-1 worker of this run (RANK=1 in its environment)
    local p
    for p in $(pgrep -f -- "--out restarted --resume-if-exists"); do
      tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx RANK=1 && { echo "$p"; return; }
    done
  }
  elastic restarted > restarted.log 2>&1 &
  launcher=$!
  kills=0
  for threshold in 60 200; do
    for _ in $(seq 1 600); do [ "$(last_step)" -ge "$threshold" ] && break; sleep 0.05; done
    pid=$(rank1_pid)
    [ -n "$pid" ] && [ "$(last_step)" -lt 390 ] && kill -9 "$pid" && kills=$((kills + 1))
    sleep 1
  done
  wait "$launcher"
  status=$?
  check "torchrun --max_restarts finishes the run after rank 1 was SIGKILLed twice (exit $status, kills $kills)" \
    test "$status" -eq 0 -a "$kills" -eq 2 -a -f restarted/model.pt
  check "...resuming from a checkpoint each time" test "$(grep -c 'continuing the run in restarted' restarted.log)" -ge 2
  check "...to the uninterrupted run's weights, bit for bit" "$PY" -c '
import sys, torch
a, b = torch.load("uninterrupted/model.pt"), torch.load("restarted/model.pt")
assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), "weights differ"'
  check "...and its losses, after the recomputed steps" losses_match uninterrupted/metrics.jsonl restarted/metrics.jsonl 0
else
  echo "note: $TORCHRUN missing or broken (python3-torch): its launch is not tested here"
fi
# Open MPI's mpirun: ranks from OMPI_COMM_WORLD_*, the store address passed with -x.
if command -v mpirun > /dev/null; then
  as_root=(); [ "$(id -u)" -eq 0 ] && as_root=(--allow-run-as-root)
  mpirun "${as_root[@]}" --oversubscribe -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$(free_port)" \
    "$POSLAB" train -c tiny.json --out via-mpirun > mpirun.log 2>&1
  check "mpirun with two ranks finishes (exit $?)" test -f via-mpirun/model.pt
  check "mpirun logs the direct launch's losses exactly" losses_match two/metrics.jsonl via-mpirun/metrics.jsonl 0
else
  echo "note: no mpirun (openmpi-bin): its launch is not tested here"
fi
finish
