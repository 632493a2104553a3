"""Whether Theorem 0.4 (000) applies to a scheme, and if not, why: one line per kind of scheme."""

from __future__ import annotations

from extrap.positional.base import BiasRPE, Scheme
from extrap.positional.content import ContentBias

_APE = "absolute positional embedding: it acts on token embeddings, not as a bias of i - j"
_ROTARY = "rotary embedding: it rotates q and k, so position multiplies q.k instead of adding a Toeplitz bias r(i - j)"
_NOT_TOEPLITZ = "the bias depends on the query position i as well as on t = i - j (not Toeplitz)"


def not_applicable_reason(scheme: Scheme) -> str | None:
    """Why Theorem 0.4 does not apply to ``scheme`` (None if it does).

    It applies to every bias RPE whose r depends on t = i - j alone, NoPE's r = 0 included.
    """
    if scheme.theory_reason:  # the survey's added encodings say why, one line each
        return scheme.theory_reason
    if scheme.rotates:
        return _ROTARY
    if scheme.embeds:
        return _APE
    if not isinstance(scheme, BiasRPE):
        return f"{scheme.kind} scheme: no additive bias r(i - j)"
    if isinstance(scheme, ContentBias):  # Shaw: no bias of t alone; CAPE: its static part, the base RPE
        return scheme.content_reason if scheme.static is None else not_applicable_reason(scheme.static)
    if scheme.adds_bias and not scheme.is_toeplitz:
        return _NOT_TOEPLITZ
    return None
