#!/usr/bin/env bash
# CPU affinity. OpenMP binding in the environment (OMP_PROC_BIND, OMP_PLACES) pins the first thread to one
# CPU as the runtime loads; poslab's re-exec (choosing OMP_WAIT_POLICY) and compare's cells inherited that
# pin, so every thread of a run shared one core. And the default thread count follows the CPUs the process
# may use (taskset, a cgroup's cpuset), not the machine's. Skipped (77) on a machine with one CPU.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
[ "$(nproc)" -ge 2 ] || { echo "skip: one CPU"; exit 77; }
command -v taskset > /dev/null || { echo "skip: no taskset"; exit 77; }
printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},\n "train": {"max_iters": 1000000, "eval_interval": 1000, "log_interval": 10, "precision": "fp32"}}\n' > long.json

# The CPUs any thread of process $1 may run on, as "0,1,...", from /proc (the union over its threads).
process_cpus() {
  /usr/bin/python3 - "$1" <<'PY'
import glob, sys
cpus = set()
for status in glob.glob("/proc/%s/task/*/status" % sys.argv[1]):
    for line in open(status):
        if line.startswith("Cpus_allowed_list:"):
            for part in line.split()[1].split(","):
                a, _, b = part.partition("-")
                cpus.update(range(int(a), int(b or a) + 1))
print(",".join(str(c) for c in sorted(cpus)))
PY
}
wait_for_steps() { for _ in $(seq 1 300); do grep -q train_loss "$1/metrics.jsonl" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
count() { [ -z "$1" ] && echo 0 || echo "$1" | tr ',' '\n' | grep -c .; }

# 1. poslab train with OMP_PROC_BIND=true and no wait policy of its own: it re-executes itself, and the new
#    image's threads run on every CPU the process was given (before: all on CPU 0).
env -u OMP_WAIT_POLICY OMP_PROC_BIND=true "$POSLAB" train -c long.json --set train.threads=2 --out bind > bind.log 2>&1 &
pid=$!
wait_for_steps bind
cpus=$(process_cpus $pid)
check "OMP_PROC_BIND=true: the re-executed run's threads use 2 or more CPUs (got '$cpus')" test "$(count "$cpus")" -ge 2
check "... and it did re-execute (OMP_WAIT_POLICY=ACTIVE in its run line)" grep -q "OMP_WAIT_POLICY=ACTIVE" bind.log
kill -INT $pid; wait $pid

# 2. The default thread count is the CPUs the process may use: one under taskset -c 0.
taskset -c 0 "$POSLAB" train -c long.json --set train.max_iters=1 --out one > one.log 2>&1
check "taskset -c 0: the run takes 1 thread by default" grep -q " 1 thread (" one.log
taskset -c 0,1 "$POSLAB" train -c long.json --set train.max_iters=1 --out two > two.log 2>&1
check "taskset -c 0,1: 2 threads" grep -q " 2 threads (" two.log
check "... and no warning about too many threads" bash -c '! grep -q "threads beyond the CPUs" two.log'
# More threads than CPUs: the run goes on, warned once that they take turns at the CPU.
taskset -c 0 "$POSLAB" train -c long.json --set train.max_iters=1 --set train.threads=2 --out over > over.log 2>&1
check "train.threads above the CPUs is warned, naming the key and the count" \
  grep -q "train.threads: 2 threads on 1 usable CPU: threads beyond the CPUs take turns" over.log
check "... once" test "$(grep -c 'threads beyond the CPUs' over.log)" -eq 1

# The default thread count honours OMP_NUM_THREADS (as PyTorch does; torchrun sets it to 1 per rank), while
# compare's jobs still divide the CPUs.
OMP_NUM_THREADS=1 "$POSLAB" train -c long.json --set train.max_iters=1 --out env1 > env1.log 2>&1
check "OMP_NUM_THREADS=1: the run takes 1 thread and says why" grep -q " 1 thread (OMP_NUM_THREADS=1, " env1.log
OMP_NUM_THREADS=1 "$POSLAB" train -c long.json --set train.max_iters=1 --set train.threads=2 --out env2 > env2.log 2>&1
check "... train.threads wins over it, and the run line says so" grep -q " 2 threads (train.threads, OMP_WAIT_POLICY=" env2.log
check "... without naming OMP_NUM_THREADS, which did not decide" bash -c '! grep -q "OMP_NUM_THREADS=1" env2.log' 
printf '{"base": "long.json", "set": {"train.max_iters": 30}, "grid": {"model.pos_encoding.kind": ["rope", "alibi"]}}\n' > short_cells.json
OMP_NUM_THREADS=1 "$POSLAB" compare -c short_cells.json --out short -j 2 > short.log 2>&1
check "OMP_NUM_THREADS=1 with compare -j 2: both cells start before either is done" /usr/bin/python3 -c "
lines = open('short.log').read().splitlines()
second = next(i for i, l in enumerate(lines) if '[2/2] running' in l)
first_done = next(i for i, l in enumerate(lines) if ' done in ' in l)
assert second < first_done, (second, first_done)"

# 3. compare -j 2 under OpenMP binding: each cell runs on its own share of the CPUs (before: both on CPU 0).
printf '{"base": "long.json", "grid": {"model.pos_encoding.kind": ["rope", "alibi"]}}\n' > two_cells.json
OMP_PROC_BIND=true OMP_WAIT_POLICY=ACTIVE "$POSLAB" compare -c two_cells.json --out grid -j 2 > grid.log 2>&1 &
cpid=$!
cells=""
for _ in $(seq 1 300); do
  cells=$(pgrep -P $cpid | tr '\n' ' ')
  [ "$(echo $cells | wc -w)" -ge 2 ] && [ -n "$(ls grid/cells/*/metrics.jsonl 2>/dev/null | head -2 | tail -1)" ] && break
  sleep 0.1
done
set -- $cells
a=$(process_cpus "${1:-0}")
b=$(process_cpus "${2:-0}")
check "compare -j 2 with OMP_PROC_BIND=true: two cells running (got '$cells')" test "$#" -ge 2
check "... on CPUs of their own ('$a' and '$b')" /usr/bin/python3 -c "
a, b = set('$a'.split(',')) - {''}, set('$b'.split(',')) - {''}
assert a and b and not (a & b), (a, b)"
kill -INT $cpid; wait $cpid
finish
