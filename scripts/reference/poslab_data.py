"""Python twin of poslab's config loading and data pipeline (src/config, src/data).

- load_config(path, overrides): built-in defaults <- "extends" chain <- file <- --set overrides,
  with poslab's strict merge (unknown keys and wrong types are errors).
- Rng: SplitMix64, bit-for-bit src/data/rng.h, so the same seed gives the same tokens.
- make_example / TaskCorpus: src/data/tasks.cpp and corpus.cpp (right padding, answer-only targets;
  mqar's answers at the query keys' own positions).
- TextCorpus: char-level vocabulary (sorted unique code points), 90/10 split, random windows.

Needs torch only for the batch tensors.
"""
import copy
import json
import os

import torch

MASK64 = (1 << 64) - 1
UINT64_MAX = MASK64

# src/config/config.h: MqarConfig (data.mqar).
MQAR_DEFAULTS = {"queries": 0, "gaps": "power", "power_a": 0.01, "space": 2}

# src/config/config.cpp: config_to_json(Config{}) -- the schema every file is checked against.
DEFAULTS = {
    "seed": 1337,
    "device": "auto",
    "data": {"kind": "task", "task": "copy", "path": "", "min_len": 1, "max_len": 16, "symbols": 16,
             "val_fraction": 0.1, "mqar": dict(MQAR_DEFAULTS)},
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 64, "dropout": 0.0, "bias": False,
              "pos_encoding": {"kind": "learned", "base": 10000.0, "scale": 0.0, "bits": 16, "signed": True}},
    "train": {"max_iters": 2000, "batch_size": 32, "learning_rate": 1e-3, "min_lr": 1e-4, "warmup_iters": 100,
              "lr_decay_iters": 0, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99, "grad_clip": 1.0,
              "eval_interval": 250, "checkpoint_interval": 0, "eval_iters": 20, "log_interval": 50, "precision": "auto", "threads": 0},
    "eval": {"lengths": [], "batches": 4, "batch_size": 32, "stride": 0, "tokens": 0},
}


class ConfigError(ValueError):
    pass


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------

def _same_type(expected, value):
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(expected, bool) and isinstance(value, bool)
    if isinstance(expected, float):
        return isinstance(value, (int, float))
    if isinstance(expected, int):
        return isinstance(value, int)
    if isinstance(expected, list):
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    return type(expected) is type(value)


def merge_config(base, patch, where, prefix=""):
    """Strict merge of `patch` into `base`, as poslab's merge_at."""
    if not isinstance(patch, dict):
        raise ConfigError(f"{where}: {prefix or 'the config'} must be an object")
    for key, value in patch.items():
        path = f"{prefix}.{key}" if prefix else key
        if key not in base:
            raise ConfigError(f"{where}: unknown key '{path}' (allowed here: {', '.join(base)})")
        if isinstance(base[key], dict):
            merge_config(base[key], value, where, path)
        else:
            if not _same_type(base[key], value):
                raise ConfigError(f"{where}: {path} has the wrong type: {json.dumps(value)}")
            base[key] = float(value) if isinstance(base[key], float) else value


def _load_layers(path, seen):
    canonical = os.path.realpath(path)
    if canonical in seen:
        raise ConfigError(f'{path}: "extends" forms a cycle')
    seen.add(canonical)
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a JSON object")
    merged = copy.deepcopy(DEFAULTS)
    if "extends" in data:
        parent = data.pop("extends")
        if not isinstance(parent, str):
            raise ConfigError(f"{path}: extends must be a string (a config path)")
        if not os.path.isabs(parent):
            parent = os.path.join(os.path.dirname(path), parent)
        merged = _load_layers(parent, seen)
    # A data file named in a config is found relative to that config (as poslab); --set paths are not.
    d = data.get("data")
    if isinstance(d, dict) and isinstance(d.get("path"), str) and d["path"] and not os.path.isabs(d["path"]):
        d["path"] = os.path.normpath(os.path.join(os.path.dirname(path), d["path"]))
    merge_config(merged, data, path)
    return merged


def apply_overrides(config, overrides):
    """"a.b.c=value": the value parsed as JSON, else taken as a string (kind=rope)."""
    for item in overrides or []:
        if "=" not in item or item.startswith("="):
            raise ConfigError(f"--set {item}: expected key.path=value")
        path, text = item.split("=", 1)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        patch = value
        for key in reversed(path.split(".")):
            patch = {key: patch}
        merge_config(config, patch, f"--set {path}")


def load_config(path, overrides=None):
    config = _load_layers(path, set())
    apply_overrides(config, overrides)
    return config


# ---------------------------------------------------------------------------------------------
# Rng (src/data/rng.h)
# ---------------------------------------------------------------------------------------------

class Rng:
    """SplitMix64 with rejection sampling, bit-for-bit poslab::Rng."""

    def __init__(self, seed=0):
        self.state = ((seed & MASK64) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        """Uniform integer in [0, n), n > 0."""
        limit = UINT64_MAX - UINT64_MAX % n
        r = self.next()
        while r >= limit:
            r = self.next()
        return r % n

    def between(self, lo, hi):
        return lo + self.below(hi - lo + 1)  # inclusive


# ---------------------------------------------------------------------------------------------
# Tasks (src/data/tasks.cpp)
# ---------------------------------------------------------------------------------------------

TASK_ALPHABET = "_|.?+#0123456789abcdefghijklmnopqrstuvwxyz()[]"
TASK_NAMES = ("copy", "reverse", "sort", "addition", "associative_recall", "parity", "counting", "dyck", "mqar")


def _letter(symbols, rng):
    return chr(ord("a") + rng.below(symbols))


def _digit(rng):
    return chr(ord("0") + rng.below(10))


def _question_answer(question, answer):
    return question + "|" + answer + ".", len(question) + 1


def _uniform01(rng):
    """A double in [0, 1) from the top 53 bits (as tasks.cpp)."""
    return (rng.next() >> 11) * 2.0 ** -53


def make_mqar_example(pairs, slots, symbols, mqar, rng):
    """Multi-query associative recall (Zoology's multiquery_ar): (text, score_from, targets), targets a
    list of (position, value) -- the value is the target at the query key's own position."""
    queries = pairs if mqar["queries"] == 0 else min(mqar["queries"], pairs)
    keys = [chr(ord("a") + i) for i in range(symbols)]
    for i in range(pairs):  # distinct keys: a partial Fisher-Yates shuffle
        j = i + rng.below(symbols - i)
        keys[i], keys[j] = keys[j], keys[i]
    keys = keys[:pairs]
    values = [_digit(rng) for _ in range(pairs)]
    text = "".join(k + v for k, v in zip(keys, values)) + "|"
    region = len(text)
    asked = list(range(pairs))
    for i in range(queries):
        j = i + rng.below(pairs - i)
        asked[i], asked[j] = asked[j], asked[i]
    # Zoology: p ~ (i+1)^(a-1) over the slots, drawn without replacement (renormalised each draw).
    weight = [float(i + 1) ** (mqar["power_a"] - 1.0) if mqar["gaps"] == "power" else 1.0 for i in range(slots)]
    query = ["#"] * slots
    targets = []
    for q in range(queries):
        total = 0.0
        for w in weight:
            total += w
        r = _uniform01(rng) * total
        slot = -1
        for i, w in enumerate(weight):
            if w == 0:
                continue
            slot = i
            if r < w:
                break
            r -= w
        weight[slot] = 0.0
        query[slot] = keys[asked[q]]
        targets.append((region + slot, values[asked[q]]))
    text = text + "".join(query) + "."
    return text, len(text), sorted(targets)


def make_example(task, n, symbols, rng, mqar=None):
    """(text, score_from) -- for mqar (text, score_from, targets) -- one example with n items."""
    if task == "mqar":
        m = dict(MQAR_DEFAULTS, **(mqar or {}))
        return make_mqar_example(n, m["space"] * n, symbols, m, rng)
    if task in ("copy", "reverse", "sort"):
        s = "".join(_letter(symbols, rng) for _ in range(n))
        answer = s[::-1] if task == "reverse" else "".join(sorted(s)) if task == "sort" else s
        return _question_answer(s, answer)
    if task == "addition":
        def number():
            out = ""
            for i in range(n):
                out += chr(ord("1") + rng.below(9)) if (i == 0 and n > 1) else _digit(rng)
            return out
        a = number()
        b = number()
        return _question_answer(a + "+" + b, str(int(a) + int(b)))
    if task == "associative_recall":
        pairs = ""
        for _ in range(n):
            pairs += _letter(symbols, rng)
            pairs += _digit(rng)
        key = pairs[2 * rng.below(n)]
        value = ""
        for i in range(n):
            if pairs[2 * i] == key:
                value = pairs[2 * i + 1]
        return _question_answer(pairs + "?" + key, value)
    if task == "parity":
        bits = "".join(chr(ord("0") + rng.below(2)) for _ in range(n))
        return _question_answer(bits, "1" if bits.count("1") % 2 else "0")
    if task == "counting":
        start = rng.below(10)
        answer = "".join(chr(ord("0") + (start + i) % 10) for i in range(n))
        return _question_answer(chr(ord("0") + start) + "#" * n, answer)
    if task == "dyck":
        s, stack, opens_left = "", [], n
        while opens_left > 0 or stack:
            # C++ evaluates `opens_left > 0 && (stack.empty() || rng.below(2) == 0)` with short-circuit.
            is_open = opens_left > 0 and (not stack or rng.below(2) == 0)
            if is_open:
                c = "(" if rng.below(2) else "["
                s += c
                stack.append(c)
                opens_left -= 1
            else:
                s += ")" if stack.pop() == "(" else "]"
        return s + ".", 1
    raise ConfigError(f"data.task: unknown task '{task}'")


def task_tokens(task, n, mqar=None):
    """Characters in an example of n items (the longest, for addition)."""
    if task == "mqar":
        return 2 * n + 1 + MQAR_DEFAULTS["space"] * n + 1 if mqar is None else 2 * n + 1 + mqar["space"] * n + 1
    return {"copy": 2 * n + 2, "reverse": 2 * n + 2, "sort": 2 * n + 2, "addition": (2 * n + 1) + 1 + (n + 1) + 1,
            "associative_recall": 2 * n + 5, "parity": n + 3, "counting": 2 * n + 3, "dyck": 2 * n + 1}[task]


# ---------------------------------------------------------------------------------------------
# Corpora (src/data/corpus.cpp)
# ---------------------------------------------------------------------------------------------

class TaskCorpus:
    is_task = True

    def __init__(self, data):
        self.config = data
        self.symbols = list(TASK_ALPHABET)
        self.index = {c: i for i, c in enumerate(self.symbols)}
        self.vocab_size = len(self.symbols)

    def collate(self, examples):
        T = max(len(e[0]) - 1 for e in examples)
        B = len(examples)
        pad = self.index["_"]
        x = [[pad] * T for _ in range(B)]
        y = [[-1] * T for _ in range(B)]
        for b, (text, score_from, *targets) in enumerate(examples):
            for t in range(len(text) - 1):  # right padding: causal attention keeps pads out
                x[b][t] = self.index[text[t]]
                if not targets and t + 1 >= score_from:
                    y[b][t] = self.index[text[t + 1]]
            for pos, value in (targets[0] if targets else []):  # mqar: the answers alone
                y[b][pos] = self.index[value]
        return torch.tensor(x, dtype=torch.long), torch.tensor(y, dtype=torch.long)

    def batch(self, split, batch_size, rng):
        """(x, y) from the training distribution; `split` does not change task batches."""
        d = self.config
        examples = []
        for _ in range(batch_size):
            n = rng.between(d["min_len"], d["max_len"])
            examples.append(make_example(d["task"], n, d["symbols"], rng, d.get("mqar")))
        return self.collate(examples)

    def batch_at_length(self, n, batch_size, rng):
        d = self.config
        return self.collate([make_example(d["task"], n, d["symbols"], rng, d.get("mqar")) for _ in range(batch_size)])


class TextCorpus:
    is_task = False

    def __init__(self, data, block_size):
        with open(data["path"], "rb") as f:
            text = f.read().decode("utf-8")  # strict, and no newline translation
        if not text:
            raise ConfigError(f"data.path {data['path']}: the file is empty")
        # std::set<std::string> of UTF-8 code points sorts bytewise == code point order.
        self.symbols = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.symbols)}
        self.vocab_size = len(self.symbols)
        self.block_size = block_size
        ids = torch.tensor([self.index[c] for c in text], dtype=torch.long)
        n = ids.numel()
        n_val = int(n * data["val_fraction"])
        if n - n_val < block_size + 1 or n_val < block_size + 1:
            raise ConfigError(f"data.path {data['path']}: {n} characters is too short")
        self.train = ids[: n - n_val]
        self.val = ids[n - n_val:]

    def batch(self, split, batch_size, rng):
        data = self.train if split == "train" else self.val
        T = self.block_size
        starts = torch.tensor([rng.below(data.size(0) - T) for _ in range(batch_size)], dtype=torch.long)
        idx = starts.unsqueeze(1) + torch.arange(T + 1, dtype=torch.long)  # (B, T+1)
        windows = data[idx]
        return windows[:, :T].contiguous(), windows[:, 1:].contiguous()


def make_corpus(config):
    d = config["data"]
    if d["kind"] == "task":
        corpus = TaskCorpus(d)
        need = task_tokens(d["task"], d["max_len"], d.get("mqar")) - 1
        if need > config["model"]["block_size"]:
            raise ConfigError(f"data.max_len: {d['task']} with {d['max_len']} items needs {need} input tokens, "
                              f"but model.block_size is {config['model']['block_size']}")
        return corpus
    return TextCorpus(d, config["model"]["block_size"])


def val_seed(config):
    """The validation stream's seed (src/train/step.cpp: val_seed)."""
    return (config["seed"] & MASK64) ^ 0x5EEDFACE
