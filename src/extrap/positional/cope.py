"""CoPE (Golovneva et al. 2024, "Contextual Position Encoding: Learning to Count What's Important"; survey 002 §3.2).

Each query counts its own positions: a gate g_ij = σ(q_i·k_j) per key, the position of key j is the
number of open gates from j to i, p_ij = Σ_{k=j}^{i} g_ik, and the logit gains q_i·e[p_ij], with e[p]
interpolated between the integer rows ⌊p⌋ and ⌈p⌉ of a learned table of ``npos`` rows.

Details from the paper's PyTorch listing (§3, Figure/listing "CoPE"; facebookresearch's reference):

* the gate reads the *scaled* logit q·k/√d with the causal mask already added, so masked keys get g = 0;
* the sum runs from key j to the query (a reversed cumulative sum over the keys);
* p is clamped at npos - 1; e is one (head_dim, npos) table per layer shared by all heads, initialised to 0,
  and multiplied with the unscaled query; the softmax reads q·k/√d + q·e[p].

The attention computes this block by block of queries (each block against the keys it can see:
O(block × L) per head, never L × L); the model's layer is :class:`extrap.model.pe_layers.CopeAttention`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extrap.positional.base import Option, Scheme
from extrap.positional.registry import register

if TYPE_CHECKING:
    from torch import Tensor


def cope_positions(gates: Tensor) -> Tensor:
    """p_ij = Σ_{k=j}^{i} g_ik (Golovneva et al. 2024 §3): the suffix sums of gates (..., Lq, Lk) over the
    keys (masked keys carry g = 0)."""
    return gates.flip(-1).cumsum(-1).flip(-1)


def cope_logits(q: Tensor, emb: Tensor, p: Tensor) -> Tensor:
    """q_i·e[p_ij] with e[p] = (p - ⌊p⌋) e[⌈p⌉] + (1 - p + ⌊p⌋) e[⌊p⌋] (Golovneva et al. 2024 §3).

    q: (..., Lq, D); emb: (D, npos); p: (..., Lq, Lk) >= 0.  p is clamped at npos - 1.  Returns (..., Lq, Lk).
    """
    p = p.clamp(max=emb.shape[-1] - 1)
    lo, hi = p.floor(), p.ceil()
    qe = q @ emb  # (..., Lq, npos): q·e[k] for every integer k, then interpolated
    w = p - lo
    return qe.gather(-1, hi.long()) * w + qe.gather(-1, lo.long()) * (1 - w)


@register
class CoPE(Scheme):
    """Contextual position encoding: positions count the open gates σ(q·k) between key and query."""

    name = "cope"
    kind = "cope"
    summary = "gates σ(q·k) count positions p_ij = Σ_{k=j..i} g_ik; logits + q·e[p] (npos learned rows)"
    reference = "Golovneva et al. 2024, Contextual Position Encoding (survey 002 §3.2)"
    theory_reason = "CoPE: positions are counted by gates σ(q·k) that depend on the content, not on i - j"
    POSITIONAL_OPTION = "npos"
    OPTIONS = (
        Option(
            "npos",
            int,
            64,
            "rows of the position table (p clamped at npos - 1)",
            lambda n: 0 < n <= 2**20,
            "must be in 1..2^20",
        ),
    )

    @property
    def learned(self) -> bool:
        return True


__all__ = ["cope_positions", "cope_logits", "CoPE"]
