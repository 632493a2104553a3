"""Shaw, Uszkoreit & Vaswani (2018): learned relative position representations on keys and values.

e_ij = q_i·(k_j + a^K_r)ᵀ/√Dh (their Eq. 4) and z_i = Σ_j α_ij (v_j + a^V_r) (Eq. 3), with
r = clip(j - i, -K, K).  Causal attention sees only r <= 0, so K + 1 embeddings of Dh numbers each, per
layer, shared by all heads as in the paper (§3.3) and the authors' tensor2tensor code.  Embedding c
(0..K) stands for r = -c, i.e. distance t = i - j clipped to K.

Blockwise: q·a^K is (B, H, Lq, K + 1), gathered by min(t, K); the value term sums each row's
probabilities per clipped distance (B, H, Lq, K + 1) before multiplying by a^V, so no (L, L, Dh)
tensor is ever built.
"""

from __future__ import annotations

import math

from extrap.positional.base import Option, Param
from extrap.positional.content import ContentBias
from extrap.positional.registry import register


@register
class Shaw(ContentBias):
    name = "shaw"
    summary = "learned relative embeddings a_r on keys (and values), r = clip(j - i, -K, K), shared by heads"
    reference = "Shaw, Uszkoreit, Vaswani 2018 (NAACL) Eqs. 3-4; survey 002 §3.2 Eq. 11"
    POSITIONAL_OPTION = "k"
    OPTIONS = (
        Option("k", int, 16, "K, the clipping distance (the paper's 16)", lambda v: v >= 1, "must be >= 1"),
        Option("values", bool, True, "also add a^V_r to the values (the paper's Eq. 3)"),
    )
    content_reason = (
        "learned relative embeddings enter as q_i·a_r (and a_r on the values): the logit depends on the query, "
        "so there is no bias r(t)"
    )

    def params(self, num_heads, head_dim=1):
        import torch

        K = self.opts["k"]
        g = torch.Generator().manual_seed(0)  # deterministic init, independent of the global RNG
        # tensor2tensor's default initialiser (variance scaling, fan_avg, uniform) over the authors'
        # (2K + 1, Dh) table: U(-s, s), s = sqrt(6 / (2K + 1 + Dh)).  Shape (1, K + 1, Dh): shared by heads.
        s = math.sqrt(6.0 / (2 * K + 1 + head_dim))

        def init(h):
            return (torch.rand(1, K + 1, head_dim, generator=g, dtype=torch.float64) * 2 - 1) * s

        names = ("aK", "aV") if self.opts["values"] else ("aK",)
        return [Param(n, init, learnable=True, doc=f"{n[1]} embeddings a_r, r = 0..-K") for n in names]

    def _index(self, t, shape):
        """Embedding index min(t, K) per (query, key) (masked t < 0 read index 0), shaped (B, H, Lq, Lk)."""
        idx = t.clamp(0, self.opts["k"]).long()
        idx = idx.unsqueeze(1) if idx.dim() == 3 else idx.reshape(1, 1, *idx.shape)
        return idx.expand(shape[0], shape[1], *idx.shape[-2:])

    def _band(self, x, first: int, c: int):
        """The entries of x (…, Lq, Lk) at t = first + a - j = c: a diagonal, and the rows a it covers."""
        d = x.diagonal(offset=first - c, dim1=-2, dim2=-1)
        a0 = min(max(0, c - first), x.shape[-2])  # rows before a0 have no key at t = c
        return d, slice(a0, a0 + d.shape[-1])

    def logits(self, q, s, t, values, i=None):
        K = self.opts["k"]
        aK = values["aK"][0].to(q.dtype)  # (K + 1, Dh)
        qa = (q @ aK.T) / math.sqrt(q.shape[-1])  # (B, H, Lq, K + 1): q_i·a^K_r / √Dh, Shaw et al. Eq. 4
        if not isinstance(t, int):
            return s + qa.gather(-1, self._index(t, s.shape))
        # consecutive positions: a_K everywhere, then the K diagonals t = 0..K-1 corrected in place
        out = s + qa[..., K:]
        for c in range(K):
            d, rows = self._band(out, t, c)
            d.add_(qa[..., rows, c] - qa[..., rows, K])
        return out

    def mix(self, p, t, values):
        if "aV" not in values:
            return None
        import torch

        K = self.opts["k"]
        if isinstance(t, int):  # per row: the probability at t = c < K (a diagonal), the rest at t >= K
            cols = []
            for c in range(K):
                d, rows = self._band(p, t, c)
                cols.append(torch.nn.functional.pad(d, (rows.start, p.shape[-2] - rows.stop)))
            w = torch.stack([*cols, p.sum(-1) - sum(cols)], dim=-1)  # K >= 1
        else:
            w = p.new_zeros(*p.shape[:-1], K + 1).scatter_add_(-1, self._index(t, p.shape), p)  # Σ_j α_ij per r
        return w @ values["aV"][0].to(p.dtype)  # Σ_j α_ij a^V_r, Shaw et al. Eq. 3
