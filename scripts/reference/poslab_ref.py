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

Every positional encoding is a small module with poslab's hooks (embed, rotate, bias, scores);
none of them registers buffers, so the state dict holds exactly poslab's parameters.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

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


def relative_distance(q_pos, k_pos):
    """(t_q, t_k) float32: q_pos[i] - k_pos[j]."""
    return (q_pos.view(-1, 1) - k_pos.view(1, -1)).to(torch.float32)


def alibi_bias(slopes, q_pos, k_pos):
    """(H, t_q, t_k) float32: -m_h * (q_pos[i] - k_pos[j])."""
    m = torch.tensor(slopes, dtype=torch.float64).to(torch.float32).to(q_pos.device).view(-1, 1, 1)
    return -m * relative_distance(q_pos, k_pos).unsqueeze(0)


def rotary_dims(head_dim, fraction):
    """Dims of a head that rope rotates: floor(head * fraction), rounded down to even."""
    return int(head_dim * fraction) // 2 * 2


# ---------------------------------------------------------------------------------------------
# Encodings: embed (additive), rotate (rotary), bias (attention bias). Defaults are no-ops.
# ---------------------------------------------------------------------------------------------

class PositionalEncoding(nn.Module):
    family = "none"
    max_positions = -1  # -1: unbounded
    constant_bias = True
    needs_scores = False

    def embed(self, x, positions):
        return x

    def rotate(self, q, k, positions):
        return q, k

    def bias(self, q_pos, k_pos):
        return None

    def scores(self, att, q, scale):
        return att

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

    def __init__(self, head_dim, base, rot_dims):
        super().__init__()
        self.head_dim, self.base, self.rot_dims = head_dim, base, rot_dims
        self._cos = self._sin = None

    def cos_sin(self, positions, device):
        needed = int(positions.max().item()) + 1 if positions.numel() else 0
        if self._cos is None or self._cos.size(0) < needed or self._cos.device != device:
            angles = rope_angles(needed, self.rot_dims, self.base)  # float64: exact at long p
            self._cos = angles.cos().to(torch.float32).to(device)
            self._sin = angles.sin().to(torch.float32).to(device)
        return self._cos.index_select(0, positions), self._sin.index_select(0, positions)

    def rotate_part(self, x, cos, sin):
        """The first rot_dims dims rotated (GPT-NeoX rotary_pct), the rest passed through."""
        if self.rot_dims == self.head_dim:
            return apply_rotary(x, cos, sin)
        return torch.cat([apply_rotary(x[..., :self.rot_dims], cos, sin), x[..., self.rot_dims:]], dim=-1)

    def rotate(self, q, k, positions):
        cos, sin = self.cos_sin(positions, q.device)
        return self.rotate_part(q, cos, sin), self.rotate_part(k, cos, sin)


def xpos_zeta(head_dim):
    """(hs/2,) float64: zeta_k = (2k + 0.4 hs) / (1.4 hs) (torchscale XPOS)."""
    return (torch.arange(0, head_dim // 2, dtype=torch.float64) * 2 + 0.4 * head_dim) / (1.4 * head_dim)


class XposEncoding(RotaryEncoding):
    """RoPE(q)_n * zeta^(n/gamma), RoPE(k)_m * zeta^(-m/gamma), positions centred as torchscale."""
    kind = "xpos"

    def __init__(self, head_dim, base, scale_base):
        super().__init__(head_dim, base, head_dim)
        self.scale_base = scale_base

    def rotate(self, q, k, positions):
        cos, sin = self.cos_sin(positions, q.device)
        length = int(positions.max().item()) + 1 if positions.numel() else 0
        centred = positions - (length + 1) // 2
        up = torch.pow(xpos_zeta(self.head_dim).view(1, -1), centred.to(torch.float64).cpu().view(-1, 1) / self.scale_base)
        s_q, s_k = up.to(torch.float32).to(q.device), up.reciprocal().to(torch.float32).to(q.device)
        return apply_rotary(q, cos * s_q, sin * s_q), apply_rotary(k, cos * s_k, sin * s_k)


class AlibiEncoding(PositionalEncoding):
    kind, family = "alibi", "bias"

    def __init__(self, n_head):
        super().__init__()
        self.slopes = alibi_slopes(n_head)

    def bias(self, q_pos, k_pos):
        return alibi_bias(self.slopes, q_pos, k_pos)


def causal_distance(q_pos, k_pos):
    return relative_distance(q_pos, k_pos).clamp_min(0)


def t5_bucket(distance, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket(-distance, bidirectional=False)."""
    n = distance.to(torch.long).clamp_min(0)
    max_exact = num_buckets // 2
    large = max_exact + (torch.log(n.clamp_min(max_exact).float() / max_exact)
                         / math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
    large = large.clamp_max(num_buckets - 1)
    return torch.where(n < max_exact, n, large)


class T5Bias(PositionalEncoding):
    kind, family, constant_bias = "t5", "bias", False

    def __init__(self, n_head, n_embd, num_buckets, max_distance):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.weight = nn.Parameter(torch.randn(num_buckets, n_head) / math.sqrt(n_embd))

    def bias(self, q_pos, k_pos):
        bucket = t5_bucket(relative_distance(q_pos, k_pos), self.num_buckets, self.max_distance)
        return F.embedding(bucket, self.weight).permute(2, 0, 1)  # (H, t_q, t_k)


class KerpleBias(PositionalEncoding):
    """log: -r1 log(1 + r2 d); power: -r1 d^r2; parameters clamped in place (chijames/KERPLE)."""
    family, constant_bias = "bias", False

    def __init__(self, kind, n_head):
        super().__init__()
        self.kind = kind
        p, a = torch.rand(n_head, 1, 1) * 2, torch.rand(n_head, 1, 1)
        power = kind == "kerple_power"
        self.r1 = nn.Parameter(a if power else p)
        self.r2 = nn.Parameter(p if power else a)

    def bias(self, q_pos, k_pos):
        power = self.kind == "kerple_power"
        with torch.no_grad():
            self.r1.clamp_(min=1e-2)
            self.r2.clamp_(min=1e-2, max=2.0 if power else None)
        d = causal_distance(q_pos, k_pos).unsqueeze(0)
        return -self.r1 * torch.pow(d, self.r2) if power else -self.r1 * torch.log1p(self.r2 * d)


class SandwichBias(PositionalEncoding):
    """NeMo SandwichRelativePositionEmbedding: (sum_{k=1..D/2} cos(n base^(-2k/D)) - D/2) / (h 8 / H)."""
    kind, family = "sandwich", "bias"

    def __init__(self, n_head, head_dim, base):
        super().__init__()
        self.n_head, self.head_dim, self.base = n_head, head_dim, base

    def bias(self, q_pos, k_pos):
        d = causal_distance(q_pos, k_pos)
        k = torch.arange(1, self.head_dim // 2 + 1, dtype=torch.float64)
        inv_freq = torch.pow(torch.tensor(self.base, dtype=torch.float64), -2.0 * k / self.head_dim).to(d.device)
        num = (d.to(torch.float64).unsqueeze(-1) * inv_freq).cos().sum(-1) - float(self.head_dim // 2)
        h = torch.arange(1, self.n_head + 1, dtype=torch.float64, device=d.device).view(-1, 1, 1)
        return (num.unsqueeze(0) / (h * 8.0 / self.n_head)).to(torch.float32)


class FireBias(PositionalEncoding):
    """mcleish7/arithmetic FIRE: MLP(log(|c rel| + 1) / (log(|c max(i, L)| + 1) + 1e-6)), L = |L_multiplier init_L|."""
    kind, family, constant_bias = "fire", "bias", False

    def __init__(self, n_head, mlp_width, init_c, init_L):
        super().__init__()
        self.mlp_in = nn.Linear(1, mlp_width)
        self.mlp_out = nn.Linear(mlp_width, n_head)
        self.c = nn.Parameter(torch.tensor(init_c, dtype=torch.float32))
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))
        self.init_L = init_L

    def bias(self, q_pos, k_pos):
        L = torch.abs(self.L_multiplier * self.init_L)
        num = torch.log(torch.abs(self.c * causal_distance(q_pos, k_pos)) + 1)
        den = torch.log(torch.abs(self.c * torch.maximum(q_pos.to(torch.float32).view(-1, 1), L)) + 1)
        x = num / (den + 1e-6)
        return self.mlp_out(torch.relu(self.mlp_in(x.unsqueeze(-1)))).permute(2, 0, 1)


class CopeEncoding(PositionalEncoding):
    """facebookresearch/RAM ContextPosSelfAttn: logits (q.k + q.e[p]) / sqrt(hs)."""
    kind, family, needs_scores = "cope", "context", True

    def __init__(self, head_dim, npos):
        super().__init__()
        self.npos = npos
        self.pos_emb = nn.Parameter(torch.zeros(head_dim, npos))

    def scores(self, att, q, scale):
        T = att.size(-1)
        causal = torch.ones(T, T, dtype=torch.float32, device=att.device).tril()
        gates = torch.sigmoid(att.float()) * causal
        p = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.npos - 1)
        z = torch.matmul(q, self.pos_emb.to(q.dtype)).float()  # (B, H, T, npos)
        floor, ceil = p.floor(), p.ceil()
        w = p - floor
        logit = z.gather(-1, ceil.long()) * w + z.gather(-1, floor.long()) * (1 - w)
        return att + logit * scale


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


def load_run(run_dir, weights_file="model.pt"):
    """(model, config) from a poslab run or fixture directory (config.json + model.pt)."""
    import json
    import os
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    weights = torch.load(os.path.join(run_dir, weights_file))
    return GPT.from_weights(config, weights), config
