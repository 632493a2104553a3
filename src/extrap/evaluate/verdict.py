"""The extrapolation verdict of 000 Definition 0.1.

A model extrapolates when |ppl_n - ppl_m| / ppl_m < δ for every tested length n >= m = L_tr.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extrap.errors import ExtrapError
from extrap.evaluate.protocols import LengthResult


@dataclass
class ExtrapolationVerdict:
    extrapolates: bool | None  # None: L_tr itself was not evaluated
    worst_ratio: float | None
    reference_length: int
    delta: float
    detail: list = field(default_factory=list)  # (length, |Δppl| / ppl) for every length >= L_tr


def verdict(results: list[LengthResult], train_length: int, delta: float = 0.02) -> ExtrapolationVerdict:
    """000 Definition 0.1 over the tested lengths n >= m = L_tr."""
    if not delta > 0:
        raise ExtrapError(f"delta must be > 0, got {delta}")
    ok = [r for r in results if r.error is None]
    ref = next((r for r in ok if r.length == train_length), None)
    if ref is None:
        return ExtrapolationVerdict(None, None, train_length, delta)
    ratios = [(r.length, abs(r.ppl - ref.ppl) / ref.ppl) for r in ok if r.length >= train_length]
    worst = max(x for _, x in ratios)
    return ExtrapolationVerdict(worst < delta, worst, train_length, delta, ratios)
