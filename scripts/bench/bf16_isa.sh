#!/usr/bin/env bash
# What bf16 gains depends on which oneDNN kernel runs the bf16 matmuls: AMX tiles, AVX512_BF16 dot
# products, or plain AVX-512 with conversions. This caps oneDNN's instruction set (ONEDNN_MAX_CPU_ISA) to
# run each kind on this one machine, beside fp32 (OpenBLAS), with interleaved repeats, and records the
# kernel oneDNN chose (ONEDNN_VERBOSE) and OpenBLAS's core. Settings above what the CPU has are skipped.
# The fp32 side matters as much: where the environment pins OpenBLAS's kernels (OPENBLAS_CORETYPE, set on
# some machines for older OpenBLAS builds), fp32 also runs with OpenBLAS's own choice for this CPU
# (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for that command alone).
#   bash scripts/bench/bf16_isa.sh [CONFIG] [STEPS] [OUT]      REPEATS=3 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
CONFIG=${1:-configs/bench/nanogpt-cpu.json}
STEPS=${2:-150}
OUT=${3:-runs/bench-bf16-isa}
REPEATS=${REPEATS:-3}
POSLAB=${POSLAB:-build/poslab}
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
[ -x "$POSLAB" ] || { echo "bf16_isa: no poslab at $POSLAB (build it, or set POSLAB)" >&2; exit 1; }
mkdir -p "$OUT"

# name, precision, ONEDNN_MAX_CPU_ISA ("-" = whatever the CPU has), OpenBLAS core ("-" = the environment's,
# "auto" = OpenBLAS's own choice)
settings=("fp32 fp32 - -" "bf16-native bf16 - -" "bf16-avx512bf16 bf16 AVX512_CORE_BF16 -" "bf16-avx512 bf16 AVX512_CORE -")
[ -n "${OPENBLAS_CORETYPE:-}" ] && settings+=("fp32-blas-auto fp32 - auto")
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { [[ " $flags " == *" $1 "* ]]; }
runnable=()
# env's arguments for one setting: the cap on oneDNN (none for "-"), OpenBLAS's own choice for "auto".
cap_env() {
  [ "$2" = auto ] && echo "-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
  [ "$1" = - ] || echo "ONEDNN_MAX_CPU_ISA=$1"
}
for s in "${settings[@]}"; do
  read -r name _ isa _ <<< "$s"
  case $isa in
    AVX512_CORE_BF16) has avx512_bf16 || { echo "skip $name: no avx512_bf16 here"; continue; } ;;
    AVX512_CORE) has avx512f || { echo "skip $name: no avx512f here"; continue; } ;;
  esac
  runnable+=("$s")
done

# The kernels each setting runs (a short verbose run, untimed).
for s in "${runnable[@]}"; do
  read -r name precision isa blas <<< "$s"
  env $(cap_env "$isa" "$blas") ONEDNN_VERBOSE=1 OPENBLAS_VERBOSE=2 \
    "$POSLAB" bench --config "$CONFIG" --steps 2 --warmup 1 --precision "$precision" > "$OUT/$name.verbose.log" 2>&1
done

for ((r = 1; r <= REPEATS; r++)); do
  for s in "${runnable[@]}"; do
    read -r name precision isa blas <<< "$s"
    echo "== repeat $r/$REPEATS: $name"
    env $(cap_env "$isa" "$blas") "$POSLAB" bench --config "$CONFIG" \
      --steps "$STEPS" --precision "$precision" --json "$OUT/$name.r$r.json" | sed 's/^/   /'
  done
done

"$PY" - "$OUT" "$REPEATS" "${runnable[@]}" <<'PY'
import collections, json, re, statistics, sys
out, repeats, settings = sys.argv[1], int(sys.argv[2]), [s.split() for s in sys.argv[3:]]
rows, cpu = [], None
for name, precision, isa, blas in settings:
    runs = [json.load(open(f"{out}/{name}.r{r}.json")) for r in range(1, repeats + 1)]
    cpu = runs[0].get("cpu", cpu)
    log = open(f"{out}/{name}.verbose.log", errors="replace").read()
    kernels = collections.Counter(m.group(1) for m in re.finditer(r"^onednn_verbose,exec,cpu,matmul,([^,]+)", log, re.M))
    # The last core printed: a CPU OpenBLAS does not know loads its fallback first, and poslab starts again on newer ones.
    core = ([None] + re.findall(r"^Core: (\S+)", log, re.M))[-1]
    isa_line = re.search(r"^onednn_verbose,info,cpu,isa:(.*)$", log, re.M)
    rows.append({"setting": name, "precision": precision, "onednn_max_cpu_isa": None if isa == "-" else isa,
                 "onednn_isa": isa_line.group(1) if isa_line else None,
                 "matmul_kernels": dict(kernels.most_common()), "openblas_core": core,
                 "openblas_coretype": "unset (OpenBLAS's choice, or poslab's where OpenBLAS fell back)" if blas == "auto" else "the environment's",
                 "train_tokens_per_s": [r["train_tokens_per_s"] for r in runs],
                 "mfu": [r.get("mfu") for r in runs]})
base = next(r for r in rows if r["setting"] == "fp32")
for r in rows:
    r["train_tokens_per_s_median"] = statistics.median(r["train_tokens_per_s"])
    r["vs_fp32_per_repeat"] = [a / b for a, b in zip(r["train_tokens_per_s"], base["train_tokens_per_s"])]
    r["vs_fp32_median"] = statistics.median(r["vs_fp32_per_repeat"])
json.dump({"cpu": cpu, "repeats": repeats, "rows": rows}, open(f"{out}/summary.json", "w"), indent=1)
if cpu:
    sys.path.insert(0, "scripts/bench")
    from cpu import describe
    print("\n" + describe(cpu))
print(f"{'setting':17s} {'matmul kernel':32s} {'tok/s':>8s} {'vs fp32':>8s}  per repeat")
for r in rows:
    kernel = next(iter(r["matmul_kernels"]), "?") if r["precision"] == "bf16" else "OpenBLAS " + str(r["openblas_core"])
    print(f"{r['setting']:17s} {kernel:32s} {r['train_tokens_per_s_median']:8.0f} {r['vs_fp32_median']:7.2f}x  "
          + ", ".join(f"{x:.2f}" for x in r["vs_fp32_per_repeat"]))
print(f"summary: {out}/summary.json")
PY
