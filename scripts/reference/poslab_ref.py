"""PyTorch reference twin of poslab's model (the llm.c-style oracle).

A readable nanoGPT-style GPT written from src/model/gpt.cpp and src/model/positional/*.cpp,
operation for operation, so that poslab's LibTorch forward and backward can be checked against
it (scripts/reference/check_parity.py) and so that a Python training run can be benchmarked
against poslab's (scripts/bench/train_twin.py).

Parameter names equal poslab's (see src/model/gpt.h), so a run's weights load directly:

    cfg = json.load(open("runs/x/config.json"))
    weights = torch.load("runs/x/model.pt")
    model = GPT(cfg, vocab_size=weights["wte.weight"].shape[0])
    model.load_state_dict(weights)

Every positional encoding is a small module with poslab's three hooks (embed, rotate, bias);
none of them registers buffers, so the state dict holds exactly poslab's parameters.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ENCODING_KINDS = ("none", "index", "binary", "sinusoidal", "learned", "rope", "alibi")

# poslab's defaults for the model section (src/config/config.h), used for keys a dict omits.
MODEL_DEFAULTS = {
    "n_layer": 2,
    "n_head": 4,
    "n_embd": 64,
    "block_size": 64,
    "dropout": 0.0,
    "bias": False,
    "pos_encoding": {"kind": "learned", "base": 10000.0, "scale": 0.0, "bits": 16, "signed": True},
}


class PositionLimitError(RuntimeError):
    """A sequence longer than the encoding can represent (the learned table)."""


# ---------------------------------------------------------------------------------------------
# The encodings' formulas (src/model/positional/*.cpp)
# ---------------------------------------------------------------------------------------------

def sinusoidal_table(n, d, base):
    """(n, d): PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(...); float64, then float32."""
    pos = torch.arange(n, dtype=torch.float64).unsqueeze(1)                       # (n, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)                             # (d/2,)
    angle = pos / torch.pow(torch.tensor(base, dtype=torch.float64), two_i / float(d))  # (n, d/2)
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=2).reshape(n, d).to(torch.float32)


def binary_table(n, d, bits, signed_bits):
    """(n, d): the low `bits` components hold the bits of p, LSB first, as +-1 or 0/1; rest zero."""
    pos = torch.arange(n, dtype=torch.long).unsqueeze(1)                           # (n, 1)
    bit = torch.bitwise_and(torch.bitwise_right_shift(pos, torch.arange(bits, dtype=torch.long)), 1)
    bit = bit.to(torch.float32)                                                    # (n, bits)
    if signed_bits:
        bit = bit * 2 - 1
    table = torch.zeros(n, d)
    table[:, :bits] = bit
    return table


def rope_angles(n, head_dim, base):
    """(n, hs/2) float64: p * theta_i, theta_i = base^(-2i/hs)."""
    theta = torch.pow(torch.tensor(base, dtype=torch.float64),
                      -torch.arange(0, head_dim, 2, dtype=torch.float64) / float(head_dim))
    return torch.outer(torch.arange(n, dtype=torch.float64), theta)


def apply_rotary(x, cos, sin):
    """Rotates interleaved pairs (x[2i], x[2i+1]) of x (..., T, hs) by angles with cos/sin (T, hs/2)."""
    pairs = x.unflatten(-1, (-1, 2))                                               # (..., T, hs/2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return torch.stack([r0, r1], dim=-1).flatten(-2).to(x.dtype)                   # (..., T, hs)


def _power_of_two_slopes(n):
    start = math.pow(2.0, -8.0 / n)
    return [math.pow(start, float(i + 1)) for i in range(n)]


def alibi_slopes(n_head):
    """Press et al. 2022 head slopes; for a non-power-of-two count, the closest power's slopes
    followed by every other slope of the next power (as the authors' reference code)."""
    closest = 1 << int(math.floor(math.log2(n_head)))
    if closest == n_head:
        return _power_of_two_slopes(n_head)
    out = _power_of_two_slopes(closest)
    nxt = alibi_slopes(2 * closest)
    out += nxt[0::2][: n_head - closest]
    return out


def alibi_bias(slopes, t_q, t_k):
    """(H, t_q, t_k) float32: -m_h * (i - j); queries are the last t_q of t_k positions."""
    i = torch.arange(t_k - t_q, t_k, dtype=torch.float32).view(-1, 1)
    j = torch.arange(t_k, dtype=torch.float32).view(1, -1)
    m = torch.tensor(slopes, dtype=torch.float64).to(torch.float32).view(-1, 1, 1)
    return -m * (i - j).unsqueeze(0)


# ---------------------------------------------------------------------------------------------
# Encodings: embed (additive), rotate (rotary), bias (attention bias). Defaults are no-ops.
# ---------------------------------------------------------------------------------------------

class PositionalEncoding(nn.Module):
    family = "none"
    max_positions = -1  # -1: unbounded

    def embed(self, x, positions):
        return x

    def rotate(self, q, k, positions):
        return q, k

    def bias(self, t_q, t_k, device):
        return None

    def check_length(self, length):
        if self.max_positions >= 0 and length > self.max_positions:
            raise PositionLimitError(f"{self.kind} table has {self.max_positions} positions")


class NoEncoding(PositionalEncoding):
    kind = "none"


class IndexEncoding(PositionalEncoding):
    """x + scale * p on every component (a pre-LayerNorm block subtracts it again)."""
    kind, family = "index", "additive"

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def embed(self, x, positions):
        offset = (positions.to(x.dtype) * self.scale).view(1, -1, 1)  # (1, T, 1)
        return x + offset


class TableEncoding(PositionalEncoding):
    """A fixed table from a formula, cached as a plain attribute (not a buffer: the state dict
    must hold only poslab's parameters)."""
    family = "additive"

    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self._cache = None

    def make_table(self, rows):
        raise NotImplementedError

    def embed(self, x, positions):
        needed = int(positions.max().item()) + 1 if positions.numel() else 0
        if self._cache is None or self._cache.size(0) < needed or self._cache.device != x.device:
            self._cache = (self.make_table(needed) * self.scale).to(x.device)
        return x + self._cache.index_select(0, positions).unsqueeze(0).to(x.dtype)  # (1, T, C)


class SinusoidalEncoding(TableEncoding):
    kind = "sinusoidal"

    def __init__(self, n_embd, base, scale):
        super().__init__(scale)
        self.n_embd, self.base = n_embd, base

    def make_table(self, rows):
        return sinusoidal_table(rows, self.n_embd, self.base)


class BinaryEncoding(TableEncoding):
    kind = "binary"

    def __init__(self, n_embd, bits, signed_bits, scale):
        super().__init__(scale)
        self.n_embd, self.bits, self.signed_bits = n_embd, bits, signed_bits

    def make_table(self, rows):
        return binary_table(rows, self.n_embd, self.bits, self.signed_bits)


class LearnedEncoding(PositionalEncoding):
    kind, family = "learned", "additive"

    def __init__(self, block_size, n_embd):
        super().__init__()
        # randn * 0.02 at construction, as poslab (this consumes the RNG in the same place).
        self.weight = nn.Parameter(torch.randn(block_size, n_embd) * 0.02)

    @property
    def max_positions(self):
        return self.weight.size(0)

    def embed(self, x, positions):
        return x + self.weight.index_select(0, positions).unsqueeze(0)


class RotaryEncoding(PositionalEncoding):
    kind, family = "rope", "rotary"

    def __init__(self, head_dim, base):
        super().__init__()
        self.head_dim, self.base = head_dim, base
        self._cos = self._sin = None

    def rotate(self, q, k, positions):
        needed = int(positions.max().item()) + 1 if positions.numel() else 0
        if self._cos is None or self._cos.size(0) < needed or self._cos.device != q.device:
            angles = rope_angles(needed, self.head_dim, self.base)  # float64: exact at long p
            self._cos = angles.cos().to(torch.float32).to(q.device)
            self._sin = angles.sin().to(torch.float32).to(q.device)
        cos, sin = self._cos.index_select(0, positions), self._sin.index_select(0, positions)
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)


class AlibiEncoding(PositionalEncoding):
    kind, family = "alibi", "bias"

    def __init__(self, n_head):
        super().__init__()
        self.slopes = alibi_slopes(n_head)

    def bias(self, t_q, t_k, device):
        return alibi_bias(self.slopes, t_q, t_k).to(device)


def default_additive_scale(kind, n_embd):
    """pos_encoding.scale 0 means: 1 for index, 1/sqrt(n_embd) for the fixed tables (positional.h)."""
    return 1.0 if kind == "index" else 1.0 / math.sqrt(n_embd)


def make_positional(pe, n_embd, n_head, block_size):
    kind = pe["kind"]
    scale = float(pe["scale"]) if float(pe["scale"]) > 0 else default_additive_scale(kind, n_embd)
    if kind == "none":
        return NoEncoding()
    if kind == "index":
        return IndexEncoding(scale)
    if kind == "binary":
        return BinaryEncoding(n_embd, int(pe["bits"]), bool(pe["signed"]), scale)
    if kind == "sinusoidal":
        return SinusoidalEncoding(n_embd, float(pe["base"]), scale)
    if kind == "learned":
        return LearnedEncoding(block_size, n_embd)
    if kind == "rope":
        return RotaryEncoding(n_embd // n_head, float(pe["base"]))
    if kind == "alibi":
        return AlibiEncoding(n_head)
    raise ValueError(f"model.pos_encoding.kind: unknown encoding '{kind}'")


# ---------------------------------------------------------------------------------------------
# The transformer (src/model/gpt.cpp)
# ---------------------------------------------------------------------------------------------

class LayerNorm(nn.Module):
    """LayerNorm with an optional bias, eps 1e-5."""

    def __init__(self, n_embd, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n_embd))
        self.bias = nn.Parameter(torch.zeros(n_embd)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, pos):
        super().__init__()
        C = cfg["n_embd"]
        self.c_attn = nn.Linear(C, 3 * C, bias=cfg["bias"])
        self.c_proj = nn.Linear(C, C, bias=cfg["bias"])
        self.resid_dropout = nn.Dropout(cfg["dropout"])
        self.n_head = cfg["n_head"]
        self.dropout = cfg["dropout"]
        # Shared with the model; kept out of this module's children so "pos." is registered once.
        self.__dict__["pos"] = pos

    def forward(self, x, positions, attn_bias):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, H, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        q, k = self.pos.rotate(q, k, positions)
        # Manual attention, as poslab's LibTorch 1.x branch: scale by the reciprocal of sqrt(hs).
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, H, T, T)
        att = torch.softmax(att + attn_bias, dim=-1)
        if self.training and self.dropout > 0:
            att = F.dropout(att, p=self.dropout, training=True)
        y = torch.matmul(att.to(v.dtype), v)  # (B, H, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["n_embd"]
        self.c_fc = nn.Linear(C, 4 * C, bias=cfg["bias"])
        self.c_proj = nn.Linear(4 * C, C, bias=cfg["bias"])
        self.dropout = nn.Dropout(cfg["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, cfg, pos):
        super().__init__()
        self.ln_1 = LayerNorm(cfg["n_embd"], cfg["bias"])
        self.attn = CausalSelfAttention(cfg, pos)
        self.ln_2 = LayerNorm(cfg["n_embd"], cfg["bias"])
        self.mlp = MLP(cfg)

    def forward(self, x, positions, attn_bias):
        h = x + self.attn(self.ln_1(x), positions, attn_bias)
        return h + self.mlp(self.ln_2(h))


def model_config(config):
    """The model section with poslab's defaults filled in; accepts a full config or its "model"."""
    m = config.get("model", config)
    out = dict(MODEL_DEFAULTS)
    out.update({k: v for k, v in m.items() if k != "pos_encoding"})
    out["pos_encoding"] = dict(MODEL_DEFAULTS["pos_encoding"], **m.get("pos_encoding", {}))
    return out


class GPT(nn.Module):
    """poslab's GPT. `config`: a resolved poslab config (or its "model" section); vocab_size is not
    a config key: pass it, or build with GPT.from_weights / load_run."""

    def __init__(self, config, vocab_size=None):
        super().__init__()
        cfg = model_config(config)
        if vocab_size is None:
            vocab_size = cfg.get("vocab_size")
        if not vocab_size:
            raise ValueError("vocab_size is not in poslab's config: pass it (wte.weight.shape[0])")
        cfg["vocab_size"] = int(vocab_size)
        self.config = cfg
        # Construction order equals poslab's, so with the same torch.manual_seed the initial
        # weights come out the same (same ATen RNG, same calls in the same order).
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.pos = make_positional(cfg["pos_encoding"], cfg["n_embd"], cfg["n_head"], cfg["block_size"])
        self.drop = nn.Dropout(cfg["dropout"])
        self.h = nn.ModuleList([Block(cfg, self.pos) for _ in range(cfg["n_layer"])])
        self.ln_f = LayerNorm(cfg["n_embd"], cfg["bias"])
        self._bias_cache = None

        # nanoGPT's init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2*n_layer)), zero biases.
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.startswith("pos."):
                    continue  # the encoding initialises its own parameters
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2.0 * cfg["n_layer"]) if name.endswith("c_proj.weight") else 0.02
                    p.normal_(0.0, std)
                elif name.endswith("bias"):
                    p.zero_()

    @classmethod
    def from_weights(cls, config, weights):
        model = cls(config, vocab_size=weights["wte.weight"].shape[0])
        model.load_state_dict(weights)
        return model

    def attention_bias(self, T, device):
        """Causal mask (-inf above the diagonal) plus the encoding's bias: (T, T) or (H, T, T)."""
        c = self._bias_cache
        if c is None or c.size(-1) != T or c.device != device:
            mask = torch.full((T, T), float("-inf"), device=device).triu(diagonal=1)
            b = self.pos.bias(T, T, device)
            self._bias_cache = b + mask if b is not None else mask
        return self._bias_cache

    def forward(self, idx, targets=None):
        T = idx.size(1)
        self.pos.check_length(T)
        positions = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.drop(self.pos.embed(self.wte(idx), positions))  # (B, T, C)
        attn_bias = self.attention_bias(T, idx.device)
        for block in self.h:
            x = block(x, positions, attn_bias)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)  # (B, T, vocab), head tied to the token embedding
        if targets is None:
            return logits
        return logits, self.loss(logits, targets)

    @staticmethod
    def loss(logits, targets):
        """Mean cross-entropy over targets != -1."""
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=-1)

    def decays(self, name, p):
        """Weight decay on matrices of Linear layers: not biases, norms or embeddings."""
        return p.dim() >= 2 and not name.startswith("wte.") and not name.startswith("pos.")

    def num_params(self):
        return sum(p.numel() for p in self.parameters())


def load_run(run_dir, weights_file="model.pt"):
    """(model, config) from a poslab run or fixture directory (config.json + model.pt)."""
    import json
    import os
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    weights = torch.load(os.path.join(run_dir, weights_file))
    return GPT.from_weights(config, weights), config
