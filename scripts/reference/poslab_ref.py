"""PyTorch reference twin of poslab's model (the llm.c-style oracle).

A readable nanoGPT-style GPT written from src/model/gpt.cpp and src/model/positional/*.cpp,
operation for operation, so that poslab's LibTorch forward and backward can be checked against
it (scripts/reference/check_parity.py) and so that a Python training run can be benchmarked
against poslab's (scripts/bench/train_twin.py).

Parameter names equal poslab's (see src/model/gpt.h), so a run's weights load directly:

    cfg = json.load(open("runs/x/config.json"))
    weights = load_weights("runs/x/model.pt")
    model = GPT(cfg, vocab_size=weights["wte.weight"].shape[0])
    model.load_state_dict(weights)

Every positional encoding is a small module with poslab's hooks (embed, rotate, bias, scores);
none of them registers buffers, so the state dict holds exactly poslab's parameters. They live in
poslab_ref_pe.py (formulas, additive, rotary, ALiBi) and poslab_ref_bias.py (T5, KERPLE, Sandwich,
FIRE, CoPE), and are re-exported here.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from poslab_ref_bias import *  # noqa: F401,F403  (T5, KERPLE, Sandwich, FIRE, CoPE)
from poslab_ref_pe import *  # noqa: F401,F403  (formulas, additive, rotary, ALiBi)

ENCODING_KINDS = ("none", "index", "binary", "sinusoidal", "learned", "rope", "alibi", "xpos", "t5", "kerple_log",
                  "kerple_power", "sandwich", "fire", "cope")

# poslab's defaults for the model section (src/config/config.h), used for keys a dict omits.
MODEL_DEFAULTS = {
    "n_layer": 2,
    "n_head": 4,
    "n_embd": 64,
    "block_size": 64,
    "dropout": 0.0,
    "bias": False,
    "pos_encoding": {"kind": "learned", "base": 10000.0, "scale": 0.0, "bits": 16, "signed": True,
                     "rotary_fraction": 1.0, "scale_base": 512.0, "num_buckets": 32, "max_distance": 128,
                     "mlp_width": 32, "init_c": 0.1, "init_L": 512.0, "npos": 64,
                     "randomize": {"max_position": 0, "eval": False}},
}


def default_additive_scale(kind, n_embd):
    """pos_encoding.scale 0 means: 1 for index, 1/sqrt(n_embd) for the fixed tables (positional.h)."""
    return 1.0 if kind == "index" else 1.0 / math.sqrt(n_embd)


def make_positional(pe, n_embd, n_head, block_size):
    kind = pe["kind"]
    scale = float(pe["scale"]) if float(pe["scale"]) > 0 else default_additive_scale(kind, n_embd)
    head = n_embd // n_head
    randomize = pe.get("randomize", {})
    max_position = int(randomize.get("max_position", 0))
    if kind == "none":
        out = NoEncoding()
    elif kind == "index":
        out = IndexEncoding(scale)
    elif kind == "binary":
        out = BinaryEncoding(n_embd, int(pe["bits"]), bool(pe["signed"]), scale)
    elif kind == "sinusoidal":
        out = SinusoidalEncoding(n_embd, float(pe["base"]), scale)
    elif kind == "learned":
        out = LearnedEncoding(max_position if max_position > 0 else block_size, n_embd)
    elif kind == "rope":
        out = RotaryEncoding(head, float(pe["base"]), rotary_dims(head, float(pe["rotary_fraction"])))
    elif kind == "xpos":
        out = XposEncoding(head, float(pe["base"]), float(pe["scale_base"]))
    elif kind == "alibi":
        out = AlibiEncoding(n_head)
    elif kind == "t5":
        out = T5Bias(n_head, n_embd, int(pe["num_buckets"]), int(pe["max_distance"]))
    elif kind in ("kerple_log", "kerple_power"):
        out = KerpleBias(kind, n_head)
    elif kind == "sandwich":
        out = SandwichBias(n_head, head, float(pe["base"]))
    elif kind == "fire":
        out = FireBias(n_head, int(pe["mlp_width"]), float(pe["init_c"]), float(pe["init_L"]))
    elif kind == "cope":
        out = CopeEncoding(head, int(pe["npos"]))
    else:
        raise ValueError(f"model.pos_encoding.kind: unknown encoding '{kind}'")
    out.randomize_max = max_position
    out.randomize_eval = bool(randomize.get("eval", False))
    return out


def positions(pe, T, training, device):
    """0..T-1, or (training, or eval with randomize.eval) T sorted distinct draws from [0, max_position)."""
    if pe.randomize_max > 0 and (training or pe.randomize_eval):
        draw = torch.randperm(pe.randomize_max, dtype=torch.long)[:T]
        return torch.sort(draw).values.to(device)
    return torch.arange(T, dtype=torch.long, device=device)


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
        scale = 1.0 / math.sqrt(k.size(-1))
        att = torch.matmul(q, k.transpose(-2, -1)) * scale  # (B, H, T, T)
        att = self.pos.scores(att, q, scale)  # CoPE; the identity for every other kind
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

    def attention_bias(self, positions, cacheable):
        """Causal mask (-inf above the diagonal) plus the encoding's bias: (T, T) or (H, T, T).
        Cached only for a constant bias at positions 0..T-1 (learned biases change every step)."""
        T, device = positions.size(0), positions.device
        c = self._bias_cache
        if cacheable and c is not None and c.size(-1) == T and c.device == device:
            return c
        mask = torch.full((T, T), float("-inf"), device=device).triu(diagonal=1)
        b = self.pos.bias(positions, positions)
        out = b + mask if b is not None else mask
        if cacheable:
            self._bias_cache = out
        return out

    def forward(self, idx, targets=None, positions_=None):
        """positions_: the (T,) positions poslab used (a fixture's, when randomized); else drawn here."""
        T = idx.size(1)
        self.pos.check_length(T)
        randomizes = self.pos.randomize_max > 0 and (self.training or self.pos.randomize_eval)
        if positions_ is None:
            positions_ = positions(self.pos, T, self.training, idx.device)
        x = self.drop(self.pos.embed(self.wte(idx), positions_))  # (B, T, C)
        attn_bias = self.attention_bias(positions_, not randomizes and self.pos.constant_bias)
        for block in self.h:
            x = block(x, positions_, attn_bias)
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


def load_weights(path):
    """A name -> tensor dict written by poslab (model.pt, fixture.pt) with torch::pickle_save.

    Its dicts carry LibTorch's type tags (the global torch.jit._pickle.restore_type_tag), which the
    weights-only loader of PyTorch >= 2.6 (torch.load's default there) refuses unless allowed; the
    tag only annotates a dict's key and value types, so it is allowed rather than loading with
    weights_only=False. Older PyTorch loads the file as it is."""
    if hasattr(torch.serialization, "add_safe_globals"):  # PyTorch >= 2.4
        from torch.jit import _pickle as jit_pickle
        torch.serialization.add_safe_globals([jit_pickle.restore_type_tag])
    return torch.load(path)


def load_run(run_dir, weights_file="model.pt"):
    """(model, config) from a poslab run or fixture directory (config.json + model.pt)."""
    import json
    import os
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    weights = load_weights(os.path.join(run_dir, weights_file))
    return GPT.from_weights(config, weights), config
