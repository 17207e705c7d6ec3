"""poslab's positional encodings in PyTorch, part 2: the learned and parameter-free biases (T5, KERPLE,
Sandwich, FIRE) and CoPE's scores hook (src/model/positional/relative_bias.cpp, cope.cpp)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from poslab_ref_pe import PositionalEncoding, relative_distance


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
