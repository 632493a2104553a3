"""B and the exact TRF (000 Eq. 22) of a min/max formula whose eventual branch starts far away.

:class:`extrap.theory.trf.Series` sums every term before the cutoff K from which r(t) keeps its
eventual branch, which is affordable up to ``MAX_DIRECT`` distances.  Beyond that (K up to
2**64, the reach of :mod:`extrap.theory.eventual`), :class:`PiecewiseSeries` splits 0..K-1 at
the exact switch points of the formula (:func:`extrap.theory.pieces.split`), sums each piece
exactly (:mod:`extrap.theory.runs`: term by term, closed forms, or Euler-Maclaurin between two
points) and the tail from K with the engine's own series for the eventual branch, shifted to
start at K:

    B = sum_i S_i + R_K,   R(j) = S_i(j) + S_{i+1} + ... + R_K   for j in piece i,

where S_i(j) is piece i's sum from j on.  n(eps) = min{ j : R(j) < B eps } lies in the first
piece whose end already has R below B eps; inside it the integer is found by bisection (with
interpolation steps) on exact suffix sums, and checked to be clear of every error bound on
both sides.  In the tail it is the shifted series' own n, plus K.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import sympy

from extrap.positional.conventions import T
from extrap.theory.closed import closed_series
from extrap.theory.intervals import Unbounded
from extrap.theory.pieces import split
from extrap.theory.runs import DirectRun, Run, make_run, weight
from extrap.theory.trf import DPS, Series, SeriesError, checked_eps, less

MARGIN = 10  # both sides of a crossing must clear this many times the error bounds involved
SEARCH_DPS = 25  # digits of the bisection inside a piece; the integer is then settled at full precision
WALK = 64  # steps of R(n+1) = R(n) - b_n that settling may take


class PiecewiseSeries:
    """sum_{t>=0} b_t of ``form`` (with min/max) that equals ``tail_expr`` from ``cutoff`` on.

    ``head(t)`` is r(t) of the whole formula (mpmath); ``tail_expr`` None means b_t = 0 from the
    cutoff on.  ``total`` / ``total_err`` are B and its error bound; :meth:`trf` gives n(eps).
    Raises :class:`SeriesError` (one line) when a piece or the switch points cannot be had.
    """

    def __init__(self, head: Callable, form, tail_expr, cutoff: int, fast: bool = False, t=T):
        self.cutoff, self._head = cutoff, head
        with mpmath.workdps(DPS):
            try:
                pieces = split(form, t, cutoff)
            except Unbounded as e:
                raise SeriesError(str(e)) from None
            self.runs: list[Run] = [make_run(head, p.start, p.stop, p.branch) for p in pieces]
            self.rest = None if tail_expr is None else _shifted_series(head, tail_expr, cutoff, fast, t)
            rest = (self.rest.total, self.rest.total_err) if self.rest is not None else (mpmath.mpf(0),) * 2
            self._after = [rest]  # (sum of the runs after run i and the tail, its error), built backwards
            for run in reversed(self.runs[1:]):
                value, err = self._after[0]
                self._after.insert(0, (value + run.total, err + run.err))
            first = self.runs[0] if self.runs else None
            value, err = self._after[0] if first is not None else rest
            self.total = value + (first.total if first is not None else 0)
            self.total_err = err + (first.err if first is not None else 0)
        if not self.total > 0:
            raise SeriesError("the series sums to 0")

    def refine(self) -> None:
        """Nothing to refine: every piece is summed at the working precision."""

    def remainder(self, j: int) -> tuple:
        """(R(j) = sum_{t>=j} b_t, error bound) for 0 <= j <= cutoff."""
        for i, run in enumerate(self.runs):
            if run.start <= j < run.stop:
                value, err = run.suffix(j)
                return value + self._after[i][0], err + self._after[i][1]
        return self._after[-1] if self.runs else (self.total, self.total_err)

    def trf(self, eps) -> int:
        """n(eps) = min{ j : R(j) < B eps } (000 Eq. 22), an exact integer."""
        with mpmath.workdps(DPS):
            eps_mp = checked_eps(eps)
            target = self.total * eps_mp
            for i, run in enumerate(self.runs):
                if less(self._after[i][0], target):  # R(stop) < B eps already: the crossing is in this piece
                    with mpmath.workdps(SEARCH_DPS):
                        n = self._inside(run, self._after[i][0], target)
                    return self._settle(n, target, eps_mp)
            if self.rest is None:
                raise SeriesError("the tail sum ties with B*eps at the end of the finite support")
            shifted = target / self.rest.total  # the same target, as a fraction of the tail's own sum
            if not shifted < 1:
                raise SeriesError(f"the tail sum ties with B*eps at t={self.cutoff} within the working precision")
            return self.cutoff + self.rest.trf(shifted)

    def _inside(self, run: Run, rest, target) -> int:
        """min{ j in (start, stop] : S(j) + rest < target }, given S(start) + rest >= target."""
        lo, hi = run.start, run.stop
        s_lo, s_hi, goal = run.suffix(lo)[0], mpmath.mpf(0), target - rest
        interpolate = not isinstance(run, DirectRun)  # direct suffixes are free: plain bisection
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if interpolate and s_hi > 0 and s_lo > goal > s_hi:  # log S is nearly linear near the crossing
                x = (mpmath.log(s_lo) - mpmath.log(goal)) / (mpmath.log(s_lo) - mpmath.log(s_hi))
                mid = min(max(lo + int(x * (hi - lo)), lo + 1), hi - 1)
            s = run.suffix(mid)[0]
            width = hi - lo
            if less(s + rest, target):
                hi, s_hi = mid, s
            else:
                lo, s_lo = mid, s
            interpolate = not isinstance(run, DirectRun) and 2 * (hi - lo) <= width  # else bisect next
        return hi

    def _settle(self, n: int, target, eps_mp) -> int:
        """The exact min{ j : R(j) < target } from a guess ``n`` (walking R(n+1) = R(n) - b_n), checked
        to hold clear of the error bounds: R(n) < target <= R(n-1), else a one-line tie.  As in
        :class:`Series`, values equal to the working precision count as equal (Eq. 22 is strict)."""
        here, err = self.remainder(n)
        for _ in range(WALK):
            if not less(here, target) and n < self.cutoff:  # the rough search stopped short
                here, n = here - weight(self._head, n), n + 1
            elif n > 0 and less(here + weight(self._head, n - 1), target):  # ... or went one too far
                here, n = here + weight(self._head, n - 1), n - 1
            else:
                break
        before = here + weight(self._head, n - 1) if n > 0 else None
        noise = MARGIN * (err + eps_mp * self.total_err)
        exact_tie = before is not None and not less(before, target) and not less(target, before)
        if not (target - here > noise and (before is None or exact_tie or before - target > noise)):
            raise SeriesError(f"the tail sum ties with B*eps at t={n} within the working precision")
        return n


def _shifted_series(head: Callable, tail_expr, cutoff: int, fast: bool, t) -> Series:
    """The engine's series of r(cutoff + s), s >= 0: its total is R(cutoff), its n(eps) counts from the cutoff."""
    shifted = sympy.sympify(tail_expr).subs(t, t + cutoff)
    shifted_head = lambda k: head(cutoff + k)  # noqa: E731
    series = closed_series(shifted_head, shifted, 0, fast) or Series(shifted_head, shifted, 0, t=t, fast=fast)
    series.refine()  # B at the full working precision before any n(eps) is taken from it
    return series


__all__ = ["PiecewiseSeries"]
