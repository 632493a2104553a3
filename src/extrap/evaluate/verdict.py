"""The extrapolation verdict of 000 Definition 0.1, and whether it stands out of the noise.

A model extrapolates when |ppl_n - ppl_m| / ppl_m < δ for every tested length n >= m = L_tr.
Without a length above L_tr there is nothing to judge, so there is no verdict.

Each ratio has a standard error: paired (the same tokens at both lengths: the standard error of
the per-token loss difference) when both lengths scored the same tokens, else from the two
lengths' own standard errors.  With d = loss_n - loss_m, the ratio is |e^d - 1| and its standard
error e^d se(d) (the delta method).  A comparison is *within noise* when δ lies inside the 95%
interval of its ratio; the verdict is within noise when one such comparison could flip it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from extrap.errors import ExtrapError
from extrap.evaluate.stats import paired_stderr
from extrap.results.evaluation import Z95, LengthResult


@dataclass
class Comparison:
    """One tested length against L_tr."""

    length: int
    ratio: float  # |Δppl| / ppl at L_tr
    stderr: float | None  # standard error of ``ratio``; None: too few tokens to estimate it
    paired: bool  # the same tokens were scored at both lengths

    def noisy(self, delta: float) -> bool | None:
        """Whether δ lies inside the ratio's 95% interval (None without a standard error)."""
        return None if self.stderr is None else abs(self.ratio - delta) < Z95 * self.stderr


@dataclass
class ExtrapolationVerdict:
    extrapolates: bool | None  # None: no verdict, ``reason`` says why
    worst_ratio: float | None  # max |Δppl| / ppl over the evaluated lengths above L_tr
    reference_length: int
    delta: float
    detail: list = field(default_factory=list)  # (length, |Δppl| / ppl) for every length >= L_tr
    reason: str | None = None  # why there is no verdict
    comparisons: list[Comparison] = field(default_factory=list)  # every length above L_tr
    within_noise: bool | None = None  # a comparison within noise could flip the verdict; None: unknown
    noise: str | None = None  # the comparisons within noise, said in words

    @property
    def worst_stderr(self) -> float | None:
        worst = max(self.comparisons, key=lambda c: c.ratio, default=None)
        return worst.stderr if worst else None


def _ratio(r: LengthResult, ref: LengthResult) -> float:
    """|ppl_n - ppl_m| / ppl_m = |e^d - 1|, d = loss_n - loss_m (expm1: exact as d -> 0)."""
    return abs(math.expm1(r.loss - ref.loss))


def _compare(r: LengthResult, ref: LengthResult, independent: bool) -> Comparison:
    d = r.loss - ref.loss
    se_d, paired = None, False
    if r.nll is not None and ref.nll is not None and r.nll.numel() == ref.nll.numel():
        se_d, paired = paired_stderr(r.nll, ref.nll, independent), True
    elif r.stderr is not None and ref.stderr is not None:
        se_d = math.hypot(r.stderr, ref.stderr)
    return Comparison(r.length, _ratio(r, ref), None if se_d is None else math.exp(d) * se_d, paired)


def _noise(comparisons: list[Comparison], delta: float, extrapolates: bool) -> tuple[bool | None, str | None]:
    """Whether the comparisons that decide the verdict are within noise, and which ones."""
    deciding = comparisons if extrapolates else [c for c in comparisons if c.ratio >= delta]
    if any(c.noisy(delta) is None for c in deciding):
        return None, "no standard error (too few scored tokens)"
    noisy = [c for c in deciding if c.noisy(delta)]
    if extrapolates and not noisy or not extrapolates and len(noisy) < len(deciding):
        return False, None
    said = ", ".join(f"L={c.length}: {c.ratio:.4f} ± {Z95 * c.stderr:.4f}" for c in noisy)
    return True, f"within noise at δ={delta} (|Δppl|/ppl, 95%: {said})"


def verdict(
    results: list[LengthResult], train_length: int, delta: float = 0.02, independent: bool = False
) -> ExtrapolationVerdict:
    """000 Definition 0.1 over the tested lengths n >= m = L_tr.

    ``independent``: the scored tokens are far apart (last-token), so each is its own block.
    """
    if not delta > 0:
        raise ExtrapError(f"delta must be > 0, got {delta}")
    ok = [r for r in results if r.error is None]
    ref = next((r for r in ok if r.length == train_length), None)
    if ref is None:
        tried = any(r.length == train_length for r in results)
        why = f"L_tr = {train_length} {'failed' if tried else 'was not evaluated'}"
        return ExtrapolationVerdict(None, None, train_length, delta, reason=why)
    ratios = [(r.length, _ratio(r, ref)) for r in ok if r.length >= train_length]
    above = [x for L, x in ratios if L > train_length]
    if not above:
        failed = any(r.length > train_length for r in results)
        why = f"no length above L_tr = {train_length} was {'evaluated without error' if failed else 'evaluated'}"
        return ExtrapolationVerdict(None, None, train_length, delta, ratios, why)
    worst = max(above)
    comparisons = [_compare(r, ref, independent) for r in ok if r.length > train_length]
    within, noise = _noise(comparisons, delta, worst < delta)
    return ExtrapolationVerdict(worst < delta, worst, train_length, delta, ratios, None, comparisons, within, noise)


def with_ratios(results: list[LengthResult], v: ExtrapolationVerdict) -> list[LengthResult]:
    """``results`` with each compared length's ratio, its standard error and whether it was paired (from ``v``)."""
    by_length = {c.length: c for c in v.comparisons}
    out = []
    for r in results:
        c = by_length.get(r.length) if r.error is None else None
        out.append(r if c is None else replace(r, ratio=c.ratio, ratio_stderr=c.stderr, ratio_paired=c.paired))
    return out
