"""CAPE, context-adaptive positional encoding (Zheng et al. 2024): an MLP of the logits and a base bias.

Logits q·kᵀ/√Dh + b(i, j) + f(q·kᵀ/√Dh, b(i, j)) (survey 002 Eq. 21; the authors' code also keeps b),
where b is another bias RPE of the registry (``base``, called through its own function) and f a
two-layer LeakyReLU MLP that sees all heads at once: 2H -> hidden -> H, as in the authors' code
(chuanyang-Zheng/CAPE, ``AliBi_C``/``FIRE_C``/``ParallelKerpleLog_C``), on the scaled logits.

Named ``cape-ctx`` because ``cape`` is already Likhomanenko et al.'s continuous augmented positional
embedding (``sinusoidal:cape=1``).  f depends on q·k, so the attention computes it block by block.
"""

from __future__ import annotations

import math

from extrap.errors import ExtrapError
from extrap.positional.base import BiasRPE, Option, Param
from extrap.positional.content import ContentBias, distances
from extrap.positional.registry import REGISTRY, register

MLP = ("f_w1", "f_b1", "f_w2", "f_b2")


def _base(name: str) -> BiasRPE:
    bases = [n for n, c in REGISTRY.items() if issubclass(c, BiasRPE) and not issubclass(c, ContentBias)]
    bases = [n for n in bases if n != "formula"]  # a formula needs its expression, which no option carries
    if name not in bases:
        raise ExtrapError(f"cape-ctx: unknown base {name!r} (a bias RPE of the registry: {', '.join(bases)})")
    return REGISTRY[name]()


@register
class CapeCtx(ContentBias):
    name = "cape-ctx"
    summary = "logits + b + f(logits, b): a LeakyReLU MLP over heads of the logits and a base RPE's bias"
    reference = "Zheng et al. 2024 (CAPE); survey 002 §3.2.2 Eq. 21; code chuanyang-Zheng/CAPE"
    OPTIONS = (
        Option("base", str, "alibi", "the RPE that gives b(i, j): alibi, kerple-log, fire, ..."),
        Option("hidden", int, 32, "width of f (the authors' mlp_width 32)", lambda v: v >= 1, "must be >= 1"),
    )
    content_reason = "f(q·k, b) depends on the content of the attention"

    def validate(self):
        self.static = _base(self.opts["base"])

    def params(self, num_heads, head_dim=1):
        import torch

        D, H = self.opts["hidden"], num_heads
        g = torch.Generator().manual_seed(0)  # deterministic init, independent of the global RNG

        def linear(*shape, fan_in):  # torch.nn.Linear's default: U(-1/√fan_in, 1/√fan_in), weights and biases
            return lambda h: (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) / math.sqrt(fan_in)

        f = [  # f_w1 (D, 2H), f_b1 (D,), f_w2 (H, D), f_b2 (H,)
            Param("f_w1", linear(D, 2 * H, fan_in=2 * H), learnable=True, doc="f: first layer"),
            Param("f_b1", linear(D, fan_in=2 * H), learnable=True),
            Param("f_w2", linear(H, D, fan_in=D), learnable=True, doc="f: second layer"),
            Param("f_b2", linear(H, fan_in=D), learnable=True),
        ]
        return self.static.params(num_heads) + f

    def train_bytes(self, *, batch, length, max_position, n_head, n_layer, d_model) -> int:
        """f's hidden layer on every (query, key) pair a causal layer computes, kept for the backward pass:
        B x L(L+1)/2 x hidden float32 per layer."""
        return 4 * batch * (length * (length + 1) // 2) * self.opts["hidden"] * n_layer

    def static_values(self, values):
        """The base RPE's own parameter values (without f's)."""
        return {k: v for k, v in values.items() if k not in MLP}

    def fn(self, xp, t, p, i=None):
        return self.static.fn(xp, t, self.static_values(p), i)  # b(i, j), the static part

    def logits(self, q, s, t, values, i=None):
        import torch
        import torch.nn.functional as F

        B, H = s.shape[:2]
        t = distances(t, s)
        tt = t.clamp_min(0).to(s.dtype)
        ii = None if self.static.toeplitz else i.to(s.dtype).unsqueeze(-1).expand_as(tt)
        b = self.static.bias(tt, self.static_values(values), i=ii).to(s.dtype)  # (H or 1, *t.shape)
        b = (b.movedim(0, 1) if t.dim() == 3 else b.unsqueeze(0)).expand(B, H, *t.shape[-2:])
        hard = torch.isneginf(b)  # a base that hides keys (window): they stay hidden, and f never sees -inf
        b = b.masked_fill(hard, 0.0)
        x = torch.cat([s, b], dim=1).movedim(1, -1)  # (B, Lq, Lk, 2H): every head's logit and bias
        w1, b1, w2, b2 = (values[k].to(s.dtype) for k in MLP)
        f = F.linear(F.leaky_relu(F.linear(x, w1, b1)), w2, b2).movedim(-1, 1)  # (B, H, Lq, Lk)
        return (s + b + f).masked_fill(hard, -math.inf)  # Zheng et al. 2024: q·k + b + f(q·k, b)
