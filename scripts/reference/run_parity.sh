#!/usr/bin/env bash
# Parity of poslab's model with the PyTorch twin, for every positional encoding.
#   scripts/reference/run_parity.sh POSLAB_BINARY
# For each kind and two small models: `poslab fixture` in a temp dir, then check_parity.py on them all;
# then check_formulas.py (the twin's formulas against textbook definitions).
# Exit: 0 all pass, 77 python3-torch missing (CTest skip), 1 otherwise.
set -u

if [ $# -lt 1 ]; then
  echo "usage: $0 POSLAB_BINARY" >&2
  exit 2
fi
POSLAB=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# POSLAB_FIXTURE_DEVICE=cuda: poslab's side runs on the GPU (fp32, TF32 off), the twin on the CPU.
# POSLAB_PARITY_PYTHON: a Python whose torch is the LibTorch poslab was built against (scripts/libtorch2/).
if [ -n "${POSLAB_PARITY_PYTHON:-}" ]; then PY=$POSLAB_PARITY_PYTHON
elif [ -x /usr/bin/python3 ]; then PY=/usr/bin/python3; else PY=python3; fi
export PYTHONDONTWRITEBYTECODE=1  # keep the source tree clean when run from CTest
export OPENBLAS_NUM_THREADS=1   # no OpenBLAS threads spinning at each poslab start (tests/cli/lib.sh)

# Asked without importing it (~1.2 s): a torch that is there but broken fails the checks below, loudly.
if ! "$PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' >/dev/null 2>&1; then
  echo "SKIP: python3-torch is not installed (for $PY)"
  exit 77
fi
if [ ! -x "$POSLAB" ]; then
  echo "error: $POSLAB is not an executable" >&2
  exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/poslab-parity.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT

# Two small models per kind:
#   task: copy task with padding (ignored targets), bias=true (the .bias parameters), n_head 6
#         (ALiBi's non-power-of-two slopes), binary with 5 bits;
#   text: char-level text corpus (a copy of poslab_ref.py), bias=false, n_head 4, T=32.
cat >"$TMP/task.json" <<'JSON'
{
  "seed": 1234,
  "data": {"kind": "task", "task": "copy", "min_len": 2, "max_len": 8},
  "model": {"n_layer": 2, "n_head": 6, "n_embd": 48, "block_size": 24, "bias": true,
            "pos_encoding": {"bits": 5}}
}
JSON
cp "$HERE/poslab_ref.py" "$TMP/corpus.txt"
cat >"$TMP/text.json" <<JSON
{
  "data": {"kind": "text", "path": "$TMP/corpus.txt"},
  "model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 32}
}
JSON

# --pos-noise moves the encoding's parameters off their initial values (CoPE's table starts at zero).
# Each entry: a kind, optionally followed by ':'-separated --set overrides of its options
# (rotary_fraction, randomized positions, small tables so that the log branches are reached), and
# five kinds again with LibTorch's GELU and LayerNorm (train.fused_ops=false; the fused ones are the
# default) against the same twin.
P=model.pos_encoding
kinds="none index binary sinusoidal learned rope alibi xpos t5 kerple_log kerple_power sandwich fire cope
  rope:$P.rotary_fraction=0.5 xpos:$P.scale_base=8 t5:$P.num_buckets=8:$P.max_distance=12
  fire:$P.init_c=2:$P.init_L=6 cope:$P.npos=4 learned:$P.randomize.max_position=100
  alibi:$P.randomize.max_position=100 rope:$P.randomize.max_position=100 fire:$P.randomize.max_position=100
  none:train.fused_ops=false index:train.fused_ops=false learned:train.fused_ops=false rope:train.fused_ops=false
  alibi:train.fused_ops=false"
summary=""
failed=0
# First every fixture, then one Python process checks them all (importing torch once, not 58 times);
# each fixture's report lands in its own DIR/parity.log.
dirs=()
labels=()
for entry in $kinds; do
  IFS=: read -r kind opts <<<"$entry"
  sets=(--set "$P.kind=$kind")
  IFS=: read -r -a extra <<<"$opts"
  for o in "${extra[@]}"; do sets+=(--set "$o"); done
  for variant in task text; do
    name="$variant-$(printf '%s' "$entry" | tr ':=/' '_-_')"
    dir="$TMP/$name"
    if ! "$POSLAB" fixture --config "$TMP/$variant.json" --out "$dir" --batch 3 --pos-noise 0.3 \
        --device "${POSLAB_FIXTURE_DEVICE:-cpu}" "${sets[@]}" >"$TMP/$name.fixture.log" 2>&1; then
      cat "$TMP/$name.fixture.log"
      summary+="  [$variant] parity $entry: FAIL (poslab fixture failed)"$'\n'
      failed=1
      continue
    fi
    dirs+=("$dir")
    labels+=("[$variant]|$kind|$opts")
  done
done
if [ ${#dirs[@]} -gt 0 ]; then
  "$PY" "$HERE/check_parity.py" "${dirs[@]}"
  echo
fi
for i in "${!dirs[@]}"; do
  IFS='|' read -r variant kind opts <<<"${labels[$i]}"
  verdict=$(grep '^parity ' "${dirs[$i]}/parity.log" 2>/dev/null | tail -n 1)
  if [[ "$verdict" == *": PASS"* ]]; then
    summary+="  $variant $verdict${opts:+ ($opts)}"$'\n'
  else
    summary+="  $variant ${verdict:-parity $kind: FAIL (check_parity.py wrote no verdict)}${opts:+ ($opts)}"$'\n'
    failed=1
  fi
done

# The formulas themselves against textbook definitions (independent of poslab).
"$PY" "$HERE/check_formulas.py" >"$TMP/formulas.log" 2>&1
rc=$?
cat "$TMP/formulas.log"
echo
if [ $rc -eq 0 ]; then
  summary+="  formulas vs textbook definitions: PASS"$'\n'
else
  summary+="  formulas vs textbook definitions: FAIL (exit $rc)"$'\n'
  failed=1
fi

echo "summary:"
printf '%s' "$summary"
if [ $failed -ne 0 ]; then
  echo "reference parity: FAIL"
  exit 1
fi
echo "reference parity: PASS (all kinds)"
exit 0
