#!/usr/bin/env bash
# The plotting package draws every family of pictures from fixture JSON (tests/data/plots, written by
# `poslab pe --plot-data` and `poslab attention`): non-empty PNGs, no temp files left (after a Ctrl-C
# mid-save too), and malformed input refused with one line and exit 2. Skipped (77) where /usr/bin/python3
# lacks matplotlib.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=$ROOT/tests/data/plots
PY=/usr/bin/python3
PLOTS=$ROOT/scripts/plots
"$PY" -c 'import matplotlib, numpy' 2>/dev/null || { echo "matplotlib missing: skipped"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passed=0
failed=0
check() {  # check "description" test-expression...
  local what=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $what"; fi
}

# tests/plots/data: more `poslab pe --plot-data` output (a head of one rotary pair, xpos, t5, fire and kerple
# with --param), for the checks below.
# One Python process draws them all through the package's command line (matplotlib imported once, not 12 times).
"$PY" - "$ROOT/scripts" "$WORK" "$DATA"/pe-*.json "$ROOT"/tests/plots/data/pe-*.json > "$WORK/pe.log" 2>&1 <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
from plots.cli import main
for f in sys.argv[3:]:
    name = os.path.basename(f)[:-len(".json")]
    print(name, main(["pe", f, os.path.join(sys.argv[2], name + ".png")]))
PY
for f in "$DATA"/pe-*.json "$ROOT"/tests/plots/data/pe-*.json; do
  name=$(basename "$f" .json)
  check "$name draws a PNG (exit 0)" bash -c 'grep -qx "$1 0" "$2/pe.log" && test -s "$2/$1.png"' _ "$name" "$WORK"
done
"$PY" "$PLOTS" attention "$DATA/attention.json" "$WORK/attention.png" "$WORK/attention_maps.png"
check "attention statistics PNG" test -s "$WORK/attention.png"
check "attention maps PNG" test -s "$WORK/attention_maps.png"
cp -r "$DATA/compare" "$WORK/compare"
"$PY" "$PLOTS" compare-attention "$WORK/compare" >/dev/null
check "compare's attention summary PNG" test -s "$WORK/compare/attention.png"
check "no temp files left" test -z "$(find "$WORK" -name '*.tmp*')"

echo '{"kind": "rope"}' > "$WORK/bad.json"
err=$("$PY" "$PLOTS" pe "$WORK/bad.json" "$WORK/bad.png" 2>&1)
check "malformed input: exit 2, one line naming the file" test $? -eq 2 -a "$(printf '%s\n' "$err" | grep -c .)" -eq 1
check "malformed input names the file" grep -q "bad.json" <<<"$err"
check "nothing drawn for malformed input" test ! -e "$WORK/bad.png"

check "report sentences: cells of an eval grid, column names, experiment file, ranking note" \
  "$PY" "$ROOT/tests/plots/report_text_check.py" "$ROOT/scripts"
check "report heat maps: exact match averaged over seeds, cell by cell" \
  "$PY" "$ROOT/tests/plots/heatmap_mean_check.py" "$ROOT/scripts"
check "a run's probe heat map holds its whole title" "$PY" "$ROOT/tests/plots/probe_title_check.py" "$ROOT/scripts"
check "extrapolation: no tick for a length where no encoding has a number, and the title says so" \
  "$PY" "$ROOT/tests/plots/extrapolation_axis_check.py" "$ROOT/scripts"
check "Ctrl-C while the report saves a picture: exit 130, no traceback, the temp file removed" \
  "$PY" "$ROOT/tests/plots/interrupt_check.py" "$ROOT/scripts" "$DATA/compare"
check "rotary: one pair draws; q·k titled for what it holds (plain, xpos's scales, yarn's factor)" \
  "$PY" "$ROOT/tests/plots/rotary_check.py" "$ROOT/scripts"
check "encodings' extra panels: named axes, future keys masked, --param values stated" \
  "$PY" "$ROOT/tests/plots/pe_labels_check.py" "$ROOT/scripts"
check "attention: sequences per length in the title, integer map ticks, pooled colour bar" \
  "$PY" "$ROOT/tests/plots/attention_labels_check.py" "$ROOT/scripts"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
