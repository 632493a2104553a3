"""What the theory engine reports for one head, and the keys and checks of its eps values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import mpmath

from extrap.errors import ExtrapError
from extrap.theory.convergence import Verdict


def eps_key(eps: float) -> str:
    """The JSON/table key of an eps: Python's ``f"{eps:g}"`` (0.001, 1e-06, 1e-12)."""
    return f"{eps:g}"


def check_eps(e) -> float:
    """``e`` as a float in (0, 1), the range of 000 Eq. 22; ExtrapError otherwise."""
    try:
        e = float(e)
    except (TypeError, ValueError):
        raise ExtrapError(f"eps must be a number in (0, 1), got {e!r}") from None
    if not (0 < e < 1) or math.isnan(e):
        raise ExtrapError(f"eps must lie strictly between 0 and 1, got {e:g}")
    return e


@dataclass
class HeadResult:
    """Everything the theory engine says about one head (or all heads, ``head=None``)."""

    pe: str
    head: int | None
    verdict: str
    test: str
    explanation: str
    series_sum: Any = None  # mpmath value of B (convergent heads)
    series_sum_error: Any = None  # bound on the error of series_sum (mpmath)
    trf: dict[str, int | None] = field(default_factory=dict)  # eps_key(eps) -> n(eps)
    trf_note: str | None = None  # why a TRF is null
    tail_term: float | None = None  # eventual weight relative to the head's largest weight
    growth: str | None = None  # partial-sum growth of a divergent series
    dilution: dict[str, float] | None = None  # S(L)/S(L_train) for L in the requested lengths
    train_length: int | None = None
    exponents: list[str] = field(default_factory=list)  # log-scale exponents p, q, ...
    evidence: dict[str, float] | None = None  # partial sums S(L) when inconclusive
    notes: dict[str, str] = field(default_factory=dict)  # field -> why its value (or part of it) is null
    detail: Verdict | None = field(default=None, repr=False, compare=False)  # the symbolic verdict

    def digits(self) -> int:
        """Significant digits of B that its error bound guarantees (15..30)."""
        if not self.series_sum_error:
            return 30
        rel = self.series_sum_error / abs(self.series_sum)
        return max(15, min(30, int(-mpmath.log10(rel)) - 1))

    def same_as(self, other: HeadResult) -> bool:
        return self.to_dict(head=0) == other.to_dict(head=0)

    def to_dict(self, head: Any = "keep") -> dict:
        """JSON-ready and strict: finite floats and ints only, B also as a 30-digit string.

        A value that is not a finite float64 number (B beyond 1.8e308, an overflowing
        dilution) is written null, and ``<field>_note`` says why.
        """
        notes = dict(self.notes)
        out = {
            "pe": self.pe,
            "head": ("all" if self.head is None else self.head) if head == "keep" else head,
            "verdict": self.verdict,
            "test": self.test,
            "series_sum": None if self.series_sum is None else _strict(float(self.series_sum), "series_sum", notes),
            "trf": dict(self.trf),
            "explanation": self.explanation,
        }
        if self.series_sum is not None:
            out["series_sum_digits"] = mpmath.nstr(self.series_sum, self.digits())
            if out["series_sum"] is None:
                notes["series_sum"] = "B is beyond float64's range; series_sum_digits holds its value"
        for name in ("trf_note", "tail_term", "growth", "dilution", "train_length", "evidence"):
            value = getattr(self, name)
            if value is not None:
                out[name] = _strict(value, name, notes)
        if self.exponents:
            out["exponents"] = list(self.exponents)
        out.update({f"{name}_note": why for name, why in notes.items()})
        return out


def _strict(value, name: str, notes: dict[str, str]):
    """``value`` with every non-finite float replaced by None (noting why under ``name`` if no note says so)."""
    if isinstance(value, dict):
        return {k: _strict(v, name, notes) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        notes.setdefault(name, f"not a finite number ({value})")
        return None
    return value
