#!/usr/bin/env bash
# Bring-your-own-data end to end: poslab tokenize (SentencePiece ids equal Python's, round trips),
# a text config with data.tokenizer, sampling through the run's tokenizer, and nanoGPT's
# shakespeare_char directory (train.bin, val.bin, meta.pkl) trained as is and compared with the
# same text read as characters. Skipped (77) without poslab-tokenize or Debian's python3 modules.
source "$(dirname "$0")/lib.sh"
SRC=$(pwd)
TOOL=$(dirname "$POSLAB")/poslab-tokenize
[ -x "$TOOL" ] || { echo "skip: poslab-tokenize was not built (libsentencepiece-dev)"; exit 77; }
/usr/bin/python3 -c 'import sentencepiece, numpy' 2>/dev/null || { echo "skip: /usr/bin/python3 needs python3-sentencepiece and numpy"; exit 77; }
cd "$WORK"
TEXT=$SRC/data/text/licenses.txt

# 1. poslab tokenize: files, meta.json, ids equal to Python's SentencePiece with the same model.
"$POSLAB" tokenize --input "$TEXT" --out bpe --vocab-size 512 --model-type bpe > tok.log 2>&1
check "tokenize writes train.bin, val.bin, meta.json, tokenizer.model" \
  test -s bpe/train.bin -a -s bpe/val.bin -a -s bpe/meta.json -a -s bpe/tokenizer.model
check "no partial directory is left" bash -c '! ls -d bpe.partial-* 2>/dev/null'
# Token files that cannot be written (here the file size limit, as a full disk would): one line naming the
# file and the reason (it said "write failed: FILE"), and nothing left behind.
( trap '' XFSZ; ulimit -f 16; exec "$POSLAB" tokenize --input "$TEXT" --out capped --tokenizer bpe/tokenizer.model ) > capped.log 2>&1
status=$?
check "a token file that cannot be written: exit 1 ($status), naming it and why" \
  bash -c "[ $status -eq 1 ] && grep -qE 'cannot write .*capped.partial-[0-9]+/train.bin \(File too large\)' capped.log"
check "... leaving nothing" bash -c '! ls -d capped capped.partial-* 2>/dev/null'
check "python: train.bin + val.bin are Python's ids for the two halves, and decode to the text byte for byte" \
  /usr/bin/python3 - "$TEXT" <<'PY'
import json, sys, numpy as np, sentencepiece as spm
meta = json.load(open("bpe/meta.json"))
assert meta["vocab_size"] == 512 and meta["dtype"] == "uint16" and meta["tokenizer"] == "tokenizer.model", meta
sp = spm.SentencePieceProcessor(model_file="bpe/tokenizer.model")
assert sp.get_piece_size() == 512
raw = open(sys.argv[1], "rb").read()
tr = np.fromfile("bpe/train.bin", dtype=np.uint16).tolist()
va = np.fromfile("bpe/val.bin", dtype=np.uint16).tolist()
assert len(tr) == meta["train_tokens"] and len(va) == meta["val_tokens"]
t, v = sp.decode(tr), sp.decode(va)
assert (t + v).encode() == raw, "the halves do not decode to the file"
assert raw[:len(t.encode())].endswith(b"\n"), "the split is not at a line end"
assert sp.encode(t) == tr and sp.encode(v) == va, "ids differ from Python's SentencePiece"
assert 0.08 < len(v.encode()) / len(raw) < 0.12
PY
# 2. Round trips through poslab-tokenize: the licences text, and characters the model never saw
#    (byte fallback): CJK, emoji, a combining accent, a tab, CRLF.
printf 'Tokens \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa6\x80 e\xcc\x81\t\r\nend' > unseen.txt
for f in "$TEXT" unseen.txt; do
  "$TOOL" encode --model bpe/tokenizer.model < "$f" > ids.txt
  "$TOOL" decode --model bpe/tokenizer.model < ids.txt > back.txt
  check "decode(encode(x)) == x for $(basename "$f")" cmp -s "$f" back.txt
done
check "unseen characters become byte pieces, as Python's SentencePiece encodes them" \
  /usr/bin/python3 -c "
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file='bpe/tokenizer.model')
ids = [int(x) for x in open('ids.txt').read().split()]
assert ids == sp.encode(open('unseen.txt', encoding='utf-8', newline='').read()), 'ids differ'
assert any(sp.id_to_piece(i) == '<0xF0>' for i in ids), 'no byte fallback'
"
# U+2581, SentencePiece's space marker, is the one character that does not round-trip: it decodes as a space,
# and both the tool and poslab tokenize say so with the count.
printf 'a\xe2\x96\x81b \xe2\x96\x81\xe2\x96\x81\n' > marker.txt
"$TOOL" encode --model bpe/tokenizer.model < marker.txt 2> marker.err | "$TOOL" decode --model bpe/tokenizer.model > marker.out
check "U+2581 decodes as a space, and encode warns" bash -c "printf 'a b   \n' | cmp -s - marker.out && grep -q \"space marker: it decodes as a space\" marker.err"
{ cat "$TEXT"; cat marker.txt; } > marked.txt
"$POSLAB" tokenize --input marked.txt --out marked --tokenizer bpe/tokenizer.model > marked.log 2>&1
check "poslab tokenize counts the U+2581 in an input" grep -q "marked.txt: holds 3 U+2581" marked.log

# Ids past the model's pieces (a padded vocabulary) decode as the unknown piece, as Python's decode of the
# ids with those replaced by unk_id gives; a word that is no id is refused.
echo "$(head -c 200 ids.txt | cut -d' ' -f1-5) 512 700 $(head -c 200 ids.txt | cut -d' ' -f6-8)" > padded.txt
"$TOOL" decode --model bpe/tokenizer.model < padded.txt > padded.out
check "decode: ids past the pieces decode as the unknown piece" /usr/bin/python3 -c "
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file='bpe/tokenizer.model')
ids = [int(x) for x in open('padded.txt').read().split()]
assert sp.get_piece_size() == 512 and max(ids) >= 512, ids
want = sp.decode([i if i < 512 else sp.unk_id() for i in ids])
got = open('padded.out', encoding='utf-8').read()
assert got == want and got.count(chr(0x2047)) == 2, (got, want)"
expect_fail 2 "decode: 'x1' is not a token id" -- bash -c "echo '1 x1' | '$TOOL' decode --model bpe/tokenizer.model"

# An existing model applies to another file (unigram this time) with the same ids as Python's.
"$POSLAB" tokenize --input "$TEXT" --out uni --vocab-size 400 --model-type unigram >/dev/null 2>&1
head -c 20000 "$TEXT" > part.txt
"$POSLAB" tokenize --input part.txt --out applied --tokenizer uni/tokenizer.model --val-fraction 0.2 >/dev/null 2>&1
check "--tokenizer applies a model: ids equal Python's" /usr/bin/python3 -c "
import numpy as np, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file='uni/tokenizer.model')
ids = np.fromfile('applied/train.bin', dtype=np.uint16).tolist() + np.fromfile('applied/val.bin', dtype=np.uint16).tolist()
t = sp.decode(np.fromfile('applied/train.bin', dtype=np.uint16).tolist())
assert sp.encode(t) + sp.encode(open('part.txt').read()[len(t):]) == ids
"
# --out with a trailing slash names the same folder (its partial folder goes beside it, not inside).
"$POSLAB" tokenize --input part.txt --out applied-slash/ --tokenizer uni/tokenizer.model --val-fraction 0.2 > slash.log 2>&1
check "--out DIR/ writes DIR as --out DIR does" cmp applied/train.bin applied-slash/train.bin
check "--out DIR/ leaves no partial folder" bash -c '! ls -d applied-slash/*partial* applied-slash.partial* 2>/dev/null'

# A text without newlines (text8's shape): SentencePiece skips sentences over 16 KiB, so the trainer gets the
# one line in pieces; the model trains and its ids equal Python's.
tr '\n' ' ' < "$TEXT" > oneline.txt
"$POSLAB" tokenize --input oneline.txt --out oneline --vocab-size 400 > oneline.log 2>&1
check "a text without newlines trains a model ($(tail -1 oneline.log))" test -s oneline/tokenizer.model
check "a text without newlines: ids equal Python's" /usr/bin/python3 -c "
import numpy as np, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file='oneline/tokenizer.model')
assert sp.get_piece_size() == 400, sp.get_piece_size()
tr, va = np.fromfile('oneline/train.bin', dtype=np.uint16).tolist(), np.fromfile('oneline/val.bin', dtype=np.uint16).tolist()
text, t = open('oneline.txt').read(), sp.decode(tr)
assert text.startswith(t) and sp.encode(t) + sp.encode(text[len(t):]) == tr + va
"
# A vocabulary larger than the text gives: SentencePiece stops short, and both ways of tokenizing say so.
head -c 30000 "$TEXT" > part30k.txt
"$POSLAB" tokenize --input part30k.txt --out large-vocab --vocab-size 100000 > large-vocab.log 2>&1
check "tokenize says the model has fewer pieces than --vocab-size asked for" \
  grep -q "poslab tokenize: --vocab-size 100000: the text gives only [0-9]* pieces, so the model has [0-9]*, not 100000" large-vocab.log
cat > large-vocab.json <<JSON
{"data": {"kind": "text", "path": "part30k.txt", "tokenizer": {"sentencepiece": {"vocab_size": 100000}}},
 "model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16}, "train": {"max_iters": 1}, "eval": {"lengths": [16]}}
JSON
"$POSLAB" train -c large-vocab.json --out runs-large/r > large-vocab-train.log 2>&1
check "a text config says so too" grep -q "data.tokenizer.sentencepiece.vocab_size 100000: the text gives only [0-9]* pieces" large-vocab-train.log
# A meta.json whose vocab_size (300) is below its tokenizer's 512 pieces: the ids in the files fit, but the
# tokenizer writes ids the model has no row for (a prompt, a probe's text): training refuses it, naming both.
mkdir -p vocab300 && cp bpe/tokenizer.model vocab300/
/usr/bin/python3 -c "
import numpy as np
for f in ('train', 'val'):
    a = np.fromfile('bpe/%s.bin' % f, dtype=np.uint16)
    a[a < 300].tofile('vocab300/%s.bin' % f)
open('vocab300/meta.json', 'w').write('{\"vocab_size\": 300, \"dtype\": \"uint16\", \"tokenizer\": \"tokenizer.model\"}')"
cat > vocab300.json <<JSON
{"data": {"kind": "tokens", "dir": "vocab300"},
 "model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16}, "train": {"max_iters": 1}, "eval": {"lengths": [16]}}
JSON
expect_fail 2 "vocab300/meta.json: its tokenizer $WORK/vocab300/tokenizer.model has 512 pieces, more than the vocabulary of 300 (its vocab_size)" -- \
  "$POSLAB" train -c vocab300.json --out runs-300/refused
check "... and nothing is written" test ! -e runs-300/refused
# Each input file is one document, a file given twice (upsampled) too: an end-of-text id between every two.
printf 'a short document\n' > doc.txt
"$POSLAB" tokenize --input doc.txt doc.txt "$TEXT" --out docs --tokenizer bpe/tokenizer.model > docs.log 2>&1
check "three inputs, one twice: two end-of-text ids, each after a whole doc.txt" /usr/bin/python3 -c "
import numpy as np, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file='bpe/tokenizer.model')
ids = np.fromfile('docs/train.bin', dtype=np.uint16).tolist()
doc = sp.encode(open('doc.txt').read())
assert ids[:2 * len(doc) + 2] == doc + [2] + doc + [2], ids[:2 * len(doc) + 2]
assert ids.count(2) == 2, ids.count(2)
"

# 3. A text config with data.tokenizer: tokenized once into the cache beside the run; the run keeps
#    its model; eval and sample go through it.
cat > bpe.json <<JSON
{"data": {"kind": "text", "path": "$TEXT", "tokenizer": {"sentencepiece": {"vocab_size": 400, "model_type": "bpe"}}},
 "model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32, "pos_encoding": {"kind": "alibi"}},
 "train": {"max_iters": 20, "batch_size": 8, "eval_interval": 10, "eval_iters": 2, "precision": "fp32", "warmup_iters": 2},
 "eval": {"lengths": [32, 64], "batches": 1, "batch_size": 4}}
JSON
"$POSLAB" train -c bpe.json --out runs/bpe > bpe.log 2>&1
check "a sentencepiece text run trains and keeps tokenizer.model" test -s runs/bpe/tokenizer.model -a -s runs/bpe/checkpoint.pt
check "its vocab.json names the model and 400 pieces" \
  /usr/bin/python3 -c "import json; v = json.load(open('runs/bpe/vocab.json')); assert v == {'vocab_size': 400, 'sentencepiece': 'tokenizer.model'}, v"
check "the tokenized text is cached beside the run" bash -c 'ls runs/.poslab-cache/*/train.bin >/dev/null'
check "the text is tokenized once: the trained model's entry is an alias of it (one directory, one link)" \
  bash -c '[ "$(grep -c "tokenizing .* with SentencePiece" bpe.log)" -eq 1 ] && [ "$(find runs/.poslab-cache -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq 1 ] && [ "$(find runs/.poslab-cache -mindepth 1 -maxdepth 1 -type l | wc -l)" -eq 1 ]'
check "eval.json parses and scores both lengths" /usr/bin/python3 -c "
import json; e = json.load(open('runs/bpe/eval.json')); assert [r['status'] for r in e['results']] == ['ok', 'ok'], e"
# A character-level config started from the SentencePiece run: refused, naming both kinds of vocabulary (not
# a JSON diff of the two whole vocabularies).
sed 's/, "tokenizer": {"sentencepiece": {"vocab_size": 400, "model_type": "bpe"}}//' bpe.json > chars-like-bpe.json
expect_fail 2 "--init-from runs/bpe: its vocabulary (400 SentencePiece pieces) differs from this config's data (" -- \
  "$POSLAB" train -c chars-like-bpe.json --init-from runs/bpe --out runs/chars-from-bpe
check "... and names the characters it has" bash -c "'$POSLAB' train -c chars-like-bpe.json --init-from runs/bpe --out runs/chars-from-bpe 2>&1 | grep -qE 'data \([0-9]+ characters\); token ids would mean other text'"
# Two runs tokenizing the same text with the same settings at the same moment (two shards of a grid): the
# one that finishes second uses the first one's cache entry (it failed: "Directory not empty").
sed 's/"vocab_size": 400/"vocab_size": 411/' bpe.json > race.json
"$POSLAB" train -c race.json --set train.max_iters=2 --out race/a > race-a.log 2>&1 &
pid_a=$!
"$POSLAB" train -c race.json --set train.max_iters=2 --out race/b > race-b.log 2>&1
status_b=$?
wait $pid_a
status_a=$?
check "two runs tokenizing one text at once both train (exit $status_a and $status_b; $(grep -h 'error' race-a.log race-b.log | head -1))" \
  test "$status_a" -eq 0 -a "$status_b" -eq 0
check "... into one cache entry" test "$(find race/.poslab-cache -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq 1
# Exact resume: stopped at step 10 and resumed (tokenizing again with the run's own model copy), the
# metrics equal the straight run's.
"$POSLAB" train -c bpe.json --out runs/bpe-split --stop-at 10 > split.log 2>&1
"$POSLAB" train --resume runs/bpe-split >> split.log 2>&1
check "a sentencepiece run stopped and resumed logs the straight run's losses" /usr/bin/python3 -c "
import json
rows = lambda d: [{k: r[k] for k in ('step', 'train_loss', 'val_loss') if k in r} for r in map(json.loads, open(d + '/metrics.jsonl'))]
a, b = rows('runs/bpe'), rows('runs/bpe-split')
assert a == b, (a, b)"
out=$("$POSLAB" sample --run runs/bpe --prompt "Permission is " --tokens 30 --seed 3 2>/dev/null)
check "sample encodes the prompt and decodes pieces into text" bash -c '[[ "$1" == "Permission is "* ]] && [ ${#1} -gt 20 ]' _ "$out"
# The run's tokenizer.model damaged: sample names the file as what it is, not by the tokenizing tool's flag.
# A run's tokenizer.model replaced by one of more pieces than its vocabulary (a hand-edited run): an id the
# model has no row for is refused by name, not fed to the embedding.
cp -r runs/bpe runs/bpe-big && cp bpe/tokenizer.model runs/bpe-big/tokenizer.model
big=$(/usr/bin/python3 -c "
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file='bpe/tokenizer.model')
print(next('%d %s' % (i, sp.decode([i])) for i in range(400, sp.get_piece_size()) if sp.encode(sp.decode([i])) == [i] and ' ' not in sp.decode([i])))")
expect_fail 2 "SentencePiece gives id ${big%% *}, past the run's vocabulary of 400 (runs/bpe-big/tokenizer.model has more pieces than that vocabulary)" -- \
  "$POSLAB" sample --run runs/bpe-big --prompt "${big#* }" --tokens 5
cp -r runs/bpe runs/bpe-bad && echo damaged > runs/bpe-bad/tokenizer.model
expect_fail 2 "SentencePiece model runs/bpe-bad/tokenizer.model: not a SentencePiece model" -- \
  "$POSLAB" sample --run runs/bpe-bad --prompt "Permission" --tokens 5
# A padded vocabulary (data.vocab_size past the tokenizer's 512 pieces): a model trained 20 steps samples
# ids past the pieces at temperature 5 (half its rows are past them); they print as the unknown piece.
cat > pad.json <<JSON
{"data": {"kind": "tokens", "dir": "bpe", "vocab_size": 1024},
 "model": {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32},
 "train": {"max_iters": 20, "batch_size": 8, "eval_interval": 10, "eval_iters": 2, "precision": "fp32"},
 "eval": {"lengths": [32], "batches": 1, "batch_size": 4}}
JSON
"$POSLAB" train -c pad.json --out runs/bpe-pad > pad.log 2>&1
out=$("$POSLAB" sample --run runs/bpe-pad --prompt "Permission" --tokens 100 --temperature 5 --seed 2 2>pad.err)
# The unknown piece, U+2047, as its UTF-8 bytes: bash's \u escape gives the six characters "\u2047" where the
# locale is not UTF-8 (no LANG set, as in a fresh container).
check "sample on a padded vocabulary prints ids past the pieces as the unknown piece" \
  bash -c '[[ "$1" == "Permission"* && "$1" == *$'"'"'\xe2\x81\x87'"'"'* ]] && ! [ -s pad.err ]' _ "$out"
# The passkey probe on a SentencePiece run: the parts encoded on their own, the key one piece per digit,
# the noise haystack only.
"$POSLAB" probe --run runs/bpe --task passkey --lengths 64 --trials 4 > probe.log 2>&1
check "passkey probe on a sentencepiece run writes probe-passkey.json" /usr/bin/python3 -c "
import json, math
p = json.load(open('runs/bpe/probe-passkey.json'))
assert p['template'] == 'compact' and p['haystack'] == 'noise' and p['train_length'] == 32, p
rows = p['results']
assert rows and all(r['length'] == 64 and r['status'] == 'ok' and r['trials'] == 4 for r in rows), rows
assert all(0 <= r['exact'] <= 1 and math.isfinite(r['key_logprob']) and r['key_logprob'] < 0 for r in rows), rows"
check "each digit is one piece of the run's tokenizer (what the probe relies on)" /usr/bin/python3 -c "
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file='runs/bpe/tokenizer.model')
assert all(len(sp.encode(str(d))) == 1 for d in range(10)), [sp.encode(str(d), out_type=str) for d in range(10)]"
expect_fail 2 "--haystack text" -- "$POSLAB" probe --run runs/bpe --task passkey --lengths 64 --haystack text

# 4. nanoGPT's shakespeare_char directory, made by prepare.py's logic (written out here) from the
#    licences text; trained with the shipped config, and beside it the same text as characters.
mkdir -p shakespeare_char
/usr/bin/python3 - "$TEXT" shakespeare_char <<'PY'
import os, pickle, sys, numpy as np
data = open(sys.argv[1], "r").read()
chars = sorted(list(set(data)))
vocab_size = len(chars)
stoi = { ch:i for i,ch in enumerate(chars) }
itos = { i:ch for i,ch in enumerate(chars) }
n = len(data)
train_ids = np.array([stoi[c] for c in data[:int(n*0.9)]], dtype=np.uint16)
val_ids = np.array([stoi[c] for c in data[int(n*0.9):]], dtype=np.uint16)
train_ids.tofile(os.path.join(sys.argv[2], "train.bin"))
val_ids.tofile(os.path.join(sys.argv[2], "val.bin"))
with open(os.path.join(sys.argv[2], "meta.pkl"), "wb") as f:
    pickle.dump({"vocab_size": vocab_size, "itos": itos, "stoi": stoi}, f)
PY
SMALL=(--set model.n_layer=1 --set model.n_head=2 --set model.n_embd=32 --set model.block_size=32 --set model.dropout=0.0
       --set train.max_iters=60 --set train.batch_size=16 --set train.eval_interval=30 --set train.eval_iters=8
       --set train.warmup_iters=5 --set train.lr_decay_iters=60 --set train.precision=fp32 --set 'eval.lengths=[32]'
       --set eval.batches=2)
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=shakespeare_char "${SMALL[@]}" \
  --set train.log_interval=1 --out runs/nano > nano.log 2>&1
check "nanogpt-char.json trains on prepare.py's directory" test -s runs/nano/summary.json
# A validation file in a folder of its own, with a sidecar of its own: the same vocabulary passes; another
# layout (uint32 ids) or another vocabulary is refused naming both sidecars, before anything is written.
mkdir -p valsame val32
cp shakespeare_char/val.bin shakespeare_char/meta.pkl valsame/
/usr/bin/python3 -c "
import json, pickle, numpy as np
np.fromfile('shakespeare_char/val.bin', np.uint16).astype(np.uint32).tofile('val32/val.bin')
n = pickle.load(open('shakespeare_char/meta.pkl', 'rb'))['vocab_size']
json.dump({'vocab_size': n, 'dtype': 'uint32'}, open('val32/meta.json', 'w'))"
SPLIT=(--set data.train_path=shakespeare_char/train.bin --set train.max_iters=2)
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" "${SMALL[@]}" "${SPLIT[@]}" --set data.val_path=valsame/val.bin \
  --out runs/valsame > valsame.log 2>&1
check "a validation file beside a copy of the training file's meta.pkl trains" test -s runs/valsame/summary.json
expect_fail 2 "data.val_path: $WORK/val32/meta.json differs from $WORK/shakespeare_char/meta.pkl (dtype uint32 against uint16)" -- \
  "$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" "${SMALL[@]}" "${SPLIT[@]}" --set data.val_path=val32/val.bin --out runs/val32
check "... and nothing is written" test ! -e runs/val32
check "the run's vocabulary is meta.pkl's itos" /usr/bin/python3 -c "
import json, pickle
v = json.load(open('runs/nano/vocab.json')); m = pickle.load(open('shakespeare_char/meta.pkl', 'rb'))
assert v == [m['itos'][i] for i in range(m['vocab_size'])], v"
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.kind=text --set data.path="$TEXT" "${SMALL[@]}" --out runs/chars > chars.log 2>&1
check "the same text as characters trains" test -s runs/chars/summary.json
check "validation losses agree within 0.1 nat (same ids; the splits differ by at most a character)" /usr/bin/python3 -c "
import json
a = json.load(open('runs/nano/summary.json'))['final_val_loss']; b = json.load(open('runs/chars/summary.json'))['final_val_loss']
print('nanoGPT directory', a, 'characters', b)
assert abs(a - b) < 0.1, (a, b)"
# With the text split made equal to prepare.py's (int(n * f) characters held out, f chosen for it), the two
# paths draw the same windows of the same ids: every logged loss is equal, not only close.
frac=$(/usr/bin/python3 -c "import sys; n = len(open(sys.argv[1]).read()); print(repr((n - int(n * 0.9) + 0.5) / n))" "$TEXT")
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.kind=text --set data.path="$TEXT" "${SMALL[@]}" \
  --set train.log_interval=1 --set data.val_fraction="$frac" --out runs/chars-steps > chars-steps.log 2>&1
check "on equal splits the token files and the text train identically: every step's loss" /usr/bin/python3 -c "
import json
def losses(run):
    rows = [json.loads(l) for l in open(run + '/metrics.jsonl')]
    return [(r['step'], r.get('train_loss'), r.get('val_loss')) for r in rows if 'train_loss' in r or 'val_loss' in r]
a, b = losses('runs/nano'), losses('runs/chars-steps')
assert len(a) > 60 and a == b, [(x, y) for x, y in zip(a, b) if x != y][:3]"
out=$("$POSLAB" sample --run runs/nano --prompt "The " --tokens 10 --seed 1 2>/dev/null)
check "sample on a meta.pkl run decodes characters" bash -c '[[ "$1" == "The "* ]] && [ ${#1} -ge 14 ]' _ "$out"

# 5. Token files with no sidecar: data.vocab_size gives the vocabulary; sample takes and prints ids.
mkdir -p ids && cp shakespeare_char/train.bin shakespeare_char/val.bin ids/
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=ids --set data.vocab_size=100 "${SMALL[@]}" \
  --set train.max_iters=4 --out runs/ids > ids.log 2>&1
check "a run without meta trains with data.vocab_size" /usr/bin/python3 -c "
import json; assert json.load(open('runs/ids/vocab.json')) == {'vocab_size': 100}"
out=$("$POSLAB" sample --run runs/ids --prompt "1 2 3" --tokens 5 --seed 1 2>/dev/null)
check "sample on an ids-only run takes and prints ids" bash -c '[[ "$1" =~ ^"1 2 3"( [0-9]+){5}$ ]]' _ "$out"
expect_fail 2 "--prompt: 'abc' is not a token id below 100" -- "$POSLAB" sample --run runs/ids --prompt "abc"
expect_fail 2 "--prompt: '100' is not a token id below 100 (this run has no tokenizer: write the prompt as ids, e.g. \"12 7 99\")" -- \
  "$POSLAB" sample --run runs/ids --prompt "12 100"
# val.bin the same file as train.bin (a link here): trained, with a warning that validation is training data.
ln -sf train.bin ids/val.bin
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=ids --set data.vocab_size=100 "${SMALL[@]}" \
  --set train.max_iters=2 --out runs/ids-same > ids-same.log 2>&1
check "val.bin the same file as train.bin trains with a warning naming both" \
  grep -qE "ids/train.bin and [^ ]*ids/val.bin are the same file: the validation loss is measured on the training tokens" ids-same.log
cp -f shakespeare_char/val.bin ids/val.bin.tmp && mv -f ids/val.bin.tmp ids/val.bin
# poslab data shows such a corpus as ids, one space between them and none before: train.bin's own windows.
"$POSLAB" data -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=ids --set data.vocab_size=100 --n 3 \
  --format jsonl > ids.jsonl 2>/dev/null
check "poslab data --format jsonl on an ids-only corpus: the input is ids of train.bin, space-separated" /usr/bin/python3 -c "
import json, numpy as np
train = np.fromfile('ids/train.bin', dtype=np.uint16).tolist()
lines = [json.loads(l) for l in open('ids.jsonl')]
assert len(lines) == 3
for l in lines:
    x = l['input']
    assert x == ' '.join(x.split()) and x, repr(x[:40])
    ids = [int(t) for t in x.split()]
    assert any(train[i:i + len(ids)] == ids for i in range(len(train) - len(ids) + 1)), ids[:8]
    assert all(t == str(int(t)) for _, t in l['targets']), l['targets'][:3]
"

# A run's token files whose sidecar changed since it trained (meta.pkl rewritten with its characters at other
# ids, or with one more): --resume and eval refuse them, naming the first id that differs, where they fed the
# model ids whose characters had moved (the resume went on, rc 0). Put back, the run resumes.
mkdir -p remap && cp shakespeare_char/train.bin shakespeare_char/val.bin shakespeare_char/meta.pkl remap/
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=remap "${SMALL[@]}" --set train.max_iters=4 \
  --stop-at 2 --out runs/remap > remap.log 2>&1
cp remap/meta.pkl remap.meta.pkl
/usr/bin/python3 -c "
import pickle
m = pickle.load(open('remap/meta.pkl', 'rb')); it = m['itos']; n = len(it)
i2 = {i: it[(i + 1) % n] for i in range(n)}
pickle.dump({'vocab_size': n, 'itos': i2, 'stoi': {c: i for i, c in i2.items()}}, open('remap/meta.pkl', 'wb'))"
n=$(/usr/bin/python3 -c "import pickle; print(pickle.load(open('remap.meta.pkl', 'rb'))['vocab_size'])")
# The characters at id 0 before and after, as JSON writes them (the message quotes vocab.json's form).
first=$(/usr/bin/python3 -c "
import json, pickle; it = pickle.load(open('remap.meta.pkl', 'rb'))['itos']
print(json.dumps(it[0]) + ' in the run, ' + json.dumps(it[1]) + ' here')")
expect_fail 2 "remap/meta.pkl: its vocabulary ($n symbols) differs from the run's ($n symbols; first at id 0: $first); these token files are not the ones the run was trained on" -- \
  "$POSLAB" train --resume runs/remap
expect_fail 2 "remap/meta.pkl: its vocabulary ($n symbols) differs from the run's" -- "$POSLAB" eval --run runs/remap --lengths 32
/usr/bin/python3 -c "
import pickle
m = pickle.load(open('remap.meta.pkl', 'rb')); it = dict(m['itos']); n = len(it); it[n] = '~'
pickle.dump({'vocab_size': n + 1, 'itos': it, 'stoi': {c: i for i, c in it.items()}}, open('remap/meta.pkl', 'wb'))"
expect_fail 2 "remap/meta.pkl: its vocabulary ($((n + 1)) symbols) differs from the run's ($n symbols; first at " -- \
  "$POSLAB" train --resume runs/remap
check "... and neither moved the run on" /usr/bin/python3 -c "
import json; assert json.load(open('runs/remap/summary.json'))['status'] == 'interrupted'"
cp remap.meta.pkl remap/meta.pkl
"$POSLAB" train --resume runs/remap >> remap.log 2>&1
check "with meta.pkl put back the run resumes and finishes" /usr/bin/python3 -c "
import json; assert json.load(open('runs/remap/summary.json'))['status'] == 'done'"
# A run records the files it trains on (data_files.json: each one's size and SHA-256, of its bytes or, past
# 16 MiB, of 256 blocks of 64 KiB spread over it; docs/outputs.md). Token files changed since (appended to,
# or rewritten at their size) are refused by --resume, and by eval and attention where the changed file is
# their validation split; both went on with other tokens without a word. Put back, the run resumes.
mkdir -p grown && cp shakespeare_char/train.bin shakespeare_char/val.bin shakespeare_char/meta.pkl grown/
# train.bin past 16 MiB (random ids below the vocabulary), so that it is identified by its blocks.
/usr/bin/python3 -c "
import numpy as np, pickle
n = pickle.load(open('grown/meta.pkl', 'rb'))['vocab_size']
np.random.default_rng(1).integers(0, n, size=9 * 2**20, dtype=np.uint16).tofile('grown/train.bin')"
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=grown "${SMALL[@]}" --set train.max_iters=4 \
  --stop-at 2 --out runs/grown > grown.log 2>&1
check "data_files.json: each token file's size and SHA-256, whole (sha256sum's) or of its 256 spread blocks" /usr/bin/python3 -c "
import hashlib, json, os, sys
sys.path.insert(0, '$CLI_DIR/py')
from blocks_hash import blocks_sha256
r = json.load(open('runs/grown/data_files.json'))
here = os.path.abspath('grown')
assert [(f['role'], f['key'], f['path']) for f in r['files']] == [('train', 'data.dir', here + '/train.bin'), ('val', 'data.dir', here + '/val.bin')], r
for f in r['files']:
    data = open(f['path'], 'rb').read()
    assert f['bytes'] == len(data) == os.path.getsize(f['path']), f
    if len(data) <= 16 * 2**20:
        want, how = hashlib.sha256(data).hexdigest(), 'whole'
    else:
        want, how = blocks_sha256(data), 'blocks'
    assert (f['sha256'], f['hashed']) == (want, how), (f, want, how)
assert [f['hashed'] for f in r['files']] == ['blocks', 'whole']"
check "... with the modification time of a file identified by its blocks, and only of that one" /usr/bin/python3 -c "
import json, os
r = json.load(open('runs/grown/data_files.json'))
train, val = r['files']
assert train['mtime_ns'] == os.stat(train['path']).st_mtime_ns and 'mtime_ns' not in val, r"
# One token id changed between the first two blocks: the size and the blocks' hash stay (checked here from the file),
# the time does not. Resuming warns that such an edit is not seen, once, and goes on.
cp -p grown/train.bin grown.train.kept
/usr/bin/python3 -c "
import sys
sys.path.insert(0, '$CLI_DIR/py')
from blocks_hash import BLOCK as B, blocks_sha256 as blocks
p = 'grown/train.bin'
data = bytearray(open(p, 'rb').read())
before = blocks(bytes(data))
assert (len(data) - B) // 255 > B + 16, 'no gap between the first blocks'
old = int.from_bytes(data[B + 16:B + 18], 'little')
data[B + 16:B + 18] = (5 if old != 5 else 6).to_bytes(2, 'little')  # another id, below the vocabulary
assert blocks(bytes(data)) == before
open(p, 'wb').write(data)"
"$POSLAB" train --resume runs/grown --stop-at 3 > grown-between.log 2>&1
status=$?
check "resuming beside an edit between the blocks warns once and goes on (exit $status)" bash -c "[ $status -eq 0 ] &&
  [ \$(grep -c 'data.dir $WORK/grown/train.bin was modified since the run trained, its size and the 256 blocks its record hashed the same (runs/grown/data_files.json): an edit between those blocks is not seen' grown-between.log) -eq 1 ]"
cp -p grown.train.kept grown/train.bin
"$POSLAB" train --resume runs/grown --stop-at 3 > grown-kept.log 2>&1
check "... and with the file and its time put back, no warning" bash -c "! grep -q 'was modified since' grown-kept.log"
cp grown/train.bin grown.train.bin
head -c 2000 shakespeare_char/train.bin >> grown/train.bin
size=$(stat -c %s grown.train.bin)
expect_fail 2 "--resume runs/grown: data.dir $WORK/grown/train.bin changed since the run trained ($size bytes then, $((size + 2000)) now; runs/grown/data_files.json): resuming would go on with other tokens; put the file back, or start a new run from this one's weights (--init-from runs/grown)" -- \
  "$POSLAB" train --resume runs/grown
"$POSLAB" eval --run runs/grown --lengths 32 > grown-eval.log 2>&1
check "... eval, which reads val.bin alone, goes on (exit $?)" grep -q "written: runs/grown/eval.json" grown-eval.log
# One id changed in the first block, the size kept.
cp grown.train.bin grown/train.bin
printf '\001' | dd of=grown/train.bin bs=1 seek=10 conv=notrunc status=none
expect_fail 2 "--resume runs/grown: data.dir $WORK/grown/train.bin changed since the run trained (the same size, other bytes;" -- \
  "$POSLAB" train --resume runs/grown
cp grown.train.bin grown/train.bin
/usr/bin/python3 -c "
import numpy as np
a = np.fromfile('grown/val.bin', np.uint16); a[::-1].tofile('grown/val.bin')"
expect_fail 2 "run runs/grown: data.dir $WORK/grown/val.bin changed since the run trained (the same size, other bytes; runs/grown/data_files.json): it would read other tokens than the run's validation split; put the file back" -- \
  "$POSLAB" eval --run runs/grown --lengths 32
expect_fail 2 "run runs/grown: data.dir $WORK/grown/val.bin changed since the run trained" -- "$POSLAB" attention --run runs/grown --no-plot
cp shakespeare_char/val.bin grown/val.bin
"$POSLAB" train --resume runs/grown >> grown.log 2>&1
check "with the files put back the run resumes and finishes" /usr/bin/python3 -c "
import json; assert json.load(open('runs/grown/summary.json'))['status'] == 'done'"
# A finished run resumed trains nothing: a training file changed since does not stop it (its validation file is
# what its evaluation reads, and that is checked).
head -c 2000 shakespeare_char/train.bin >> grown/train.bin
"$POSLAB" train --resume runs/grown > grown-done.log 2>&1
status=$?
check "a finished run resumed beside a changed training file: nothing to train, exit 0 ($status)" \
  bash -c "[ $status -eq 0 ] && grep -q 'is finished (step 4 of 4): nothing to train' grown-done.log"
cp grown.train.bin grown/train.bin
# Without its record the run's files cannot be checked: eval says so, naming the record and the files, and goes on.
mv runs/grown/data_files.json grown.data_files.json
"$POSLAB" eval --run runs/grown --lengths 32 > grown-norecord.log 2>&1
status=$?
check "eval of a run whose data_files.json is gone warns once and goes on (exit $status)" bash -c "[ $status -eq 0 ] &&
  [ \$(grep -c 'runs/grown/data_files.json is missing, the record of the files the run trained on: whether $WORK/grown/train.bin, $WORK/grown/val.bin changed since cannot be checked' grown-norecord.log) -eq 1 ] &&
  grep -q 'written: runs/grown/eval.json' grown-norecord.log"
mv grown.data_files.json runs/grown/data_files.json
# An ids-only run given token files with ids past its vocabulary: the error says the run's vocabulary is the
# bound (data.vocab_size cannot be set on a resume).
mkdir -p ids-grow && cp shakespeare_char/train.bin shakespeare_char/val.bin ids-grow/
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=ids-grow --set data.vocab_size=100 "${SMALL[@]}" \
  --set train.max_iters=4 --stop-at 2 --out runs/ids-grow > ids-grow.log 2>&1
/usr/bin/python3 -c "
import numpy as np
a = np.fromfile('ids-grow/train.bin', dtype=np.uint16); a[7] = 150; a.tofile('ids-grow/train.bin')"
expect_fail 2 "ids-grow/train.bin: token id 150 at byte offset 14 (token 7) is not below the vocabulary size 100 (the run's vocabulary: these token files are not the ones it was trained on)" -- \
  "$POSLAB" train --resume runs/ids-grow
# A directory where a token file should be is named as one.
mkdir -p dirfile/train.bin && cp shakespeare_char/val.bin shakespeare_char/meta.pkl dirfile/
expect_fail 2 "dirfile/train.bin: is a directory, expected a token file" -- \
  "$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=dirfile "${SMALL[@]}" --out runs/dirfile
check "... and no run is left" test ! -e runs/dirfile

# A token file that turns bad under a running job (ids past the vocabulary written in place, its size and
# time kept, so the cached scan still vouches for it): the run fails at the step that reads them, exit 1,
# and summary.json says "failed" with the reason.
mkdir -p changing && cp shakespeare_char/train.bin shakespeare_char/val.bin shakespeare_char/meta.pkl changing/
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=changing "${SMALL[@]}" --set train.max_iters=1 \
  --out runs/changing0 > changing.log 2>&1
/usr/bin/python3 -c "
import numpy as np, os
p = 'changing/train.bin'; st = os.stat(p)
a = np.fromfile(p, dtype=np.uint16); a[len(a) // 10:] = 200; a.tofile(p)
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))"
"$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=changing "${SMALL[@]}" --set train.max_iters=50 \
  --out runs/changing > changing.log 2>&1
status=$?
check "a token file gone bad mid-run fails the run with exit 1 (got $status)" test "$status" -eq 1
check "... naming the step and keeping the checkpoint" grep -q "failed: training step [0-9]*: .*token id 200 .*the last checkpoint is kept" changing.log
check "... and summary.json says failed, with the reason" /usr/bin/python3 -c "
import json; s = json.load(open('runs/changing/summary.json'))
assert s['status'] == 'failed' and 'token id 200' in s['error'], s"

# A token file truncated under a running job (rewritten in place, a full disk): the next read of its memory map
# past the new end raises SIGBUS, which ended the process with "Bus error" and no summary. The run now fails at
# that step, exit 1, naming the file and both sizes, with the checkpoint kept and summary.json saying why.
mkdir -p shrinking && cp shakespeare_char/train.bin shakespeare_char/val.bin shakespeare_char/meta.pkl shrinking/
timeout 300 "$POSLAB" train -c "$SRC/configs/examples/nanogpt-char.json" --set data.dir=shrinking "${SMALL[@]}" \
  --set train.max_iters=1000000 --set train.log_interval=1 --out runs/shrinking > shrinking.log 2>&1 &
pid=$!
for i in $(seq 600); do grep -q train_loss runs/shrinking/metrics.jsonl 2>/dev/null && break; sleep 0.1; done
truncate -s 4096 shrinking/train.bin
wait $pid
status=$?
check "a token file truncated mid-run fails the run with exit 1, not SIGBUS (got $status)" test "$status" -eq 1
check "... in one line naming the step, the file and both sizes, keeping the checkpoint" grep -q \
  "^poslab: failed: training step [0-9]*: data.dir .*shrinking/train.bin: the file was truncated while this process read it (4096 bytes now, [0-9]* when opened).*the last checkpoint is kept" shrinking.log
check "... and summary.json says failed, with the reason" /usr/bin/python3 -c "
import json; s = json.load(open('runs/shrinking/summary.json'))
assert s['status'] == 'failed' and 'truncated while' in s['error'], s"

# 6. SIGINT or SIGTERM while token files are written: exit 128 + the signal, nothing left behind (no
#    OUT.partial-PID). The text (~60 MB) takes seconds to encode; the signal goes once encoding has begun.
for i in $(seq 320); do cat "$TEXT"; done > big.txt
for sig in INT TERM; do
  "$POSLAB" tokenize --input big.txt --out tk-$sig --tokenizer bpe/tokenizer.model > tk-$sig.log 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do grep -q "encoded" tk-$sig.log && break; sleep 0.1; done
  kill -$sig $pid
  wait $pid
  status=$?
  want=$((128 + $(kill -l $sig)))
  check "tokenize: SIG$sig while encoding exits $want (got $status)" test "$status" -eq "$want"
  check "tokenize: SIG$sig leaves neither the output nor a partial directory" bash -c "! ls -d tk-$sig tk-$sig.partial-* 2>/dev/null"
  check "tokenize: SIG$sig says nothing was written" grep -q "interrupted (SIG$sig); nothing written to tk-$sig" tk-$sig.log
done
rm -f big.txt

# A passkey probe with the text haystack on token files or SentencePiece text: refused before any cell trains
# (it failed once every cell had trained), naming the key and the way out.
for data in '"kind": "tokens", "dir": "bpe"' "\"kind\": \"text\", \"path\": \"$TEXT\", \"tokenizer\": {\"model\": \"bpe/tokenizer.model\"}"; do
  echo '{}' > hsbase.json
  printf '{"name": "hs", "base": "hsbase.json", "set": {"data": {%s}, "model.n_layer": 1, "model.n_embd": 16, "model.n_head": 2, "model.block_size": 32,
   "train.max_iters": 1}, "grid": {"model.pos_encoding.kind": ["rope"]},
   "probes": {"passkey": {"lengths": [32], "trials": 2, "haystack": "text"}}}\n' "$data" > hs.json
  want="probes.passkey.haystack text: the run trains on data.kind tokens"
  case $data in *tokenizer*) want="probes.passkey.haystack text: a SentencePiece run takes the noise haystack";; esac
  expect_fail 2 "$want" -- "$POSLAB" compare -c hs.json --out hs
  check "... before any cell trained" test ! -e hs
done
finish
