"""Complex word-order embeddings (Wang et al. 2020, "Encoding word order in complex embeddings"; survey 002 §3.1.2).

Each word j at position pos is the complex vector f(j, pos) = r_j ⊙ e^{i(ω_j pos + θ_j)}: amplitude r_j,
frequency ω_j and initial phase θ_j are learned per word and per dimension.  The word's meaning sits in
the amplitude, its position only in the phase, so the embedding changes smoothly with the position.

Choices from the authors' code (github.com/iclr-complex-order/complex-order, read in its copy
FreedomIntelligence/complex-order, LANGUAGE MODELING/pytorch-complex):

* the amplitude is the word embedding; the frequency table is initialised to the sinusoidal frequencies
  base^(-2⌊k/2⌋/m) (trainable), positions count from 1;
* their code leaves θ out (θ = 0); extrap learns θ as the paper writes it, initialised to 0, so that
  the model at initialisation is theirs;
* their layers are complex-valued (real and imaginary streams with shared weights).  extrap's blocks are
  real, so the m complex dimensions enter as the 2m = d_model real features [Re f; Im f].

The model owns the tables (:mod:`extrap.model.pe_layers`); this module holds the formula and the scheme.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extrap.positional.base import Option, Scheme
from extrap.positional.registry import register

if TYPE_CHECKING:
    from torch import Tensor


def complex_order_embedding(r: Tensor, omega: Tensor, theta: Tensor, pos: Tensor) -> Tensor:
    """[Re f; Im f] of f(j, pos) = r_j e^{i(ω_j pos + θ_j)} (Wang et al. 2020, Eq. 3; survey 002 §3.1.2).

    Args:
        r, omega, theta: (..., L, m) amplitude, frequency and initial phase of each token's word.
        pos: (L,) or (..., L) positions (the authors count from 1).

    Returns:
        (..., L, 2m): the real parts, then the imaginary parts.
    """
    import torch

    phase = omega * pos.to(omega.dtype).unsqueeze(-1) + theta
    return torch.cat([r * torch.cos(phase), r * torch.sin(phase)], dim=-1)


def complex_frequencies(m: int, base: float) -> Tensor:
    """(m,) the authors' initial frequencies base^(-2⌊k/2⌋/m), k = 0..m-1 (their sinusoid table)."""
    import torch

    k = torch.arange(m, dtype=torch.float64)
    return (base ** (-2 * torch.div(k, 2, rounding_mode="floor") / m)).float()


@register
class ComplexOrder(Scheme):
    """Complex word-order embedding: replaces the token embedding by [r cos φ; r sin φ], φ = ω pos + θ."""

    name = "complex"
    kind = "complex"
    summary = "word embedding r·e^{i(ω·pos+θ)} with r, ω, θ learned per word; [Re; Im] enter the model"
    reference = "Wang et al. 2020 (ICLR), Encoding word order in complex embeddings (survey 002 §3.1.2)"
    theory_reason = "complex embedding: position enters each word's phase, there is no additive bias r(i - j)"
    OPTIONS = (Option("base", float, 10000.0, "initial frequencies base^(-2⌊k/2⌋/m)", lambda b: b > 1, "must be > 1"),)

    @property
    def learned(self) -> bool:
        return True


__all__ = ["complex_order_embedding", "complex_frequencies", "ComplexOrder"]
