"""RoPE variants that change which pairs rotate and how fast, on top of any scaling.

Each is a pure function of the frequencies θ (as :func:`~extrap.positional.rope_scaling.rope_frequencies`
returns them, highest first) and is applied by :meth:`extrap.positional.rotary.Rotary.frequencies` in
this order: the scaling over the rotary dimension, then p-RoPE, then Resonance; partial rotary appends
the non-rotating pairs (θ = 0) last.

* partial rotary (GPT-NeoX ``rotary_pct``, HF ``partial_rotary_factor``): only the first
  r = int(partial·D) dimensions of a head rotate, with θ computed over r (as HF does); the other
  D - r dimensions pass through unchanged.
* p-RoPE (Barbero et al. 2025, "Round and Round We Go! What makes Rotary Positional Encodings useful?",
  ICLR 2025, §6): keep the int(p·r/2) highest frequencies and make the rest identity (θ = 0), the rule
  of their Gemma code (``rope_proportion``: ``int(p * head_dim // 2)`` rotating pairs, the remaining
  timescales infinite) and of transformers' ``proportional`` rope type.  p = 1 changes nothing.
* Resonance RoPE (Wang et al. 2024, "Resonance RoPE: Improving Context Length Generalization of Large
  Language Models", arXiv 2403.00071, Algorithm 1): every wavelength 2π/θ_i is rounded to the nearest
  integer, θ̃_i = 2π / round(2π/θ_i), so each feature repeats exactly with an integer period.  As the
  authors' code does, every rotating pair is rounded (their Resonance-YaRN rounds after the YaRN
  scaling, as here after any scaling); θ = 0 stays 0.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError

if TYPE_CHECKING:
    from torch import Tensor


def rotary_dim(head_dim: int, partial: float = 1.0) -> int:
    """r = int(partial · head_dim), the dimensions that rotate (HF ``partial_rotary_factor``); even, >= 2."""
    r = int(head_dim * partial)  # HF: dim = int(head_dim * partial_rotary_factor)
    if r < 2 or r % 2:
        raise ExtrapError(
            f"partial rotary: partial={partial:g} of head dimension {head_dim} rotates {r} dimensions; "
            "that must be an even number >= 2"
        )
    return r


def p_rope(theta: Tensor, p: float) -> Tensor:
    """p-RoPE: the int(p·r/2) highest frequencies of θ (r/2,) kept, the rest 0 (Barbero et al. 2025, §6)."""
    pairs = theta.shape[-1]
    keep = int(p * (2 * pairs) // 2)  # their rope_angles = int(rope_proportion * head_dim // 2)
    if keep >= pairs:
        return theta  # p = 1: plain RoPE, the same tensor
    out = theta.clone()
    out[..., keep:] = 0  # θ_i = 0: an infinite timescale, the pair does not rotate
    return out


def resonance(theta: Tensor) -> Tensor:
    """Resonance RoPE: θ̃_i = 2π / round(2π/θ_i) for θ_i > 0, 0 stays 0 (Wang et al. 2024, Algorithm 1)."""
    import torch

    rotating = theta > 0
    wavelength = torch.round(2 * math.pi / torch.where(rotating, theta, torch.ones_like(theta)))
    if bool((rotating & (wavelength < 1)).any()):
        raise ExtrapError("resonance: a wavelength 2π/θ rounds to 0 (θ > 4π); Resonance RoPE needs θ <= 4π")
    return torch.where(rotating, 2 * math.pi / wavelength, torch.zeros_like(theta))


def with_identity_pairs(theta: Tensor, head_dim: int) -> Tensor:
    """θ over the rotary dimension (r/2,) followed by (head_dim - r)/2 zeros: the pairs that do not rotate."""
    import torch

    missing = head_dim // 2 - theta.shape[-1]
    if missing <= 0:
        return theta
    return torch.cat([theta, theta.new_zeros(missing)])


__all__ = ["p_rope", "resonance", "rotary_dim", "with_identity_pairs"]
