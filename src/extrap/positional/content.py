"""Bias RPEs that read the content of the attention, not only the positions (Shaw et al., CAPE).

They cannot be a table r(t): Shaw et al.'s term q_i·a_r depends on the query, CAPE's f on q_i·k_j.
The attention hands each block of queries to the scheme (:mod:`extrap.model.content`):

* :meth:`ContentBias.logits`: the block's scaled logits s = q·kᵀ/√Dh -> the logits before the mask and τ;
* :meth:`ContentBias.mix`: what the scheme adds to the block's output p·v (Shaw et al.'s a^V term), or None.

Their parameters may depend on the head dimension Dh (Shaw's embeddings), so
:meth:`ContentBias.init_values` also takes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extrap.errors import ExtrapError
from extrap.positional.base import BiasRPE, Param

if TYPE_CHECKING:
    import torch


class ContentBias(BiasRPE):
    """A bias RPE computed block by block from the queries, keys or logits (never a table r(t))."""

    toeplitz = False
    static: BiasRPE | None = None  # the part of the logits that depends on positions alone (CAPE's b)
    content_reason: str = "the bias depends on the content of the attention, not on t = i - j alone"

    def params(self, num_heads: int, head_dim: int = 1) -> list[Param]:  # pragma: no cover - abstract
        raise NotImplementedError

    def init_values(self, num_heads: int, head_dim: int = 1) -> dict[str, torch.Tensor]:
        if num_heads <= 0 or head_dim <= 0:
            raise ExtrapError(f"number of heads and head dimension must be positive, got {num_heads}, {head_dim}")
        import torch

        return {q.name: q.init(num_heads).to(torch.float64) for q in self.params(num_heads, head_dim)}

    def logits(self, q, s, t, values, i=None):  # pragma: no cover - abstract
        """q (B, H, Lq, Dh), s (B, H, Lq, Lk) = q·kᵀ/√Dh, t (Lq, Lk) or (B, Lq, Lk) distances i - j (or an
        int ``first``: consecutive positions, t[a, j] = first + a - j, see :func:`distances`), i the query
        positions -> the logits (B, H, Lq, Lk), before the mask and τ."""
        raise NotImplementedError

    def mix(self, p, t, values):
        """p (B, H, Lq, Lk) attention probabilities -> a term added to p·v, (B, H, Lq, Dh), or None."""
        return None

    def fn(self, xp, t, p, i=None):
        raise ExtrapError(f"{self.name}: the bias depends on the content of the attention, not on t alone")


def distances(t, like):
    """t as a tensor (Lq, Lk) on ``like``'s device: an int ``first`` means t[a, j] = first + a - j."""
    if not isinstance(t, int):
        return t
    import torch

    Lq, Lk = like.shape[-2:]
    a, j = torch.arange(Lq, device=like.device), torch.arange(Lk, device=like.device)
    return t + a.unsqueeze(-1) - j.unsqueeze(-2)
