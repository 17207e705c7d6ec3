#!/usr/bin/env bash
# Peak resident memory training on a ~10 MB and a ~1 GB token file (nanoGPT's raw uint16, 8192 ids:
# a small vocabulary keeps the logits, and the allocator's noise, small): memory-mapped and read a window at a time, the two must differ by less than 50 MB.
# Each size is trained twice: the first run checks every id (a sequential pread scan, cached beside
# the file), the second opens with the cache; read_mb (bytes read by read()/pread(), mmap excluded)
# shows what opening costs. Prints one line per run and writes the JSON files to OUT.
#   bash scripts/bench/token_rss.sh [OUT] [STEPS]       (POSLAB=build/poslab by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/token_rss}
STEPS=${2:-30}
POSLAB=${POSLAB:-build/poslab}
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
mkdir -p "$OUT"
# Random ids in chunks of 16M tokens, so that writing the 1 GB file needs little memory itself.
"$PY" - "$OUT" <<'PY'
import os, sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(0)
def write(name, tokens):
    path = os.path.join(out, name)
    with open(path, "wb") as f:
        for start in range(0, tokens, 1 << 24):
            rng.integers(0, 8192, size=min(1 << 24, tokens - start), dtype=np.uint16).tofile(f)
os.makedirs(os.path.join(out, "small"), exist_ok=True); os.makedirs(os.path.join(out, "large"), exist_ok=True)
write("small/train.bin", 5_000_000)        # 10 MB
write("large/train.bin", 500_000_000)      # 1 GB
write("small/val.bin", 1_000_000); write("large/val.bin", 1_000_000)
PY
source scripts/bench/lib.sh
bench_cpu_line
for size in small large; do
  rm -f "$OUT/$size"/*.poslab-scan.json
  for pass in first cached; do
    "$POSLAB" bench --config configs/bench/nanogpt-cpu.json --set data.kind=tokens --set data.dir="$OUT/$size" \
      --set data.vocab_size=8192 --set train.eval_iters=4 --steps "$STEPS" --warmup 2 \
      --json "$OUT/$size-$pass.json" > /dev/null
    "$PY" -c "
import json, os, sys
r = json.load(open('$OUT/$size-$pass.json'))
mb = os.path.getsize('$OUT/$size/train.bin') / 2**20
print(f'$size ({mb:.0f} MB train.bin), $pass open: peak RSS {r[\"peak_rss_mb\"]:.1f} MB, read {r[\"read_mb\"]:.1f} MB')"
  done
done
"$PY" -c "
import json
a = json.load(open('$OUT/small-cached.json'))['peak_rss_mb']; b = json.load(open('$OUT/large-cached.json'))['peak_rss_mb']
print(f'peak RSS difference, 1 GB minus 10 MB: {b - a:+.1f} MB (must be below 50)')
raise SystemExit(0 if abs(b - a) < 50 else 1)"
