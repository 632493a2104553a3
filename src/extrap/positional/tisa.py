"""TISA (Wennberg & Henter 2021): a learned sum of Gaussian kernels of the distance, per head.

r(t) = Σ_k a_k exp(-|b_k| (t - c_k)²): amplitudes a, sharpness b, offsets c, one set of K kernels per
head.  It depends on t alone, so it is a Toeplitz bias like KERPLE: the model reads it through the r(t)
table, and the theory engine analyses its trained kernels per layer and head.  Since r(t) -> 0,
exp(r(t)) -> 1 and Σ exp(r) diverges by the nth-term test (000 Theorem 0.4): attention dilutes with length.
"""

from __future__ import annotations

from extrap.positional.base import BiasRPE, Option, Param
from extrap.positional.registry import register

# The authors' initialisation (ulmewennberg/tisa, ``Tisa._init_weights``): offsets c ~ N(0, 5),
# amplitudes a ~ N(0.1, 0.01), sharpness b ~ N(0.1, 0.01).
INIT = {"a": (0.1, 0.01), "b": (0.1, 0.01), "c": (0.0, 5.0)}


@register
class TISA(BiasRPE):
    name = "tisa"
    summary = "learned Σ_k a_k exp(-|b_k| (t - c_k)^2): K Gaussian kernels of the distance per head"
    reference = "Wennberg & Henter 2021 (TISA) §3; survey 002 §3.2.2"
    OPTIONS = (
        Option(
            "kernels", int, 5, "K, Gaussian kernels per head (the authors' default 5)", lambda v: v >= 1, "must be >= 1"
        ),
    )

    def params(self, num_heads):
        import torch

        K = self.opts["kernels"]
        g = torch.Generator().manual_seed(0)  # deterministic init, independent of the global RNG

        def normal(name):
            mean, std = INIT[name]
            return lambda h: mean + std * torch.randn(h, K, generator=g, dtype=torch.float64)

        # Shapes (H, K): one row of kernels per head (the authors store (K, H)).
        names = (("a", "amplitude"), ("b", "sharpness, used as |b|"), ("c", "offset"))
        return [Param(q, normal(q), learnable=True, doc=d) for q, d in names]

    def train_bytes(self, *, batch, length, max_position, n_head, n_layer, d_model) -> int:
        """Each of the K kernels keeps three tensors over the heads and distances of a layer's r(t) table for
        the backward pass, t - c_k, its square and the exponential: 3 x K x H x L float32 per layer."""
        return 3 * 4 * self.opts["kernels"] * n_head * length * n_layer

    def fn(self, xp, t, p, i=None):
        K = self.opts["kernels"]

        def kernel(k):
            if xp.name == "torch":  # (H, K) -> column k, shaped (H, 1, ...) against t
                a, b, c = (xp.per_head(p[q][:, k], t) for q in "abc")
            else:  # one head's K values: a list (sympy, mpmath) or a row (flex)
                a, b, c = (p[q][k] for q in "abc")
            return a * xp.exp(-xp.abs(b) * (t - c) ** 2)  # Wennberg & Henter 2021 §3: RBF position score

        return xp.add_all(kernel(k) for k in range(K))  # each kernel's (H, L) terms freed once added
