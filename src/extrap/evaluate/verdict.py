"""The extrapolation verdict of 000 Definition 0.1.

A model extrapolates when |ppl_n - ppl_m| / ppl_m < δ for every tested length n >= m = L_tr.
Without a length above L_tr there is nothing to judge, so there is no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extrap.errors import ExtrapError
from extrap.evaluate.protocols import LengthResult


@dataclass
class ExtrapolationVerdict:
    extrapolates: bool | None  # None: no verdict, ``reason`` says why
    worst_ratio: float | None  # max |Δppl| / ppl over the evaluated lengths above L_tr
    reference_length: int
    delta: float
    detail: list = field(default_factory=list)  # (length, |Δppl| / ppl) for every length >= L_tr
    reason: str | None = None  # why there is no verdict


def verdict(results: list[LengthResult], train_length: int, delta: float = 0.02) -> ExtrapolationVerdict:
    """000 Definition 0.1 over the tested lengths n >= m = L_tr."""
    if not delta > 0:
        raise ExtrapError(f"delta must be > 0, got {delta}")
    ok = [r for r in results if r.error is None]
    ref = next((r for r in ok if r.length == train_length), None)
    if ref is None:
        tried = any(r.length == train_length for r in results)
        why = f"L_tr = {train_length} {'failed' if tried else 'was not evaluated'}"
        return ExtrapolationVerdict(None, None, train_length, delta, reason=why)
    ratios = [(r.length, abs(r.ppl - ref.ppl) / ref.ppl) for r in ok if r.length >= train_length]
    above = [x for L, x in ratios if L > train_length]
    if not above:
        failed = any(r.length > train_length for r in results)
        why = f"no length above L_tr = {train_length} was {'evaluated without error' if failed else 'evaluated'}"
        return ExtrapolationVerdict(None, None, train_length, delta, ratios, why)
    worst = max(above)
    return ExtrapolationVerdict(worst < delta, worst, train_length, delta, ratios)
