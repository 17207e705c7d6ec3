"""poslab's positional encodings in PyTorch, part 1: the formulas, the strategy base class with poslab's
hooks (embed, rotate, bias, scores), and the additive, rotary and ALiBi kinds (src/model/positional/
additive.cpp, rotary.cpp, bias.cpp). Used through poslab_ref.py."""
import math

import torch
import torch.nn as nn


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
