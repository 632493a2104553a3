"""What the theory engine reports for one head and for a checkpoint's layers, and the keys and checks of its eps."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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


_OPTIONAL = ("trf_note", "tail_term", "growth", "dilution", "train_length", "evidence")  # in the JSON when set


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
        """Whether the two heads report the same (their head numbers aside)."""
        return replace(self, head=0).to_json() == replace(other, head=0).to_json()

    def to_json(self) -> dict:
        """JSON-ready and strict: finite floats and ints only, B also as a 30-digit string.

        A value that is not a finite float64 number (B beyond 1.8e308, an overflowing
        dilution) is written null, and ``<field>_note`` says why.
        """
        notes = dict(self.notes)
        out = {
            "pe": self.pe,
            "head": "all" if self.head is None else self.head,
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
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                out[name] = _strict(value, name, notes)
        if self.exponents:
            out["exponents"] = list(self.exponents)
        out.update({f"{name}_note": why for name, why in notes.items()})
        return out

    @classmethod
    def from_json(cls, d: dict) -> HeadResult:
        """A head as written: B from its digits, at the precision they were written."""
        series_sum, error = _read_sum(d.get("series_sum"), d.get("series_sum_digits"))
        notes = {k.removesuffix("_note"): v for k, v in d.items() if k.endswith("_note") and k != "trf_note"}
        return cls(
            pe=d.get("pe"),
            head=None if d.get("head") == "all" else d.get("head"),
            verdict=d.get("verdict"),
            test=d.get("test"),
            explanation=d.get("explanation"),
            series_sum=series_sum,
            series_sum_error=error,
            trf=dict(d.get("trf") or {}),
            # written only when set, so a null here was a number that is not finite (its note says which)
            **{k: math.nan if k in d and d[k] is None else d.get(k) for k in _OPTIONAL},
            exponents=list(d.get("exponents") or ()),
            notes=notes,
        )


ParamValues = Mapping[str, Any]
"""One head's parameter values by name, as ``scheme.head_values`` gives them: a float each, or a list
for a parameter with a vector per head (T5's bucket table); JSON-ready."""


@dataclass(frozen=True)
class LayerResults:
    """The heads of one layer of a checkpoint, ``name`` its parameter prefix (``blocks.0.attn``)."""

    name: str
    heads: tuple[HeadResult, ...]


@dataclass(frozen=True)
class CheckpointAnalysis:
    """:func:`extrap.theory.analyse_checkpoint`: every layer's heads at the learned parameter values."""

    pe: str
    num_heads: int
    layers: tuple[LayerResults, ...]

    def to_json(self) -> dict:
        layers = {x.name: [h.to_json() for h in x.heads] for x in self.layers}
        return {"pe": self.pe, "num_heads": self.num_heads, "layers": layers}

    @classmethod
    def from_json(cls, d: dict) -> CheckpointAnalysis:
        layers = tuple(
            LayerResults(str(name), tuple(HeadResult.from_json(h) for h in heads))
            for name, heads in (d.get("layers") or {}).items()
        )
        return cls(pe=d.get("pe"), num_heads=d.get("num_heads"), layers=layers)


def _read_sum(value: float | None, digits: str | None) -> tuple:
    """(B, its error bound) from the JSON's float and digits, so that ``to_json`` writes both again.

    The digits (30 at most, every one kept) are B unless they are too few to give back the float
    (15 or 16 digits); then B is the float, with an error bound that prints as many digits.
    """
    if digits is None:
        return (None if value is None else mpmath.mpf(value)), None
    with mpmath.workdps(40):
        b = mpmath.mpf(digits)
    if value is None or float(b) == value:
        return b, None
    shown = len(digits.split("e")[0].lstrip("-").replace(".", "").lstrip("0"))
    b = mpmath.mpf(value)
    return b, abs(b) * mpmath.mpf(10) ** -(max(15, shown) + 1.5)  # digits(): max(15, shown)


def _strict(value, name: str, notes: dict[str, str]):
    """``value`` with every non-finite float replaced by None (noting why under ``name`` if no note says so)."""
    if isinstance(value, dict):
        return {k: _strict(v, name, notes) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        notes.setdefault(name, f"not a finite number ({value})")
        return None
    return value
