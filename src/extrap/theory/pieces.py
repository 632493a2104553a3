"""Where does each branch of a min/max (or Piecewise) formula hold?  Its pieces on 0 <= t < K.

:func:`extrap.theory.eventual.eventual` gives the branch r(t) takes for good from the cutoff
K on.  Below K the formula may switch between its arguments any number of times
(``min(-2*log(n), -t/9000)``: -t/9000 at t = 0, -2 ln n on 1..221551).  When K is too far to
sum term by term, the sum over 0..K-1 is taken piece by piece: :func:`split` covers
[0, K) with maximal ranges on which one branch-free expression is r(t), found by interval
arithmetic (:mod:`extrap.theory.intervals`): a range on which every min/max of the formula
has an argument that is the extreme one over the whole range (every Piecewise condition
one truth value) is a piece; any other range is halved, down to a few distances, each
then decided on its own.  A distance that even a point interval cannot decide (a tie, a
bound too loose) is summed term by term from the formula itself, so no wrong branch is
ever summed.  The switch points are exact integers: the first distance of each piece.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from extrap.theory.intervals import POINTS, Unbounded, compile_interval, enclosure
from extrap.theory.scale import contains

SCAN_BUDGET = 20_000  # ranges examined before giving up (a bound that never tightens)
MAX_POINTS = 200_000  # distances left to term-by-term summation, at most

_BRANCHING = (sympy.Piecewise, sympy.Min, sympy.Max)
_SIGNS = {"<": (-1, True), "<=": (-1, False), ">": (1, True), ">=": (1, False)}  # sign of lhs - rhs, strict


@dataclass(frozen=True)
class Piece:
    """r(t) = ``branch`` for start <= t < stop; ``branch`` None: summed term by term from the formula."""

    start: int
    stop: int
    branch: sympy.Expr | None


class _Selector:
    """The branch-free form of a formula on a range of distances, where interval arithmetic decides it."""

    def __init__(self, t):
        self.t = t
        self._bounds: dict = {}

    def _enclose(self, d, lo: int, hi: int) -> tuple[float, float] | None:
        if d not in self._bounds:
            try:
                self._bounds[d] = compile_interval(d, self.t)
            except Unbounded:
                self._bounds[d] = None  # never decides: the range is halved down to single distances
        bound = self._bounds[d]
        return enclosure(bound, lo, hi) if bound is not None else None

    def select(self, e, lo: int, hi: int):
        """r(t) on [lo, hi] without min/max/Piecewise, or None where the bounds cannot tell."""
        if not contains(e, _BRANCHING):
            return e
        if isinstance(e, (sympy.Min, sympy.Max)):
            args = [self.select(a, lo, hi) for a in e.args]
            if any(a is None for a in args):
                return None
            return self._extreme(args, -1 if isinstance(e, sympy.Min) else 1, lo, hi)
        if isinstance(e, sympy.Piecewise):
            for branch, cond in e.args:
                truth = self._truth(cond, lo, hi)
                if truth is None:
                    return None
                if truth:
                    return self.select(branch, lo, hi)
            return None
        args = [self.select(a, lo, hi) for a in e.args]
        return None if any(a is None for a in args) else e.func(*args)

    def _extreme(self, args: list, sign: int, lo: int, hi: int):
        """The argument that is <= (min, sign -1) or >= (max) every other one on all of [lo, hi]."""
        for a in args:
            ok = True
            for b in args:
                if b is a:
                    continue
                y = self._enclose(a - b, lo, hi)
                if y is None or not (y[1] <= 0 if sign < 0 else y[0] >= 0):
                    ok = False
                    break
            if ok:
                return a
        return None

    def _truth(self, cond, lo: int, hi: int) -> bool | None:
        """A condition's one truth value on [lo, hi] (None: it may change there, or it is not an inequality)."""
        if cond in (sympy.true, sympy.false, True, False):
            return bool(cond)
        if not isinstance(cond, sympy.core.relational.Relational) or cond.rel_op not in _SIGNS:
            return None
        y = self._enclose(cond.lhs - cond.rhs, lo, hi)
        if y is None:
            return None
        sign, strict = _SIGNS[cond.rel_op]
        low, high = (y[0], y[1]) if sign > 0 else (-y[1], -y[0])  # bounds of sign * (lhs - rhs)
        if low > 0 or (low >= 0 and not strict):
            return True
        if high < 0 or (high <= 0 and strict):
            return False
        return None


def split(expr, t, stop: int) -> list[Piece]:
    """Pieces covering 0 <= t < ``stop`` in order, adjacent ones with the same branch merged.

    Raises :class:`Unbounded` when the ranges do not resolve within ``SCAN_BUDGET`` bounds or leave
    more than ``MAX_POINTS`` distances to term-by-term summation.
    """
    expr = sympy.sympify(expr)
    selector = _Selector(t)
    out: list[Piece] = []
    stack, budget, points = [(0, stop - 1)] if stop > 0 else [], SCAN_BUDGET, 0
    while stack:
        lo, hi = stack.pop()
        budget -= 1
        if budget < 0:
            raise Unbounded(f"the switch points of {expr} below t={stop} could not be bounded by interval arithmetic")
        branch = selector.select(expr, lo, hi)
        if branch is None and hi - lo >= POINTS:
            mid = (lo + hi) // 2
            stack += [(mid + 1, hi), (lo, mid)]  # left half first: pieces come out in order
            continue
        if branch is not None:
            _append(out, Piece(lo, hi + 1, branch))
            continue
        for k in range(lo, hi + 1):  # a few distances around a switch: each on its own
            budget -= 1
            one = selector.select(expr, k, k)
            points += one is None
            _append(out, Piece(k, k + 1, one))
        if points > MAX_POINTS:
            raise Unbounded(f"the branches of {expr} swap too often below t={stop} to sum term by term")
    return out


def _append(out: list[Piece], p: Piece) -> None:
    last = out[-1] if out else None
    if last is not None and last.stop == p.start and (last.branch is None) == (p.branch is None):
        if p.branch is None or last.branch == p.branch:
            out[-1] = Piece(last.start, p.stop, last.branch)
            return
    out.append(p)


__all__ = ["MAX_POINTS", "SCAN_BUDGET", "Piece", "split"]
