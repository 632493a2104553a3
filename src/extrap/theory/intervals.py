"""Where does a difference of two branches keep one sign?  Interval arithmetic on ranges of t.

``min(f, g)`` equals ``f`` from some distance on when f - g <= 0 for all large t.  The
asymptotic expansion (:mod:`extrap.theory.eventual`) says which argument wins as
t -> oo; the cutoff K from which it wins at *every* integer distance is what the series
engine relies on (terms below K come from the full min/max, the rest from the winner).
:func:`last_failure` finds it rigorously on 0 <= t <= top: mpmath's interval arithmetic
bounds d(t) on a range of t at once (outward rounding, so the bound is guaranteed); a
range whose bound has the right sign is done, one whose bound straddles 0 is halved,
down to single distances, checked one by one (exactly, with sympy, when even a point
interval cannot tell).  Searching from the top down, the first distance where the sign
may fail is the last one.  Beyond ``top`` the asymptotic expansion's leading term decides.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy
from mpmath import iv

from extrap.theory.scale import mentions

POINTS = 16  # ranges this narrow are checked distance by distance
BUDGET = 4000  # interval evaluations before giving up (a bound too loose to ever decide) ...
EXACT_BUDGET = 64  # ... and exact comparisons (each a sympy evalf)


class Unbounded(Exception):
    """The difference has a form interval arithmetic does not cover, or its bound never tightens."""


def compile_interval(expr, t) -> Callable:
    """``f(lo, hi)`` -> an interval enclosing ``expr`` for every real t in [lo, hi]."""
    e = sympy.sympify(expr)
    if e == t:
        return lambda lo, hi: iv.mpf([lo, hi])
    if not mentions(e, t):
        return _constant(e)
    args = [compile_interval(a, t) for a in e.args]
    if e.is_Add or e.is_Mul:
        op = (lambda a, b: a + b) if e.is_Add else (lambda a, b: a * b)

        def fold(lo, hi):
            out = args[0](lo, hi)
            for f in args[1:]:
                out = op(out, f(lo, hi))
            return out

        return fold
    if e.is_Pow and not mentions(e.exp, t):
        k = e.exp
        p = int(k) if k.is_Integer else _constant(k)(0, 0)
        return lambda lo, hi: args[0](lo, hi) ** p
    if e.is_Pow:
        return lambda lo, hi: iv.exp(args[1](lo, hi) * iv.log(args[0](lo, hi)))
    unary = {sympy.exp: iv.exp, sympy.log: iv.log, sympy.sin: iv.sin, sympy.cos: iv.cos, sympy.Abs: abs}
    fn = unary.get(type(e))
    if fn is None or len(args) != 1:
        raise Unbounded(f"no interval bound for {type(e).__name__}")
    return lambda lo, hi: fn(args[0](lo, hi))


def _constant(c) -> Callable:
    """An interval around the exact real constant ``c`` (30 digits, widened by 1e-25 of it)."""
    if not (c.is_number and c.is_extended_real and c.is_finite):
        raise Unbounded(f"constant {c} is not a finite real")
    if c.is_Rational:
        value = iv.mpf(c.p) / c.q
    else:
        x = sympy.Float(c.evalf(30))
        value = iv.mpf(str(x)) * iv.mpf([1 - 1e-25, 1 + 1e-25])
    return lambda lo, hi: value


def last_failure_monotone(d, t, sign: int, top: int, exact: Callable, eventual_sign: Callable) -> int | None:
    """:func:`last_failure`, and where the bound of ``d`` stays too loose (log(t+1) - log(t+2) on a wide
    range), the same from the sign of its derivative: beyond the last distance K where d' may not
    have its eventual sign, d is monotone, so sign*d either falls towards its limit (>= 0, by the
    expansion that chose the order: it holds on all of [K, top]) or rises (it holds from the first
    distance where it does, found by bisection).  ``eventual_sign(e)`` is the sign of e as t -> oo.
    """
    try:
        return last_failure(d, t, sign, top, exact)
    except Unbounded:
        pass
    slope = sympy.cancel(sympy.diff(d, t))  # logs of rational functions: one rational function
    rising = eventual_sign(slope) * sign > 0
    k = last_failure(slope, t, eventual_sign(slope), top, lambda k: None)
    start = 0 if k is None else k + 1
    if start > top:
        raise Unbounded(f"{d} is not monotone within reach")
    head = last_failure(d, t, sign, start - 1, exact) if start > 0 else None
    bound = compile_interval(d, t)

    def holds_at(k: int) -> bool:  # an undecided distance counts as failing
        return _holds(bound, k, k, sign) is True or exact(k) is True

    if not rising or holds_at(start):
        return head
    lo, hi = start, top  # fails at lo; holds at hi (else the order is not reached within top)
    if not holds_at(hi):
        raise Unbounded(f"{d} keeps its eventual sign only beyond {top}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds_at(mid) else (mid, hi)
    return lo


def _holds(bound: Callable, lo: int, hi: int, sign: int) -> bool | None:
    """True: sign * d >= 0 on all of [lo, hi]; False: < 0 on all of it; None: the bound cannot tell."""
    y = enclosure(bound, lo, hi)
    if y is None:
        return None
    lower, upper = (y[0], y[1]) if sign > 0 else (-y[1], -y[0])
    return True if lower >= 0 else False if upper < 0 else None


def enclosure(bound: Callable, lo: int, hi: int) -> tuple[float, float] | None:
    """(lower, upper) float bounds of d on every real t in [lo, hi] (None where interval arithmetic fails)."""
    try:
        y = bound(lo, hi)
        return float(y.a), float(y.b)
    except (ArithmeticError, ValueError, TypeError, AttributeError):  # log of a range through 0, a complex power
        return None


def last_failure(d, t, sign: int, top: int, exact: Callable[[int], bool | None]) -> int | None:
    """The largest integer k in [0, top] where ``sign * d(k) >= 0`` may fail, or None if it holds on all of them.

    ``exact(k)`` decides a single distance the interval cannot (True: holds; None: unknown,
    counted as a failure, which can only move the cutoff up).
    """
    bound = compile_interval(d, t)
    budget = [BUDGET, EXACT_BUDGET]

    def spend(i: int) -> None:
        budget[i] -= 1
        if budget[i] < 0:
            raise Unbounded(f"the bound of {d} stays too loose to decide its sign")

    def search(lo: int, hi: int) -> int | None:
        spend(0)
        state = _holds(bound, lo, hi, sign)
        if state is True:
            return None
        if state is False:
            return hi
        if hi - lo < POINTS:
            for k in range(hi, lo - 1, -1):
                spend(0)
                if _holds(bound, k, k, sign) is True:
                    continue
                spend(1)
                if exact(k) is not True:
                    return k
            return None
        mid = (lo + hi) // 2
        right = search(mid + 1, hi)
        return right if right is not None else search(lo, mid)

    return search(0, top)


__all__ = [
    "BUDGET",
    "EXACT_BUDGET",
    "POINTS",
    "Unbounded",
    "compile_interval",
    "enclosure",
    "last_failure",
    "last_failure_monotone",
]
