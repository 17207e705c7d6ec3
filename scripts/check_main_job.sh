#!/usr/bin/env bash
# Runs the main job again and checks that it says, to the last digit, what docs/results/main-job.json
# says (the run the README's tables, prose and plots come from): a change to the code that moves any
# result fails here until the README is written from a new run. Time and speed are not compared.
#   bash scripts/check_main_job.sh [POSLAB]        (default build/poslab; ~2-6 min on 2 cores)
# A bf16 run's digits depend on the kernels that multiply: the saved run is an AVX512_BF16 CPU's (an
# EPYC's), which the AVX512_BF16 CPUs tried reproduce with oneDNN held to those kernels (Zen 4, Zen 5,
# an AMX Xeon, which rounds otherwise on its own). Without AVX512_BF16 the check cannot reproduce them: skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
POSLAB=${1:-build/poslab}
SAVED=${SAVED:-docs/results/main-job.json}  # another saved run to hold the code to: SAVED=FILE
die() { echo "check_main_job: ERROR: $*" >&2; exit 1; }
[ -x "$POSLAB" ] || die "no poslab binary at $POSLAB (build it first: bash scripts/setup.sh)"
[ -f "$SAVED" ] || die "$SAVED is missing"
if ! grep -qw avx512_bf16 /proc/cpuinfo; then
  echo "check_main_job: skipped: this CPU has no AVX512_BF16, whose kernels $SAVED's bf16 digits come from"
  exit 0
fi
precision=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["machines"][0]["precision"])' "$SAVED")
work=$(mktemp -d)
keep=0
trap '[ "$keep" = 1 ] || rm -rf "$work"' EXIT
# The main job as shipped, but with the saved run's precision (train.precision auto times the kernels,
# and held to AVX512_BF16's an AMX Xeon would choose fp32).
python3 - configs/experiments/quick.json "$work/quick.json" "$precision" <<'EOF'
import json, os, sys
src, dst, precision = sys.argv[1:]
exp = json.load(open(src))
exp["base"] = os.path.abspath(os.path.join(os.path.dirname(src), exp["base"]))
exp["set"]["train.precision"] = precision
json.dump(exp, open(dst, "w"), indent=1)
EOF
echo "check_main_job: the main job in $precision on oneDNN's AVX512_BF16 kernels -> $work/run (log: $work/compare.log)"
# Its progress goes to the terminal as well as the log: the run takes minutes, and CI shows it as it goes.
ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 "$POSLAB" compare --config "$work/quick.json" --out "$work/run" 2>&1 \
  | tee "$work/compare.log" || { keep=1; die "the main job failed (log: $work/compare.log)"; }
if ! python3 scripts/results_diff.py "$SAVED" "$work/run/results.json"; then
  keep=1
  echo "check_main_job: ERROR: the code no longer produces $SAVED (this run is kept in $work/run); if the change is meant," >&2
  echo "  write the README from this run: /usr/bin/python3 scripts/readme_table.py write README.md main-job $work/run/results.json," >&2
  echo "  copy its extrapolation.png and retrieval.png to docs/img/quick-*.png and update the README's numbers in prose" >&2
  exit 1
fi
