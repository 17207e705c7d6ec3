#!/usr/bin/env bash
# Bad input gets a one-line error naming the file or key, exit status 2, and nothing half-written.
source "$(dirname "$0")/lib.sh"
cd "$WORK"
printf '{"model": {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 40}, "data": {"max_len": 8},\n "train": {"max_iters": 3, "precision": "fp32"}}\n' > ok.json
printf '{\n  "model": {"n_layer": }\n}\n' > malformed.json
printf '{"model": {"n_layers": 2}}\n' > unknown.json
printf '{"model": {"n_layer": "two"}}\n' > wrongtype.json
printf '{"train": {"learning_rate": -1}}\n' > range.json
printf '{"model": {"pos_encoding": {"kind": "zigzag"}}}\n' > kind.json
printf '{"data": {"task": "juggle"}}\n' > task.json
printf '{"data": {"kind": "text", "path": "%s"}}\n' "$WORK/missing.txt" > missing.json
: > empty.txt; printf '{"data": {"kind": "text", "path": "%s"}}\n' "$WORK/empty.txt" > empty.json
printf 'short' > short.txt; printf '{"data": {"kind": "text", "path": "%s"}}\n' "$WORK/short.txt" > short.json
printf 'abc\xff\xfe def' > latin.txt; printf '{"data": {"kind": "text", "path": "%s"}}\n' "$WORK/latin.txt" > latin.json
mkdir unreadable_dir; printf '{"data": {"kind": "text", "path": "%s"}}\n' "$WORK/unreadable_dir" > dir.json

expect_fail 2 "malformed.json: malformed JSON at line 2, column" -- "$POSLAB" train -c malformed.json --out r1
# A config or experiment is read more than once: a pipe is refused by name, not read empty ("malformed JSON").
expect_fail 2 "config /dev/stdin: not a regular file" -- bash -c 'cat "$1" | "$0" train -c /dev/stdin --out r1' "$POSLAB" unknown.json
expect_fail 2 "experiment /dev/fd/" -- bash -c '"$0" compare -c <(cat "$1") --out r1' "$POSLAB" unknown.json
expect_fail 2 "unknown key 'model.n_layers'" -- "$POSLAB" train -c unknown.json --out r1
expect_fail 2 "model.n_layer must be an integer" -- "$POSLAB" train -c wrongtype.json --out r1
expect_fail 2 "train.learning_rate must be positive" -- "$POSLAB" train -c range.json --out r1
expect_fail 2 "unknown encoding 'zigzag'" -- "$POSLAB" train -c kind.json --out r1
expect_fail 2 "unknown task 'juggle'" -- "$POSLAB" train -c task.json --out r1
expect_fail 2 "missing.txt: no such file" -- "$POSLAB" train -c missing.json --out r1
expect_fail 2 "the file is empty" -- "$POSLAB" train -c empty.json --out r1
expect_fail 2 "too short" -- "$POSLAB" train -c short.json --out r1
expect_fail 2 "invalid UTF-8 at byte 3" -- "$POSLAB" train -c latin.json --out r1
expect_fail 2 "is a directory" -- "$POSLAB" train -c dir.json --out r1
expect_fail 2 "config nope.json: no such file" -- "$POSLAB" train -c nope.json --out r1
expect_fail 2 "--set model.pos.kind: unknown key 'model.pos'" -- "$POSLAB" train -c ok.json --set model.pos.kind=rope --out r1
expect_fail 2 "model.n_embd must be divisible by model.n_head" -- "$POSLAB" train -c ok.json --set model.n_embd=15 --out r1
expect_fail 2 "--set train.learning_rate: 1e999 is past the range of a number" -- "$POSLAB" train -c ok.json --set train.learning_rate=1e999 --out r1
expect_fail 2 "--set model..n_layer=2: the key path 'model..n_layer' has an empty part" -- "$POSLAB" train -c ok.json --set model..n_layer=2 --out r1
expect_fail 2 "--resume r1: no run here" -- "$POSLAB" train --resume r1
# mqar's options (data.mqar): each bad value named by its key.
MQ="--set data.task=mqar"
expect_fail 2 "data.mqar.gaps: unknown gap distribution 'zipf' (allowed: power, uniform)" -- "$POSLAB" train -c ok.json $MQ --set data.mqar.gaps=zipf --out r1
expect_fail 2 "data.mqar.power_a must be in (0, 1] (1 = uniform), got 0.0" -- "$POSLAB" train -c ok.json $MQ --set data.mqar.power_a=0 --out r1
# A data key for another kind, given on the command line, is refused rather than ignored (no run folder).
expect_fail 2 "--set data.val_fraction: data.val_fraction is read by data.kind text, but data.kind is task: add --set data.kind=text" -- "$POSLAB" train -c ok.json --set data.val_fraction=0.2 --out r-kind
check "a refused data key leaves no run folder" test ! -e r-kind
# So is an encoding option for a kind that does not read it.
expect_fail 2 "--set model.pos_encoding.rotary_fraction: model.pos_encoding.rotary_fraction is read by model.pos_encoding.kind rope, but model.pos_encoding.kind is learned: add --set model.pos_encoding.kind=rope" -- "$POSLAB" train -c ok.json --set model.pos_encoding.rotary_fraction=0.5 --out r-kind
check "a refused encoding option leaves no run folder" test ! -e r-kind
expect_fail 2 "data.mqar.space must be between 1 and 64" -- "$POSLAB" train -c ok.json $MQ --set data.mqar.space=0 --out r1
expect_fail 2 "data.mqar.queries must be >= 0 (0 = every pair), got -1" -- "$POSLAB" train -c ok.json $MQ --set data.mqar.queries=-1 --out r1
expect_fail 2 "data.mqar.queries must be an integer" -- "$POSLAB" train -c ok.json $MQ --set data.mqar.queries=all --out r1
expect_fail 2 "unknown key 'data.mqar.pairs' (allowed here: gaps, power_a, queries, space)" -- "$POSLAB" train -c ok.json $MQ --set data.mqar.pairs=4 --out r1
expect_fail 2 "data.max_len must be <= data.symbols (16) for mqar" -- "$POSLAB" train -c ok.json $MQ --set data.max_len=17 --out r1
expect_fail 2 "data.max_len: mqar with 8 items needs 41 input tokens, but model.block_size is 40" -- \
  "$POSLAB" train -c ok.json $MQ --set data.mqar.space=3 --out r1
# Encoding options: wrong type, out of range, each naming its key.
PE=model.pos_encoding
printf '{"model": {"pos_encoding": {"kind": "t5", "num_buckets": "many"}}}\n' > buckets_type.json
expect_fail 2 "$PE.num_buckets must be an integer" -- "$POSLAB" train -c buckets_type.json --out r1
expect_fail 2 "$PE.num_buckets must be at least 2" -- "$POSLAB" train -c ok.json --set $PE.kind=t5 --set $PE.num_buckets=1 --out r1
expect_fail 2 "$PE.rotary_fraction must be in (0, 1]" -- "$POSLAB" train -c ok.json --set $PE.kind=rope --set $PE.rotary_fraction=0 --out r1
expect_fail 2 "$PE.rotary_fraction must be in (0, 1]" -- "$POSLAB" train -c ok.json --set $PE.kind=rope --set $PE.rotary_fraction=1.5 --out r1
expect_fail 2 "rope scaling 'ntk': the encoding rotates one pair of dimensions" -- "$POSLAB" train -c ok.json --set $PE.kind=rope \
  --set $PE.rotary_fraction=0.25 --set $PE.rope_scaling.kind=ntk --set $PE.rope_scaling.factor=2 --out r1
expect_fail 2 "$PE.npos must be positive" -- "$POSLAB" train -c ok.json --set $PE.kind=cope --set $PE.npos=0 --out r1
expect_fail 2 "$PE.init_L must be positive" -- "$POSLAB" train -c ok.json --set $PE.kind=fire --set $PE.init_L=0 --out r1
expect_fail 2 "$PE.randomize.max_position must be 0 (off) or >= model.block_size (40)" -- "$POSLAB" train -c ok.json --set $PE.randomize.max_position=20 --out r1
expect_fail 2 "$PE.randomize.eval must be a boolean" -- "$POSLAB" train -c ok.json --set $PE.randomize.eval=yes --out r1
check "no run directory left behind by bad input" test ! -e r1

mkdir run && echo queued > run/job.log  # made beforehand, empty but for a scheduler's log: it takes a run
"$POSLAB" train -c ok.json --out run >/dev/null 2>&1
check "a good run trains" test -f run/checkpoint.pt
# A directory that holds other files is no run's: writing one there would mix the two (and resume nothing).
mkdir notrun && echo mine > notrun/mine.txt && echo x > notrun/.hidden
expect_fail 2 "--out notrun: is not empty and holds no run (mine.txt is there): a run written there would mix with its files; pick an empty or new directory" -- "$POSLAB" train -c ok.json --out notrun
check "a refused --out keeps what it held, and nothing more" test "$(ls -A notrun | tr '\n' ' ')" = ".hidden mine.txt "
expect_fail 2 "already holds a run" -- "$POSLAB" train -c ok.json --out run
expect_fail 2 "--resume-if-exists: run holds a run of another config (train.max_iters is 3 there, 4 here); pick another --out" -- "$POSLAB" train -c ok.json --set train.max_iters=4 --out run --resume-if-exists
expect_fail 2 "train.checkpoint_interval must be >= 0" -- "$POSLAB" train -c ok.json --set train.checkpoint_interval=-1 --out r8
expect_fail 2 "--lengths: '0' is not a positive integer" -- "$POSLAB" eval --run run --lengths 0
expect_fail 2 "--lengths: 8 is listed twice" -- "$POSLAB" eval --run run --lengths 8,16,8
expect_fail 2 "--lengths: '99999999999' is too large" -- "$POSLAB" eval --run run --lengths 99999999999
# A run directory the user cannot write: refused before the work, naming the run and the file (as another
# user than the run's owner; skipped where no such user can run poslab here).
chmod o+x "$WORK"  # mktemp's 0700 would keep the other user out of the run altogether
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && \
   setpriv --reuid=65534 --regid=65534 --clear-groups "$POSLAB" --help >/dev/null 2>&1 && \
   setpriv --reuid=65534 --regid=65534 --clear-groups test -r run/config.json -a ! -w run; then
  as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  expect_fail 2 "--run run: cannot write eval.json there (Permission denied)" -- "${as_nobody[@]}" "$POSLAB" eval --run run --lengths 8
  expect_fail 2 "--run run: cannot write attention.json there" -- "${as_nobody[@]}" "$POSLAB" attention --run run --lengths 8 --no-plot
  expect_fail 2 "--run run: cannot write probe-passkey.json there" -- "${as_nobody[@]}" "$POSLAB" probe --run run --lengths 8 --no-plot
else
  echo "no second user to run as: the unwritable run directory is not checked"
fi
# Given empty, a list is an error, not the default.
for cmd in eval attention probe; do
  expect_fail 2 "--lengths: '8,' ends with a comma" -- "$POSLAB" $cmd --run run --lengths 8,
  expect_fail 2 "--lengths: expected a comma-separated list of lengths" -- "$POSLAB" $cmd --run run --lengths ""
done
expect_fail 2 "--depths: expected a comma-separated list of fractions" -- "$POSLAB" probe --run run --depths ""
expect_fail 2 "--lengths: 'abc' is not a positive integer" -- "$POSLAB" eval --run run --lengths 8,abc
expect_fail 2 "run nowhere: no run here" -- "$POSLAB" eval --run nowhere --lengths 8

cp -r run truncated && head -c 1000 run/checkpoint.pt > truncated/checkpoint.pt
expect_fail 2 "truncated or corrupt" -- "$POSLAB" eval --run truncated --lengths 8
# A finished run whose checkpoint.pt was removed: --resume would start it over from step 0 under its name.
cp -r run lostckpt && rm lostckpt/checkpoint.pt
expect_fail 2 "--resume lostckpt: checkpoint.pt is missing, but lostckpt/summary.json says the run reached step" -- "$POSLAB" train --resume lostckpt
check "... and its metrics are left as they were" cmp -s run/metrics.jsonl lostckpt/metrics.jsonl
cp -r run garbage && head -c 5000 /dev/urandom > garbage/checkpoint.pt
expect_fail 2 "truncated or corrupt" -- "$POSLAB" eval --run garbage --lengths 8
cp -r run other && sed -i 's/"kind": "learned"/"kind": "rope"/' other/config.json
expect_fail 2 "trained with encoding 'learned', but the config asks for 'rope'" -- "$POSLAB" eval --run other --lengths 8
cp -r run wider && sed -i 's/"n_embd": 16/"n_embd": 32/' wider/config.json
expect_fail 2 "has shape" -- "$POSLAB" eval --run wider --lengths 8
expect_fail 2 "not in the run's vocabulary" -- "$POSLAB" sample --run run --prompt "ZZZ" --tokens 3
expect_fail 2 "--format" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --format xml
expect_fail 2 "unknown encoding 'nope'" -- "$POSLAB" pe --kind nope --positions 4 --dim 8
expect_fail 2 "--dim, the head size, must be even for rope (it rotates pairs), got 7" -- "$POSLAB" pe --kind rope --positions 4 --dim 7
# Below rotary_fraction 1 the rotated part is even by construction, as a model takes it: 9 dims at 0.5 rotate 4.
check "pe rope takes an odd head size below rotary_fraction 1" /usr/bin/python3 -c '
import json, subprocess, sys
out = json.loads(subprocess.check_output([sys.argv[1], "pe", "--kind", "rope", "--positions", "3", "--dim", "9",
                                          "--option", "rotary_fraction=0.5", "--format", "json"]))
assert len(out["angles"][0]) == 2, out["angles"]' "$POSLAB"
# pe shows only what a model can hold, and no flag is silently ignored.
expect_fail 2 "--param r2=-5.000000: kerple_log keeps r2 in [0.01, inf)" -- "$POSLAB" pe --kind kerple_log --positions 3 --dim 8 --param r1=1,r2=-5
expect_fail 2 "--param r1=-1.000000: kerple keeps r1 at 0.01 or more" -- "$POSLAB" pe --kind kerple_power --positions 3 --dim 8 --param r1=-1
expect_fail 2 "--param r2=3.000000: kerple_power keeps r2 in [0.01, 2]" -- "$POSLAB" pe --kind kerple_power --positions 3 --dim 8 --param r2=3
expect_fail 2 "--factor and --original-length need --rope-scaling KIND" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --factor 2
expect_fail 2 "--factor and --original-length need --rope-scaling KIND" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --original-length 2
expect_fail 2 "--factor: rope scaling 'yarn' needs a factor above 1" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --rope-scaling yarn --factor 1
expect_fail 2 "--dim, the head size, must be even for xpos (it rotates pairs), got 7" -- "$POSLAB" pe --kind xpos --positions 4 --dim 7
# The smallest scale_base the message suggests passes: at 127 positions 1 does not (the limit is 2 floor(80 s / ln 3.5)).
expect_fail 2 "over --positions = 127 tokens (at least 1.01), got 1" -- "$POSLAB" pe --kind xpos --positions 127 --dim 8 --option scale_base=1
check "...and the suggested 1.01 is taken" "$POSLAB" pe --kind xpos --positions 127 --dim 8 --option scale_base=1.01 --format json > /dev/null
# A key that starts with a flag's key (scale_base, scale) keeps its own name: --option, not "--scale_base".
expect_fail 2 "poslab: error: --option scale_base must be large enough that xPos's scales stay finite over --positions = 100000 tokens" -- "$POSLAB" pe --kind xpos --positions 100000 --dim 8
expect_fail 2 "--scale must be a finite number, got inf" -- "$POSLAB" pe --kind sinusoidal --positions 4 --dim 8 --scale inf
# A table larger than --max-values is refused before a record is printed; at the limit it prints, one record a value.
# ALiBi with 2 heads at 100 positions: a (2, 100, 100) bias and 2 slopes, 20002 values.
expect_fail 2 "--kind alibi gives 20002 values (bias (2, 100, 100), slopes (2)), more than --max-values 20001" -- "$POSLAB" pe --kind alibi --positions 100 --dim 8 --heads 2 --max-values 20001
check "pe prints nothing to stdout for a table over --max-values" test -z "$("$POSLAB" pe --kind alibi --positions 100 --dim 8 --heads 2 --max-values 20001 2>/dev/null)"
check "pe at --max-values prints a header and a record per value" test "$("$POSLAB" pe --kind alibi --positions 100 --dim 8 --heads 2 --max-values 20002 | wc -l)" -eq $((1 + 2 * 100 * 100 + 2))
expect_fail 2 "--base must be a finite number, got nan" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --base nan
# The refusal comes before the tables are computed: a (1, 50000, 50000) bias is ~10 GB, past this 3 GB limit
# (not set for a CUDA build, whose libraries alone map more: there the refusal is checked, not its memory).
cuda_build=false
ldd "$POSLAB" | grep -q libtorch_cuda && cuda_build=true
cap="ulimit -v 3000000;"
$cuda_build && cap=""
expect_fail 2 "--positions 50000: --kind alibi gives 2500000001 values (bias (1, 50000, 50000), slopes (1)), more than --max-values" -- \
  bash -c "$cap exec '$POSLAB' pe --kind alibi --positions 50000 --dim 64 --format csv"
# ...by extrapolating the shapes of small tables: for every kind (and a randomized draw), the count it refuses at
# 40 positions is the count of numbers in the tables it prints there, counted here from its JSON.
for args in "none" "index" "binary" "sinusoidal" "learned" "rope" "alibi --heads 3" "xpos" "t5 --heads 2" "kerple_log" \
            "kerple_power" "sandwich" "fire" "cope" "rope --randomize 100"; do
  read -r -a a <<< "$args"
  want=$("$POSLAB" pe --kind "${a[@]}" --positions 40 --dim 8 --format json 2>/dev/null | python3 -c '
import json, sys
def count(v): return sum(count(x) for x in v) if isinstance(v, list) else 1
print(sum(count(v) for v in json.load(sys.stdin).values() if isinstance(v, list)))')
  err=$("$POSLAB" pe --kind "${a[@]}" --positions 40 --dim 8 --format json --max-values 1 2>&1 >/dev/null)
  check "pe --kind $args: refused at --max-values 1 with the $want values its JSON holds (got: $err)" \
    bash -c '[[ "$1" -le 1 && -z "$2" ]] || [[ "$2" == *"--kind $3 gives $1 values ("* ]]' _ "$want" "$err" "${a[0]}"
done
# A flag the kind does not read: the numbers printed as without it, and a warning on stderr naming what it reads.
"$POSLAB" pe --kind alibi --positions 4 --dim 8 --base 100 > pe-base.csv 2> pe-base.err
"$POSLAB" pe --kind alibi --positions 4 --dim 8 > pe-nobase.csv 2> pe-nobase.err
check "pe: --base on alibi warns, naming what alibi reads, and prints the same table" bash -c \
  "grep -qx 'poslab: warning: --base changes nothing --kind alibi prints (it reads --heads)' pe-base.err && cmp -s pe-base.csv pe-nobase.csv && [ ! -s pe-nobase.err ]"
"$POSLAB" pe --kind sinusoidal --positions 4 --dim 8 --base 100 --scale 2 > /dev/null 2> pe-used.err
check "pe: flags the kind reads give no warning" test ! -s pe-used.err
expect_fail 2 "--param L=-10.000000: fire's threshold L is positive" -- "$POSLAB" pe --kind fire --positions 8 --dim 8 --param c=0.5,L=-10
expect_fail 2 "--option npos must be positive, got 0" -- "$POSLAB" pe --kind cope --positions 4 --dim 8 --option npos=0
expect_fail 2 "--option nps: unknown key" -- "$POSLAB" pe --kind cope --positions 4 --dim 8 --option nps=3
expect_fail 2 "--option =3: expected KEY=VALUE" -- "$POSLAB" pe --kind cope --positions 4 --dim 8 --option =3
expect_fail 2 "--option npos: expected KEY=VALUE" -- "$POSLAB" pe --kind cope --positions 4 --dim 8 --option npos
# An --option the kind does not read, or one pe has a flag for (one of the two would be dropped unsaid): refused.
expect_fail 2 "--option npos is read by --kind cope, but --kind is rope" -- "$POSLAB" pe --kind rope --positions 4 --dim 4 --option npos=8
expect_fail 2 "--option base=2: pe has its own flag for this key (--base); give that instead" -- "$POSLAB" pe --kind rope --positions 4 --dim 4 --option base=2 --base 3
expect_fail 2 "--option rope_scaling.kind=yarn: pe has its own flag for this key (--rope-scaling, --factor and --original-length)" -- \
  "$POSLAB" pe --kind rope --positions 4 --dim 4 --option rope_scaling.kind=yarn
expect_fail 2 "--param 'r1': expected name=number" -- "$POSLAB" pe --kind kerple_log --positions 4 --dim 8 --param r1
expect_fail 2 "--param 'r1=x': expected name=number" -- "$POSLAB" pe --kind kerple_log --positions 4 --dim 8 --param r1=x
expect_fail 2 "--param c: not a parameter of kerple_power (known: r1, r2)" -- "$POSLAB" pe --kind kerple_power --positions 4 --dim 8 --param c=1
expect_fail 2 "--param r1: not a parameter of rope (it takes none)" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --param r1=1
expect_fail 2 "--randomize must be 0 (off) or >= --positions (8)" -- "$POSLAB" pe --kind rope --positions 8 --dim 8 --randomize 4
# 0 is off, as that message says (the option refused it as "must be a positive integer"): the table without it.
check "pe --randomize 0 is off: the same output as without it" bash -c \
  "[ \"\$('$POSLAB' pe --kind rope --positions 8 --dim 8 --randomize 0 --format json)\" = \"\$('$POSLAB' pe --kind rope --positions 8 --dim 8 --format json)\" ]"
expect_fail 2 "--randomize: must be 0 (off) or a positive integer, got '-1'" -- "$POSLAB" pe --kind rope --positions 8 --dim 8 --randomize -1
check "pe: alibi's --heads and --dim are independent" bash -c "'$POSLAB' pe --kind alibi --heads 6 --dim 8 --positions 4 --format json >/dev/null"
check "pe: t5 buckets are integers" bash -c "'$POSLAB' pe --kind t5 --positions 20 --dim 8 --format json | grep -q '\"buckets\":\[\[0,0'"
expect_fail 2 "unknown command 'frobnicate' (commands: train, eval" -- "$POSLAB" frobnicate
expect_fail 2 "unknown command 'trian'" -- "$POSLAB" trian -c ok.json

# Evaluation-time RoPE scaling: wrong kind, range, flags without their partner, a non-eval key, a bad tag.
expect_fail 2 "applies to rotary encodings (rope, xpos), not to 'learned'" -- "$POSLAB" eval --run run --lengths 8 --rope-scaling yarn --factor 2
expect_fail 2 "--rope-scaling" -- "$POSLAB" eval --run run --lengths 8 --rope-scaling stretch --factor 2
expect_fail 2 "--rope-scaling linear needs --factor S (above 1)" -- "$POSLAB" eval --run run --lengths 8 --rope-scaling linear
# --factor 0 is a value out of range, not a flag left out; with none, factor and length would be ignored.
expect_fail 2 "eval: --factor must be >= 1, got 0.0" -- "$POSLAB" eval --run run --lengths 8 --rope-scaling linear --factor 0
expect_fail 2 "eval: --factor must be >= 1, got nan" -- "$POSLAB" eval --run run --lengths 8 --rope-scaling linear --factor nan
expect_fail 2 "eval: --rope-scaling none scales nothing: drop --factor and --original-length" -- "$POSLAB" eval --run run --lengths 8 --rope-scaling none --factor 2
expect_fail 2 "--factor must be >= 1" -- "$POSLAB" eval --run run --lengths 8 --rope-scaling linear --factor 0.5
expect_fail 2 "--factor and --original-length need --rope-scaling" -- "$POSLAB" eval --run run --lengths 8 --factor 2
expect_fail 2 "can only change eval.* keys" -- "$POSLAB" eval --run run --lengths 8 --set model.n_layer=2
expect_fail 2 "eval.rope_scaling.factor must be >= 1" -- "$POSLAB" eval --run run --lengths 8 --set eval.rope_scaling.factor=0
expect_fail 2 "--tag 'a/b' may hold only" -- "$POSLAB" eval --run run --lengths 8 --tag a/b
expect_fail 2 "eval.rope_scaling.kind: unknown rope scaling 'pi'" -- "$POSLAB" train -c ok.json --set eval.rope_scaling.kind=pi --out r2
expect_fail 2 "eval.rope_scaling.factor: rope scaling 'yarn' needs a factor above 1 (1 scales nothing)" -- "$POSLAB" train -c ok.json --set model.pos_encoding.kind=rope --set eval.rope_scaling.kind=yarn --out r2
printf '{"base": "ok.json", "set": {"model.pos_encoding.kind": "rope"}, "grid": {"seed": [1]}, "eval_grid": {"y": {"eval.rope_scaling": {"kind": "ntk"}}}}\n' > nofactor.json
expect_fail 2 "eval_grid.y: eval.rope_scaling.factor: rope scaling 'ntk' needs a factor above 1" -- "$POSLAB" compare -c nofactor.json --out r3
printf '{"base": "ok.json", "grid": {"model.pos_encoding.kind": ["rope", "alibi"]}, "eval_grid": {"none": {}, "lin": {"eval.rope_scaling": {"kind": "linear", "factor": 2}}}}\n' > linalibi.json
expect_fail 2 "cell kind=alibi, eval_grid.lin: eval.rope_scaling.kind: 'linear' applies to rotary encodings" -- "$POSLAB" compare -c linalibi.json --out r3
check "no cell trained for a grid refused for its variants" test ! -e r3
expect_fail 2 "--rope-scaling applies to rotary kinds" -- "$POSLAB" pe --kind alibi --positions 4 --dim 8 --rope-scaling yarn --factor 2
expect_fail 2 "--factor must be >= 1" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --rope-scaling ntk --factor 0
printf '{"base": "ok.json", "grid": {"seed": [1]}, "eval_grid": {"x": {"model.n_layer": 2}}}\n' > evalgrid.json
expect_fail 2 "eval_grid.x.model.n_layer: only eval.* keys can vary without retraining" -- "$POSLAB" compare -c evalgrid.json --out r3
# A thread count far past any machine is a typo: refused before it starts that many workers (it hung the machine).
expect_fail 2 "train.threads must be 0 (default) to 1024, got 100000" -- "$POSLAB" train -c ok.json --set train.threads=100000 --out r4
printf '{"base": "ok.json", "grid": {"seed": [1]}, "seeds": [1]}\n' > seeds.json
expect_fail 2 "give seeds either" -- "$POSLAB" compare -c seeds.json --out r3
printf '{"base": "ok.json", "grid": {"seed": [1]}, "jobs": 0}\n' > jobs0.json
expect_fail 2 "jobs must be an integer from 1 to 256 (cells run at once), got 0" -- "$POSLAB" compare -c jobs0.json --out r3
printf '{"base": "ok.json", "grid": {"seed": [1]}, "jobs": "2"}\n' > jobs_s.json
expect_fail 2 "jobs must be an integer from 1 to 256 (cells run at once), got \"2\"" -- "$POSLAB" compare -c jobs_s.json --out r3
# Paths and resources: refused before any work, one line, exit 2, nothing created.
printf 'x' > afile
expect_fail 2 "--out afile: exists and is not a directory" -- "$POSLAB" train -c ok.json --out afile
expect_fail 2 "afile is a file, not a directory" -- "$POSLAB" train -c ok.json --out afile/sub
printf '{"base": "ok.json", "grid": {"seed": [1]}}\n' > good_exp.json
expect_fail 2 "--out afile: exists and is not a directory" -- "$POSLAB" compare -c good_exp.json --out afile
expect_fail 2 "model too large for this machine: training needs ~" -- "$POSLAB" train -c ok.json --set model.n_embd=65536 --set model.n_layer=8 --out big
# A small model refused for its batch: its parameter count in millions as the run line counts it (it said "0M").
"$POSLAB" train -c ok.json --set model.n_embd=64 --set train.max_iters=1 --out small-params > small-params.log 2>&1
"$POSLAB" train -c ok.json --set model.n_embd=64 --set train.batch_size=100000000 --out big > big-params.log 2>&1
check "a refused model's parameter count is about the run's (an estimate), in millions to 2 decimals" /usr/bin/python3 -c "
import re
n = int(re.search(r': (\d+) params', open('small-params.log').read()).group(1))
m = float(re.search(r'\(([0-9.]+)M parameters', open('big-params.log').read()).group(1))
assert n > 0 and abs(m - n / 1e6) <= 0.1 * n / 1e6 + 0.005, (n, m)"
check "... and no run is left" test ! -e big
expect_fail 2 "available; use shorter --lengths" -- "$POSLAB" eval --run run --lengths 8,1000000000
# Task lengths of 2^30 items and more: their tokens (2n + 1 on copy) are counted in 64 bits, not wrapped past
# every check into an allocation that takes the machine's memory.
expect_fail 2 "evaluation at 4294967295 tokens needs ~" -- "$POSLAB" eval --run run --lengths 8,2147483647
expect_fail 2 "data.max_len: copy with 1073741824 items needs 2147483649 input tokens" -- \
  "$POSLAB" train -c ok.json --set data.max_len=1073741824 --out r9
# The evaluation that ends training is checked before the training, not after it.
expect_fail 2 "eval.lengths: evaluation at 2147483649 tokens needs ~" -- "$POSLAB" train -c ok.json --set 'eval.lengths=[8,1073741824]' --out r9
check "... and no run is left" test ! -e r9
# A run whose config.json is JSON but no poslab config: the file is named, as where it does not parse.
mkdir -p notcfg && cp run/vocab.json run/checkpoint.pt notcfg/ && printf '{"hello": 1}\n' > notcfg/config.json
expect_fail 2 "notcfg/config.json: " -- "$POSLAB" eval --run notcfg --lengths 8
# A damaged vocab.json is named by its path too, as the run's.
mkdir -p badvocab && cp run/config.json run/checkpoint.pt badvocab/ && echo '{}' > badvocab/vocab.json
expect_fail 2 "badvocab/vocab.json: expected a list of characters or" -- "$POSLAB" eval --run badvocab --lengths 8
# Where a command's file goes is a directory: refused before the work, not at the rename after it.
mkdir -p run/eval-dir.json
expect_fail 2 "--run run: cannot write eval-dir.json there (run/eval-dir.json is a directory); move it away" -- \
  "$POSLAB" eval --run run --lengths 8 --tag dir
rmdir run/eval-dir.json
expect_fail 2 "attention statistics at 200001 tokens needs ~" -- "$POSLAB" attention --run run --lengths 8,100000 --no-plot
check "nothing created for a path or memory refusal" test ! -e big -a ! -e afile/sub -a "$(cat afile)" = x -a ! -e run/eval.json -a ! -e run/attention.json
# An allocation that fails anyway (here a cap on address space, as when another process took the
# memory) names the stage and the size on one line, exit 1; the checkpoint written before it stays.
# The cap: 2 GB of address space, in which validation at batch 16384 fits and training's kept
# activations do not (on the 2-core Zen 4, training fails from batch ~12k, validation from ~24k). Two
# threads, so that the address space taken before any tensor (~0.8 GB: libraries, thread stacks, 2 GB
# with 16 threads) is the same on every machine. 64 wide rather than 512 at batch 4096: the same memory
# for an eighth of the matmuls (2.5 s, not 16 s). A CUDA build maps several GB of libraries before
# allocating anything, so there the cap would stop it loading: skipped, said so.
if $cuda_build; then
  echo "note: CUDA build (libtorch_cuda maps GBs of address space): the out-of-memory stage test runs on CPU builds only"
else
  expect_fail 1 "out of memory while training step 0 (batch 16384 x" -- env OMP_NUM_THREADS=2 bash -c "ulimit -v 2000000; \
    exec '$POSLAB' train -c ok.json --set model.n_embd=64 --set train.batch_size=16384 --set train.eval_iters=1 --out capped"
  check "the checkpoint written before the allocation failure is intact" \
    bash -c "'$POSLAB' eval --run capped --lengths 8 >/dev/null 2>&1"
  # A command that trains nothing says what to ask less of for itself, not for training.
  expect_fail 1 "ask for fewer --positions or a smaller --dim" -- bash -c "ulimit -v 3000000; \
    exec '$POSLAB' pe --kind rope --positions 100000000 --dim 64 --format csv --max-values 100000000000 > /dev/null"
fi
# A checkpoint that cannot be written (a full disk; here its temporary file's name taken by a directory)
# is named as the stage that failed, not as the validation before it; the last checkpoint stays.
"$POSLAB" train -c ok.json --set train.max_iters=4 --set train.eval_interval=2 --stop-at 2 --out ckfail > /dev/null 2>&1
mkdir -p ckfail/checkpoint.pt.tmp/taken
expect_fail 1 "poslab: failed while writing the checkpoint at step 2: cannot write" -- "$POSLAB" train --resume ckfail
check "a failed checkpoint write leaves the last checkpoint and a failed summary" /usr/bin/python3 -c '
import json; s = json.load(open("ckfail/summary.json"))
assert s["status"] == "failed" and "cannot write" in s["error"], s'
check "the run whose checkpoint write failed still evaluates from the checkpoint before" \
  bash -c "'$POSLAB' eval --run ckfail --lengths 8 >/dev/null 2>&1"
check "no run directory left behind by bad eval input" test ! -e r2 -a ! -e r3 -a ! -e run/eval-a
# A finished run whose checkpoint.pt was removed: the error says commands read it, not that training stopped early.
cp -r run nockpt && rm nockpt/checkpoint.pt
expect_fail 2 "run nockpt: no checkpoint.pt (it was removed: commands read a run from checkpoint.pt; model.pt" -- "$POSLAB" eval --run nockpt

# --init-from: a new run from another run's weights; mismatches refused, nothing left behind.
expect_fail 2 "--init-from nowhere: no run here" -- "$POSLAB" train -c ok.json --init-from nowhere --out r4
expect_fail 2 "--init-from starts a new run and --resume continues one" -- "$POSLAB" train --resume run --init-from run
expect_fail 2 "--init-from run: model.n_embd is 16 there but 32 here" -- "$POSLAB" train -c ok.json --set model.n_embd=32 --init-from run --out r4
expect_fail 2 "--init-from run: model.n_layer is 1 there but 2 here" -- "$POSLAB" train -c ok.json --set model.n_layer=2 --init-from run --out r4
expect_fail 2 "model.pos_encoding.kind is learned there but rope here" -- "$POSLAB" train -c ok.json --set $PE.kind=rope --init-from run --out r4
expect_fail 2 "a learned position table cannot grow from 40 to 80 rows" -- "$POSLAB" train -c ok.json --set model.block_size=80 --init-from run --out r4
expect_fail 2 "a learned position table of 40 rows cannot be cut to 20 (keep model.block_size at 40" -- "$POSLAB" train -c ok.json --set model.block_size=20 --init-from run --out r4
for i in $(seq 300); do echo "the quick brown fox jumps over the lazy dog"; done > fox.txt
expect_fail 2 "differs from this config's data" -- "$POSLAB" train -c ok.json --set data.kind=text --set data.path=fox.txt --init-from run --out r4
# The source run's own config.json fails to read: said to be the source's, not this command's --config.
cp -r run run-badcfg
/usr/bin/python3 -c "
import json; c = json.load(open('run-badcfg/config.json')); c['model']['pos_encoding']['plugin_sha256'] = 'ab' * 32
json.dump(c, open('run-badcfg/config.json', 'w'))"
expect_fail 2 "--init-from run-badcfg: run-badcfg/config.json: model.pos_encoding.plugin_sha256 is set but" -- "$POSLAB" train -c ok.json --init-from run-badcfg --out r4
# Vocabularies of one size that differ in a character: the message says where (the sizes alone read as equal).
sed 's/lazy/la!y/' fox.txt > fox2.txt
"$POSLAB" train -c ok.json --set data.kind=text --set data.path=fox.txt --set eval.lengths=[8] --out foxrun > /dev/null 2>&1
expect_fail 2 "its vocabulary (28 symbols) differs from this config's data (28 symbols; first at id 2: \"a\" there, \"!\" here)" -- \
  "$POSLAB" train -c ok.json --set data.kind=text --set data.path=fox2.txt --init-from foxrun --out r4
expect_fail 2 "eval: --batches applies to task runs; foxrun trained on text" -- "$POSLAB" eval --run foxrun --batches 3 --tag x
check "... writing nothing" test ! -e foxrun/eval-x.json
# An encoding option that shapes its parameters, set otherwise for the fine-tune: named by its key (the
# message was about a tensor of the checkpoint).
"$POSLAB" train -c ok.json --set $PE.kind=cope --set train.max_iters=1 --out coperun > /dev/null 2>&1
expect_fail 2 "--init-from coperun: the cope encoding's parameter pos_emb has another shape ([8, 64] there, [8, 8] here): model.pos_encoding.npos 8 here, 64 there" -- \
  "$POSLAB" train -c ok.json --set $PE.kind=cope --set $PE.npos=8 --init-from coperun --out r4
expect_fail 2 "$PE.rope_scaling.kind: 'linear' applies to rotary encodings" -- "$POSLAB" train -c ok.json --set $PE.rope_scaling.kind=linear --out r4
expect_fail 2 "$PE.rope_scaling.factor must be >= 1" -- "$POSLAB" train -c ok.json --set $PE.kind=rope --set $PE.rope_scaling.factor=0.5 --out r4
check "no run directory left behind by a refused --init-from" test ! -e r4
"$POSLAB" train -c ok.json --init-from run --out r5 >/dev/null 2>&1
check "--init-from with the same shapes trains and records its source, by its absolute path" /usr/bin/python3 -c '
import json, os
r = json.load(open("r5/init_from.json"))["run"]
assert os.path.isabs(r) and os.path.samefile(r, "run"), r'
# A source stopped early, and a model option set otherwise: both in init_from.json and the log, with a warning.
"$POSLAB" train -c ok.json --set $PE.kind=rope --stop-at 1 --out rstop > /dev/null 2>&1
"$POSLAB" train -c ok.json --set $PE.kind=rope --set $PE.base=500 --init-from rstop --out rfine > rfine.log 2>&1
check "--init-from records the source's status, step and the model keys set otherwise" /usr/bin/python3 -c '
import json
r = json.load(open("rfine/init_from.json"))
assert (r["status"], r["step"], r["max_iters"], r["block_size"]) == ("interrupted", 1, 3, 40), r
assert r["changed"] == {"model.pos_encoding.base": {"there": 10000.0, "here": 500.0}}, r["changed"]
r5 = json.load(open("r5/init_from.json"))
assert r5["status"] == "done" and r5["changed"] == {}, r5'
check "...and says the source did not finish" grep -q "that run did not finish (status interrupted, step 1 of 3): its weights are those of its last checkpoint" rfine.log
check "...and which key it set otherwise" grep -q "model.pos_encoding.base 500.0 here, 10000.0 there" rfine.log
# A restarted launch of a fine-tune (--resume-if-exists) whose scaling stretches from the source's length,
# left at 0 in the config: resumed, not refused for the original_length the run filled in.
"$POSLAB" train -c ok.json --set $PE.kind=rope --out rrope > /dev/null 2>&1
FT=(-c ok.json --set $PE.kind=rope --set model.block_size=80 --set $PE.rope_scaling.kind=linear --set $PE.rope_scaling.factor=2
    --init-from rrope --out rft --resume-if-exists)
"$POSLAB" train "${FT[@]}" --stop-at 1 > /dev/null 2>&1
"$POSLAB" train "${FT[@]}" > rft.log 2>&1
status=$?
check "a fine-tune restarted with --resume-if-exists continues (status $status)" grep -q "continuing the run in rft" rft.log
"$POSLAB" train --init-from run --set train.max_iters=2 >/dev/null 2>&1
check "--init-from without --config takes the run's config, into RUN-ft" grep -q '"max_iters": 2' run-ft/config.json
expect_fail 2 "--init-from nowhere: no run here" -- "$POSLAB" train --init-from nowhere --out r4

# sample: bad flags; greedy output identical with and without the KV cache, past block_size (40) too.
expect_fail 2 "--tokens: must be a positive integer, got '0'" -- "$POSLAB" sample --run run --prompt "ab" --tokens 0
expect_fail 2 "--temperature: must be a number >= 0 (0 = greedy), got '-1'" -- "$POSLAB" sample --run run --prompt "ab" --temperature -1
expect_fail 2 "--prompt: must not be empty" -- "$POSLAB" sample --run run --prompt ""
expect_fail 2 "--prompt: invalid UTF-8 at byte 1 (a prompt must be UTF-8 text)" -- "$POSLAB" sample --run run --prompt "$(printf 'a\xffb')"
expect_fail 2 "run nowhere: no run here" -- "$POSLAB" sample --run nowhere --prompt "ab"
expect_fail 2 "--no-cache" -- "$POSLAB" sample --run run --prompt "ab" --no-cache=maybe
check "sample: the KV cache gives the recomputed greedy tokens" \
  test "$("$POSLAB" sample --run run --prompt ab --tokens 60 --temperature 0 2>/dev/null)" = \
       "$("$POSLAB" sample --run run --prompt ab --tokens 60 --temperature 0 --no-cache 2>/dev/null)"
expect_fail 2 "--generate" -- "$POSLAB" bench -c ok.json --generate 0
check "bench --generate: cached and recomputed greedy tokens agree, past the learned table too" \
  bash -c "'$POSLAB' bench -c ok.json --generate 50 2>/dev/null | grep -q 'same tokens: yes'"


# Range errors state the range in words, on one line, with no 300-digit bound and no pointer to --help.
expect_range() {  # expect_range "fragment" -- command...
  local fragment=$1
  shift 2
  expect_fail 2 "$fragment" -- "$@"
  local out
  out=$("$@" 2>&1 >/dev/null)
  check "no number bound and no --help pointer in: $out" bash -c "! printf '%s' \"\$1\" | grep -qE '[0-9]{20}|--help|not in range'" _ "$out"
}
expect_range "--stop-at: must be a positive integer, got '0'" -- "$POSLAB" train -c ok.json --stop-at 0 --out r6
expect_range "--jobs: must be a positive integer, got '0'" -- "$POSLAB" compare -c good_exp.json -j 0 --out r6
expect_range "--positions: must be a positive integer, got '0'" -- "$POSLAB" pe --kind rope --positions 0 --dim 8
expect_range "--heads: must be a positive integer, got '0'" -- "$POSLAB" pe --kind alibi --positions 4 --dim 8 --heads 0
expect_range "--threads: must be a positive integer, got '0'" -- "$POSLAB" bench -c ok.json --threads 0
expect_range "--tokens: must be a positive integer, got '0'" -- "$POSLAB" sample --run run --prompt ab --tokens 0
expect_range "--temperature: must be a number >= 0" -- "$POSLAB" sample --run run --prompt ab --temperature -1
expect_range "--batches: must be a positive integer, got '0'" -- "$POSLAB" eval --run run --lengths 8 --batches 0
expect_range "--stride: must be a positive integer, got '0'" -- "$POSLAB" eval --run run --lengths 8 --stride 0
expect_range "--tokens: must be a positive integer, got '0'" -- "$POSLAB" eval --run run --lengths 8 --tokens 0
expect_range "--n: must be a positive integer, got '0'" -- "$POSLAB" data -c ok.json --n 0
expect_range "--steps: must be a positive integer, got '0'" -- "$POSLAB" bench -c ok.json --steps 0
expect_range "--batch: must be a positive integer, got '0'" -- "$POSLAB" fixture -c ok.json --out r6 --batch 0
expect_fail 2 "--tag must not be empty" -- "$POSLAB" eval --run run --lengths 8 --tag ""
# Options of the other kind of run were taken, unused, and recorded in eval.json's settings as if used.
expect_fail 2 "eval: --stride applies to text runs; run trained on data.task copy" -- "$POSLAB" eval --run run --lengths 8 --stride 3 --tag x
expect_fail 2 "eval: --tokens applies to text runs; run trained on data.task copy" -- "$POSLAB" eval --run run --lengths 8 --tokens 5 --tag x
check "... writing nothing" test ! -e run/eval-x.json
# A factor of 1 for linear, NTK or YaRN scales nothing: refused by eval and probe as by pe and a config.
expect_fail 2 "eval: --factor: rope scaling 'linear' needs a factor above 1 (1 scales nothing)" -- \
  "$POSLAB" eval --run run --lengths 8 --rope-scaling linear --factor 1
expect_fail 2 "probe: --factor: rope scaling 'ntk' needs a factor above 1 (1 scales nothing)" -- \
  "$POSLAB" probe --run run --rope-scaling ntk --factor 1
if ! command -v nvidia-smi >/dev/null 2>&1; then  # the machines CI runs on have no GPU
  expect_fail 2 "fixture --device cuda: no CUDA device is available" -- "$POSLAB" fixture -c ok.json --out r6 --device cuda
fi
expect_fail 2 "--device: tpu not in {cpu,cuda}" -- "$POSLAB" fixture -c ok.json --out r6 --device tpu
check "nothing evaluated or written for refused eval flags" test ! -e run/eval.json -a ! -e r6
# Other flags: checked before any work, named as typed, allowed values listed.
expect_fail 2 "--kind: unknown encoding 'ropee' (allowed: none, index, binary" -- "$POSLAB" pe --kind ropee --positions 4 --dim 8
expect_fail 2 "--plot /etc/passwd/x.png: /etc/passwd is a file, not a directory" -- "$POSLAB" pe --kind rope --positions 4 --dim 8 --plot /etc/passwd/x.png
expect_fail 2 "--json nodir/bench.json: directory nodir does not exist" -- "$POSLAB" bench -c ok.json --steps 1 --warmup 0 --json nodir/bench.json
# A directory where no file can be made, root or not (root's access() says yes to /proc): refused before the work.
expect_fail 2 "--json /proc/bench.json: directory /proc is not writable: no file can be made there" -- "$POSLAB" bench -c ok.json --steps 1 --warmup 0 --json /proc/bench.json
# A name too long for its temp file beside it: refused before the benchmark (it ran, then failed to write).
LONG=$(printf 'a%.0s' $(seq 240)).json
expect_fail 2 "--json $LONG: the file name has 245 bytes; at most 229 fit beside its temp file" -- "$POSLAB" bench -c ok.json --steps 1 --warmup 0 --json "$LONG"
cp ok.json okcopy.json
expect_fail 2 "--json okcopy.json: is the --config file; it would be written over" -- "$POSLAB" bench -c okcopy.json --steps 1 --warmup 0 --json okcopy.json
check "... and the config is intact" cmp -s ok.json okcopy.json
# 2^31 steps overflowed the loop and crashed (segfault): a bound, named.
expect_fail 2 "bench: --steps + --warmup must be at most 10000000, got 2147483648" -- "$POSLAB" bench -c ok.json --steps 1 --warmup 2147483647
expect_fail 2 "bench: --precision applies to the training benchmark, not to --generate" -- "$POSLAB" bench -c ok.json --generate 4 --precision fp32
expect_fail 2 "bench: --steps applies to the training benchmark, not to --generate" -- "$POSLAB" bench -c ok.json --generate 4 --steps 3
# A benchmark that diverged reports no figures: exit 1 (it printed a table with val loss nan and exit 0).
expect_fail 1 "bench: the validation loss is nan after 3 steps: training diverged (train.learning_rate 1e+30)" -- \
  "$POSLAB" bench -c ok.json --steps 2 --warmup 1 --set train.learning_rate=1e30 --set train.warmup_iters=0 --json diverged.json
check "... and writes no JSON" test ! -e diverged.json
expect_fail 2 "--example 8: must be below --sequences (8)" -- "$POSLAB" attention --run run --lengths 8 --example 8 --no-plot
expect_fail 2 "--example 3: must be below --sequences (2)" -- "$POSLAB" attention --run run --lengths 8 --example 3 --sequences 2 --no-plot
check "nothing written by a refused attention" test ! -e run/attention.json
# compare: every grid value is checked before the first cell trains; the grid's own key is named.
printf '{"base": "ok.json", "grid": {"model.pos_encoding.kind": ["rope", "ropee"]}}\n' > badkind_exp.json
expect_fail 2 "badkind_exp.json: cell kind=ropee: model.pos_encoding.kind: unknown encoding 'ropee' (allowed: none" -- "$POSLAB" compare -c badkind_exp.json --out r7
printf '{"base": "ok.json", "grid": {"model.n_layr": [1, 2]}}\n' > badkey_exp.json
expect_fail 2 "badkey_exp.json: grid.model.n_layr: unknown key 'model.n_layr'" -- "$POSLAB" compare -c badkey_exp.json --out r7
check "the grid-key error does not blame --set" bash -c "! '$POSLAB' compare -c badkey_exp.json --out r7 2>&1 | grep -q -- '--set'"
printf '{"base": "ok.json", "set": {"train.max_iterz": 5}, "grid": {"seed": [1]}}\n' > badset_exp.json
expect_fail 2 "badset_exp.json: set.train.max_iterz: unknown key 'train.max_iterz'" -- "$POSLAB" compare -c badset_exp.json --out r7
# A training config given to compare: the unknown key, and what to run instead.
expect_fail 2 "experiment ok.json: unknown key '" -- "$POSLAB" compare -c ok.json --out r7c
expect_fail 2 "; it looks like a training config: train it with poslab train -c ok.json, or name it as an experiment's base" -- "$POSLAB" compare -c ok.json --out r7c
check "nothing written by a refused compare" test ! -e r7c
printf '{"base": "ok.json", "grid": {"model.n_head": [2, 3]}}\n' > badcell_exp.json
expect_fail 2 "cell n_head=3: model.n_embd must be divisible by model.n_head" -- "$POSLAB" compare -c badcell_exp.json --out r7
check "no cell trained for a refused grid" test ! -e r7
# Token files and tokenizers: one line naming the file and what was expected, exit 2, no run left.
mkdir -p tok && python3 -c "
import struct
def raw(name, ids): open(name, 'wb').write(b''.join(struct.pack('<H', i) for i in ids))
def llmc(name, magic, count, body): open(name, 'wb').write(struct.pack('<256i', magic, 1, count, *[0] * 253) + body)
raw('tok/train.bin', [i % 7 for i in range(400)]); raw('tok/val.bin', [i % 7 for i in range(300)])
raw('tok/short_val.bin', [1] * 10); open('tok/empty.bin', 'wb').close(); open('tok/odd.bin', 'wb').write(b'abc')
open('tok/zeros.bin', 'wb').write(bytes(2048))
llmc('tok/count.bin', 20240520, 10, bytes(30))
llmc('tok/badmagic.bin', 20240521, 400, struct.pack('<400H', *[1] * 400))
llmc('tok/shard.bin', 20240520, 400, struct.pack('<400H', *[1] * 400))
llmc('tok/shard32.bin', 20240801, 300, struct.pack('<300I', *[1] * 300))
raw('tok/high.bin', [1] * 50 + [9] + [1] * 349)
import pickle; pickle.dump({'vocab_size': 7, 'chars': 'abcdefg'}, open('tok/meta_other.pkl', 'wb'))
"
TOKS=(--set data.kind=tokens --set data.vocab_size=7 --set data.val_path=tok/val.bin)
expect_fail 2 "data.kind tokens needs data.dir" -- "$POSLAB" train -c ok.json --set data.kind=tokens --out r6
expect_fail 2 "odd.bin: 3 bytes is not a whole number of uint16 tokens" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/odd.bin --out r6
expect_fail 2 "zeros.bin: expected llm.c's magic 20240520 (uint16 tokens) or 20240801" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/zeros.bin --set data.format=llmc --out r6
expect_fail 2 "odd.bin: 3 bytes is shorter than llm.c's 1024-byte header" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/odd.bin --set data.format=llmc --out r6
expect_fail 2 "count.bin: the llm.c header says 10 tokens (20 bytes) but the file holds 30 bytes" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/count.bin --out r6
expect_fail 2 "looks like an llm.c shard whose magic 20240521 is neither 20240520 (uint16) nor 20240801 (uint32)" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/badmagic.bin --out r6
# A GPT-2 shard (uint16) for training and a Llama 3 shard (uint32) for validation: two vocabularies, refused.
expect_fail 2 "data.val_path $WORK/tok/shard32.bin: an llm.c shard of uint32 tokens, but data.train_path $WORK/tok/shard.bin holds an llm.c shard of uint16 tokens: both files must hold ids of one vocabulary, in one layout" -- \
  "$POSLAB" train -c ok.json --set data.kind=tokens --set data.vocab_size=7 --set data.train_path=tok/shard.bin --set data.val_path=tok/shard32.bin --out r6
expect_fail 2 "shard.bin: token id 55432 at byte offset 0 (token 0) is not below the vocabulary size 7 (the file is an llm.c shard (magic 20240520), read as a raw array because data.format is nanogpt: set data.format to llmc or auto)" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/shard.bin --set data.format=nanogpt --out r6
expect_fail 2 "empty.bin: holds no tokens" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.vocab_size=7 --set data.train_path=tok/train.bin --set data.val_path=tok/empty.bin --out r6
expect_fail 2 "short_val.bin: 10 tokens is too short: validation needs at least model.block_size+1 = 41" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.vocab_size=7 --set data.train_path=tok/train.bin --set data.val_path=tok/short_val.bin --out r6
expect_fail 2 "high.bin: token id 9 at byte offset 100 (token 50) is not below the vocabulary size 7" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/high.bin --out r6
expect_fail 2 "data.vocab_size: token files need a vocabulary size" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.train_path=tok/train.bin --set data.val_path=tok/val.bin --out r6
mkdir -p pkl && cp tok/train.bin tok/val.bin pkl/ && cp tok/meta_other.pkl pkl/meta.pkl
expect_fail 2 "meta.pkl: not nanoGPT's meta.pkl: itos missing or not a dict" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.dir=pkl --out r6
expect_fail 2 "data.format: unknown token file format 'gguf'" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/train.bin --set data.format=gguf --out r6
expect_fail 2 "data.dir $WORK/nodir: no such directory (expected one holding train.bin and val.bin)" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.dir=nodir --out r6
expect_fail 2 "data.dir $WORK/fox.txt: not a directory (expected one holding" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.dir=fox.txt --out r6
# A vocabulary that makes the model too large (a data.vocab_size typo) is named as what to reduce.
expect_fail 2 "reduce the vocabulary (2147483647 tokens, data.vocab_size)" -- "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/train.bin --set data.vocab_size=2147483647 --out r6
# data.dtype against meta.json's: uint32 files read as uint16 would train on an id and a 0 in turn.
mkdir -p tok32 && python3 -c "
import struct, json
for n, k in (('train', 400), ('val', 300)): open('tok32/%s.bin' % n, 'wb').write(struct.pack('<%dI' % k, *[i % 7 for i in range(k)]))
json.dump({'vocab_size': 7, 'dtype': 'uint32'}, open('tok32/meta.json', 'w'))"
expect_fail 2 "data.dtype is uint16 but $WORK/tok32/meta.json says dtype uint32 for" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.dir=tok32 --set data.dtype=uint16 --out r6
# A validation file shorter than an evaluation length: that length is not applicable, the others evaluated
# (as for text); the file is checked against the training window only.
mkdir -p tokv && cp tok/train.bin tokv/
head -c 200 tok/val.bin > tokv/val.bin  # 100 tokens: too short for 200, enough for 40
"$POSLAB" train -c ok.json --set data.kind=tokens --set data.vocab_size=7 --set data.dir=tokv --set eval.lengths=[40,200] --out tokrun > /dev/null 2>&1
check "a run whose validation file is too short for one of its eval.lengths trains, and evaluates the others" /usr/bin/python3 -c '
import json; r = {x["length"]: x for x in json.load(open("tokrun/eval.json"))["results"]}
assert r[40]["status"] == "ok" and r[200]["status"].startswith("n/a: validation split has 100 tokens"), r'
check "eval --lengths 20,40 runs on a validation file too short for the run's own eval.lengths" \
  bash -c "'$POSLAB' eval --run tokrun --lengths 20,40 --tag short > /dev/null 2>&1"
# A length past the validation split is n/a, whatever its size: not refused for the memory it would need.
"$POSLAB" eval --run tokrun --lengths 20,2000000000 --tag huge > /dev/null 2>&1
check "eval at a length past the validation split, however long: n/a, the others evaluated (exit $?)" /usr/bin/python3 -c '
import json; r = {x["length"]: x for x in json.load(open("tokrun/eval-huge.json"))["results"]}
assert r[20]["status"] == "ok" and r[2000000000]["status"].startswith("n/a: validation split has 100 tokens"), r'
check "data shows training windows of a config whose eval.lengths its validation file cannot hold" \
  bash -c "'$POSLAB' data -c ok.json --set data.kind=tokens --set data.vocab_size=7 --set data.dir=tokv --set eval.lengths=[200] --n 1 > /dev/null 2>&1"
"$POSLAB" eval --run tokrun --lengths 20,200 --tag past > past.log 2>&1
# Its log line per length: a text length is tokens, so it names the targets scored instead (as eval-past.json has them).
check "eval's log names each length's scored targets, and n/a" /usr/bin/python3 -c '
import json, re, sys; log = open("past.log").read()
r = {x["length"]: x for x in json.load(open("tokrun/eval-past.json"))["results"]}
assert re.search(r"eval length +20: loss [0-9.]+, %d targets\n" % r[20]["scored_tokens"], log), log
assert re.search(r"eval length +200: n/a: validation split has 100 tokens", log), log
assert "(20 tokens)" not in log, log'
check "eval --lengths past a token file's validation split: that length n/a, the others evaluated" /usr/bin/python3 -c '
import json; r = {x["length"]: x for x in json.load(open("tokrun/eval-past.json"))["results"]}
assert r[20]["status"] == "ok" and r[20]["loss"] > 0, r[20]
assert r[200]["status"].startswith("n/a: validation split has 100 tokens, fewer than 201") and r[200]["loss"] is None, r[200]' 
check "a token-file run's eval.json says its data are tokens, not text" /usr/bin/python3 -c '
import json; assert json.load(open("tokrun/eval-short.json"))["data"] == "tokens"' 
# A FIFO named as a token file is refused at once (opening it waited for a writer forever).
mkfifo tok/fifo.bin
expect_fail 2 "fifo.bin: not a regular file (a pipe or device?)" -- timeout 60 "$POSLAB" train -c ok.json "${TOKS[@]}" --set data.train_path=tok/fifo.bin --out r6
check "no run directory left behind by refused token data" test ! -e r6
if [ -x "$(dirname "$POSLAB")/poslab-tokenize" ]; then
  printf 'not a model' > garbage.model
  expect_fail 2 "data.tokenizer.model $WORK/nope.model: no such file" -- "$POSLAB" train -c ok.json --set data.kind=text --set data.path=fox.txt --set data.tokenizer.model=$WORK/nope.model --out r6
  expect_fail 2 "--tokenizer garbage.model: not a SentencePiece model" -- "$POSLAB" tokenize --input fox.txt --out t1 --tokenizer garbage.model
  expect_fail 2 "not a SentencePiece model" -- "$POSLAB" train -c ok.json --set data.kind=text --set data.path=fox.txt --set data.tokenizer.model=$WORK/garbage.model --out r6
  expect_fail 2 "--input latin.txt: invalid UTF-8 at byte 3" -- "$POSLAB" tokenize --input latin.txt --out t1 --vocab-size 300
  # Shaped like UTF-8 but not it (RFC 3629): a surrogate half, an overlong '/', past U+10FFFF.
  for bad in '\xed\xa0\x80' '\xc0\xaf' '\xf4\x90\x80\x80'; do
    { cat fox.txt; printf "x$bad y\n"; } > notutf8.txt
    expect_fail 2 "--input notutf8.txt: invalid UTF-8 at byte $(($(wc -c < fox.txt) + 1))" -- "$POSLAB" tokenize --input notutf8.txt --out t1 --vocab-size 300
  done
  "$POSLAB" tokenize --input fox.txt --out t0 --vocab-size 300 > /dev/null 2>&1
  expect_fail 2 "invalid UTF-8 at byte 1" -- bash -c "printf 'x\xed\xa0\x80y' | '$(dirname "$POSLAB")/poslab-tokenize' encode --model t0/tokenizer.model"
  expect_fail 2 "--input nope.txt: no such file" -- "$POSLAB" tokenize --input nope.txt --out t1 --vocab-size 300
  expect_fail 2 "--input /dev/stdin: not a regular file (a pipe or device?)" -- bash -c "cat fox.txt | '$POSLAB' tokenize --input /dev/stdin --out t1 --vocab-size 300"
  mkdir -p tokdir
  expect_fail 2 "POSLAB_TOKENIZE $WORK/tokdir: not an executable file" -- env POSLAB_TOKENIZE=$WORK/tokdir "$POSLAB" tokenize --input fox.txt --out t1 --vocab-size 300
  expect_fail 2 "POSLAB_TOKENIZE /nonexistent/tool: not an executable file" -- env POSLAB_TOKENIZE=/nonexistent/tool "$POSLAB" train -c ok.json --set data.kind=text --set data.path=fox.txt --set data.tokenizer.sentencepiece.vocab_size=300 --out r6
  expect_fail 2 "--input tokdir: is a directory, expected a UTF-8 text file" -- "$POSLAB" tokenize --input tokdir --out t1 --vocab-size 300
  expect_fail 2 "--tokenizer tokdir: is a directory, expected a SentencePiece .model file" -- "$POSLAB" tokenize --input fox.txt --out t1 --tokenizer tokdir
  expect_fail 2 "give --vocab-size N (train a model) or --tokenizer M.model (use one)" -- "$POSLAB" tokenize --input fox.txt --out t1
  expect_fail 2 "--out afile/t1: cannot create afile/t1.partial-" -- "$POSLAB" tokenize --input fox.txt --out afile/t1 --vocab-size 300
  expect_fail 2 "data.path $WORK/latin.txt: invalid UTF-8 at byte 3" -- "$POSLAB" train -c ok.json --set data.kind=text --set data.path=$WORK/latin.txt --set data.tokenizer.sentencepiece.vocab_size=300 --out r6
  printf '\n\n\n' > blank.txt
  expect_fail 2 "--input: the training part of the text has no line with a character in it" -- "$POSLAB" tokenize --input blank.txt --out t1 --vocab-size 300 --val-fraction 0.5
  expect_fail 2 "data.tokenizer.sentencepiece.vocab_size 260: this text needs at least 286 pieces (its 256 byte pieces, 3 specials and its distinct characters)" -- "$POSLAB" train -c ok.json --set data.kind=text --set data.path=$WORK/fox.txt --set data.tokenizer.sentencepiece.vocab_size=260 --out r6
  expect_fail 2 "data.path $WORK/fox.txt: 13200 bytes leave an empty validation split at data.val_fraction 1e-07" -- "$POSLAB" train -c ok.json --set data.kind=text --set data.path=fox.txt --set data.tokenizer.sentencepiece.vocab_size=300 --set data.val_fraction=0.0000001 --out r6
  expect_fail 2 "data.tokenizer applies to data.kind text" -- "$POSLAB" train -c ok.json --set data.tokenizer.sentencepiece.vocab_size=300 --out r6
  # A tokens directory whose meta.json names a damaged tokenizer.model: refused before training, not when sampling.
  mkdir -p badtok && cp tok/train.bin tok/val.bin badtok/ && cp garbage.model badtok/tokenizer.model
  echo '{"vocab_size": 7, "tokenizer": "tokenizer.model"}' > badtok/meta.json
  expect_fail 2 "badtok/meta.json: SentencePiece model $WORK/badtok/tokenizer.model: not a SentencePiece model" -- "$POSLAB" train -c ok.json --set data.kind=tokens --set data.dir=badtok --out r6
  check "no output, run or cache left behind by a refused tokenizer" bash -c '! ls -d t1* r6 .poslab-cache 2>/dev/null'
fi


# Plug-ins (built beside the tests, tests/CMakeLists.txt): each bad one gets one line naming the key and the
# file; a run records its plug-in's hash and every command that reads the run refuses a changed plug-in.
PLUGINS=${POSLAB_TEST_PLUGINS:-$(dirname "$POSLAB")/tests/plugins}
if [ -f "$PLUGINS/libgaussian_bias.so" ]; then
  PE=model.pos_encoding
  mkdir -p adir
  expect_fail 2 "$PE.plugin $WORK/nope.so: no such file" -- "$POSLAB" train -c ok.json --set $PE.plugin=nope.so --out r7
  expect_fail 2 "$PE.plugin $WORK/adir: is a directory, not a shared library" -- "$POSLAB" train -c ok.json --set $PE.plugin=adir --out r7
  expect_fail 2 "$PE.plugin $WORK/fox.txt: cannot be loaded (" -- "$POSLAB" train -c ok.json --set $PE.plugin=fox.txt --out r7
  expect_fail 2 "libbad_not_a_plugin.so: not a poslab plug-in (it defines no POSLAB_PLUGIN entry points" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_not_a_plugin.so --out r7
  expect_fail 2 "libbad_abi.so: built for plug-in ABI 2, " -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_abi.so --out r7
  expect_fail 2 "; rebuild the plug-in against this poslab" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_abi.so --out r7
  expect_fail 2 "libbad_nothing.so: registers no encoding" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_nothing.so --out r7
  expect_fail 2 "libbad_builtin.so: registers encoding kind 'alibi', which is a built-in" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_builtin.so --out r7
  expect_fail 2 "libbad_twice.so: registers encoding kind 'twin_bias' twice" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_twice.so --out r7
  expect_fail 2 "libbad_null_option.so: kind 'null_option_bias': its option 'thing' has a null default, which no config value could replace" -- \
    "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_null_option.so --out r7
  expect_fail 2 "$PE.kind throwing_bias (plug-in $PLUGINS/libbad_throws.so): its constructor failed: no widths left" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_throws.so --set $PE.kind=throwing_bias --out r7
  expect_fail 2 "--plugin $PLUGINS/libbad_nothing.so: registers no encoding" -- "$POSLAB" pe --plugin $PLUGINS/libbad_nothing.so --kind alibi -n 4 -d 4
  # Plug-in code that throws what is not a std::exception; kinds registered from a static EncodingRegistrar
  # inside dlopen, by a file without entry points: one line naming the file, not an abort.
  expect_fail 2 "libbad_throws_int.so: its registration failed: it threw int, not a std::exception" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_throws_int.so --out r7
  expect_fail 2 "libbad_static_builtin.so: not a poslab plug-in (it defines no POSLAB_PLUGIN entry points; it registered 'alibi' as it loaded" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_static_builtin.so --out r7
  expect_fail 1 "an exception that is not a std::exception (thrown by a plug-in?)" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_forward_int.so --set $PE.kind=forward_int_bias --out r7i
  # Hooks tried once at the check: a wrong shape, nan, a learned bias declared constant: one line, no run directory.
  H=(--set $PE.kind=hook_bias --out r7h)
  expect_fail 2 "$PE.kind hook_bias (plug-in $PLUGINS/libbad_shape.so): bias() returned a tensor of shape (3, 8, 8) for 8 positions, expected (2, 8, 8)" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_shape.so "${H[@]}"
  expect_fail 2 "$PE.kind hook_bias (plug-in $PLUGINS/libbad_nan.so): bias() returned values that are not finite" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_nan.so "${H[@]}"
  expect_fail 2 "$PE.kind hook_bias (plug-in $PLUGINS/libbad_constant.so): it has parameters but constant_bias() is true" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_constant.so "${H[@]}"
  check "no run directory after a plug-in's hooks were refused" test ! -e r7h
  # Its own static initializer throws inside dlopen: one line naming the library and the throw, exit 2, no
  # core dump from std::terminate, and no run directory.
  expect_fail 2 "$PE.plugin $PLUGINS/libbad_static_throws.so: a static initializer threw as it loaded: the table file kernel.bin is missing" -- "$POSLAB" train -c ok.json --set $PE.plugin=$PLUGINS/libbad_static_throws.so --set $PE.kind=static_throws_bias --out r7s
  check "no run directory after a plug-in's initializer threw" test ! -e r7s
  expect_fail 2 "libbad_static_free.so: not a poslab plug-in" -- "$POSLAB" pe --plugin $PLUGINS/libbad_static_free.so --kind static_free_bias -n 4 -d 4
  L=(--set $PE.plugin=$PLUGINS/liblist_options.so --set $PE.kind=list_bias)
  expect_fail 2 "$PE.kind list_bias (plug-in $PLUGINS/liblist_options.so): its check failed: bad width" -- "$POSLAB" train -c ok.json "${L[@]}" --set "$PE.list_widths=[1, -1]" --out r7
  expect_fail 2 "$PE.list_names[1] must be a string, got 2" -- "$POSLAB" train -c ok.json "${L[@]}" --set "$PE.list_names=[\"x\", 2]" --out r7
  expect_fail 2 "$PE.list_shape.inner.n must be an integer (32-bit), got \"x\"" -- "$POSLAB" train -c ok.json "${L[@]}" --set "$PE.list_shape.inner.n=\"x\"" --out r7
  expect_fail 2 "--set $PE.gauss_sigma: $PE.gauss_sigma: unknown key (allowed here: base, " -- "$POSLAB" train -c ok.json --set $PE.gauss_sigma=2 --out r7
  # An option is checked once all is merged; its error still names what gave it: a --set of its object, the
  # file of an "extends" chain that holds it (not the one that names another key of the section).
  expect_fail 2 "--set $PE: $PE.gauss_sigma: unknown key" -- "$POSLAB" train -c ok.json --set "$PE={\"gauss_sigma\": 2}" --out r7
  echo '{"extends": "ok.json", "model": {"pos_encoding": {"gauss_sigma": 2}}}' > opt_parent.json
  echo '{"extends": "opt_parent.json", "model": {"pos_encoding": {"kind": "alibi"}}}' > opt_child.json
  expect_fail 2 "opt_parent.json: $PE.gauss_sigma: unknown key" -- "$POSLAB" train -c opt_child.json --out r7
  G=(--set $PE.plugin=$PLUGINS/libgaussian_bias.so --set $PE.kind=gaussian_bias)
  expect_fail 2 "$PE.gauss_sigma must be a positive number, got -1" -- "$POSLAB" train -c ok.json "${G[@]}" --set $PE.gauss_sigma=-1 --out r7
  expect_fail 2 "$PE.gauss_sigma must be a number, got \"wide\"" -- "$POSLAB" train -c ok.json "${G[@]}" --set $PE.gauss_sigma='"wide"' --out r7
  expect_fail 2 "$PE.gauss_width: unknown key (with plug-in $PLUGINS/libgaussian_bias.so, the declared options are gauss_sigma)" -- "$POSLAB" train -c ok.json "${G[@]}" --set $PE.gauss_width=2 --out r7
  expect_fail 2 "unknown encoding 'gaussian_bias'" -- "$POSLAB" train -c ok.json --set $PE.kind=gaussian_bias --out r7
  check "no run directory left behind by refused plug-ins" test ! -e r7
  # Options whose defaults are lists and objects: the run's config.json holds them, and reads back.
  "$POSLAB" train -c ok.json "${L[@]}" --set "$PE.list_names=[\"x\"]" --set "eval.lengths=[8]" --out lrun > /dev/null 2>&1
  check "a plug-in with list and object options trains and evaluates at the end" test -s lrun/eval.json
  rm lrun/eval.json
  "$POSLAB" eval --run lrun --lengths 8 > /dev/null 2>&1
  check "...and its run evaluates again" test -s lrun/eval.json
  check "...with the options given and declared" /usr/bin/python3 -c 'import json, sys; pe = json.load(open(sys.argv[1]))["model"]["pos_encoding"]; assert pe["list_names"] == ["x"] and pe["list_widths"] == [1.5, 2.5], pe' lrun/config.json
  # A plug-in's option before the key that names the plug-in: in --set order, and in an experiment's set.
  "$POSLAB" train -c ok.json --set $PE.gauss_sigma=2.0 "${G[@]}" --out orun > /dev/null 2>&1
  check "a plug-in's option set before the plug-in" grep -q '"gauss_sigma": 2.0' orun/config.json
  # A changed plug-in: the run recorded another file.
  cp "$PLUGINS/libgaussian_bias.so" mine.so
  "$POSLAB" train -c ok.json --set $PE.plugin=mine.so --set $PE.kind=gaussian_bias --out prun > /dev/null 2>&1
  check "a run with a plug-in trains" grep -q '"status": "done"' prun/summary.json
  "$POSLAB" eval --run prun --lengths 8 > /dev/null 2>&1
  check "the unchanged plug-in evaluates" test -s prun/eval.json
  printf 'x' >> mine.so  # still a loadable library, but not the one the run was trained with
  changed="$PE.plugin $WORK/mine.so: changed since the run recorded it (sha256 "
  expect_fail 2 "$changed" -- "$POSLAB" eval --run prun --lengths 8
  expect_fail 2 "$changed" -- "$POSLAB" train --resume prun
  expect_fail 2 "$changed" -- "$POSLAB" sample --run prun --prompt "ab" --tokens 2
  expect_fail 2 "$changed" -- "$POSLAB" attention --run prun --lengths 8 --no-plot
  expect_fail 2 "$changed" -- "$POSLAB" probe --run prun --task passkey --lengths 32 --no-plot
  rm mine.so
  expect_fail 2 "$PE.plugin $WORK/mine.so: no such file" -- "$POSLAB" eval --run prun --lengths 8
else
  echo "FAIL: no test plug-ins in $PLUGINS"
  failed=$((failed + 1))
fi

finish
