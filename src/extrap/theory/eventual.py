"""The eventual form of a piecewise bias: which branch holds for all large t, and from where.

Convergence of sum_t b_t depends only on the tail, so the tests look at the branch
of every ``Piecewise`` that is selected for all large distances (a window's
``-oo``, T5's last bucket).  The cutoff ``K`` from which that branch is selected
is what the series engine needs to split a sum into an exact head and a smooth
tail.

``min``/``max`` are first read as a ``Piecewise`` on the comparison of their
arguments.  When that comparison switches more than once (``min(-log(n), -t/1000)``
picks -t/1000 at t = 0, -log n up to t ~ 9118, then -t/1000 for good), the
arguments are ordered as t -> oo by the sign of the leading term of their
difference's asymptotic expansion (:mod:`extrap.theory.asymptotics`), and the cutoff
is where that order last fails on a geometric grid of distances up to 2**64, refined
by bisection.  Arguments whose difference only oscillates (``sin``) stay undecided.
"""

from __future__ import annotations

import sympy
from sympy.core.evalf import PrecisionExhausted

from extrap.theory.scale import contains

# Conditions are evaluated at several huge distances; they must all agree.  Enough of them
# that a condition that keeps switching (cos(t) < 0.4) is caught rather than taken for eventual.
_HUGE = (10**30, 10**30 + 1, 7 * 10**45 + 3, 10**100) + tuple(10**k + 3 for k in range(33, 99, 6))
_SPREAD = tuple(2**k + 1 for k in range(3, 64, 3))  # offsets of the one-switch spot checks
_SEARCH_TOP = 2**64


class Undecided(Exception):
    """A Piecewise condition whose eventual truth value cannot be decided."""


_SIGN_TRUTH = {"<": -1, "<=": -1, ">": 1, ">=": 1}


def _truth(cond, t, value) -> bool | None:
    quick = _numeric_truth(cond, t, value)
    if quick is not None:
        return quick
    try:
        v = cond.subs(t, sympy.Integer(value)) if isinstance(cond, sympy.Basic) else cond
    except (TypeError, ValueError, ArithmeticError):  # e.g. 1/t < 1 at t = 0 compares zoo
        return None
    if v is sympy.true or v is True:
        return True
    if v is sympy.false or v is False:
        return False
    return None


def _numeric_truth(cond, t, value) -> bool | None:
    """An inequality decided from lhs - rhs at guaranteed precision (None for a tie or anything else).

    Substituting a huge integer exactly can cost minutes (t**626513.9 at t = 10**100 has 6e7
    digits); evalf with ``strict`` either knows the sign of the difference or says it cannot.
    """
    if not isinstance(cond, sympy.core.relational.Relational) or cond.rel_op not in _SIGN_TRUTH:
        return None
    try:
        d = (cond.lhs - cond.rhs).evalf(30, subs={t: sympy.Integer(value)}, strict=True)
    except (PrecisionExhausted, TypeError, ValueError, ArithmeticError):
        return None
    if not (d.is_Float and d.is_finite) or d == 0:
        return None
    return (1 if d > 0 else -1) == _SIGN_TRUTH[cond.rel_op]


def eventual_truth(cond, t) -> bool:
    """True/False if ``cond`` has that value at every huge distance we try."""
    vals = {_truth(cond, t, n) for n in _HUGE}
    if len(vals) != 1 or None in vals:
        raise Undecided(f"cannot decide the condition {cond} for large t")
    return vals.pop()


def switch_point(cond, t, truth: bool) -> int:
    """Smallest K with cond(t) == truth for t >= K, assuming one switch (thresholds)."""
    if cond in (sympy.true, sympy.false, True, False):
        return 0
    top = _SEARCH_TOP if _truth(cond, t, _SEARCH_TOP) == truth else _HUGE[0]
    if _truth(cond, t, 0) == truth:
        lo, hi = -1, 0
    else:
        lo, hi = 0, top  # cond(lo) != truth, cond(hi) == truth
        while hi - lo > 1:
            mid = (lo + hi) // 2
            v = _truth(cond, t, mid)
            if v is None:
                raise Undecided(f"cannot evaluate the condition {cond} at t={mid}")
            lo, hi = (lo, mid) if v == truth else (mid, hi)
    k = hi
    for probe in (k, k + 1, 2 * k + 1, k + 1000, 10 * k + 7) + tuple(k + d for d in _SPREAD):  # one switch?
        if _truth(cond, t, probe) != truth:
            raise Undecided(f"the condition {cond} switches more than once")
    return k


def eventual(expr, t) -> tuple[sympy.Expr, int]:
    """(branch of ``expr`` that holds for all large t, cutoff K from which it holds)."""
    expr = sympy.sympify(expr)
    if not contains(expr, _BRANCHING):
        return expr, 0
    if not contains(expr, _EXTREMA):
        return _walk(expr, t, None)
    try:  # min/max of user formulas become branches
        return _walk(expr.rewrite(sympy.Piecewise), t, None)
    except Undecided:  # their comparison switches more than once: order them as t -> oo instead
        return _walk(expr, t, _eventual_extremum)


_EXTREMA = (sympy.Min, sympy.Max)
_BRANCHING = (sympy.Piecewise, sympy.Min, sympy.Max)


def _walk(expr, t, extremum) -> tuple[sympy.Expr, int]:
    """The eventual form of ``expr``: each Piecewise by its conditions, each min/max by ``extremum``."""
    cut = [0]

    def walk(e):
        if isinstance(e, sympy.Piecewise):
            for branch, cond in e.args:
                truth = eventual_truth(cond, t)
                cut[0] = max(cut[0], switch_point(cond, t, truth))
                if truth:
                    return walk(branch)
            raise Undecided(f"no branch of {e} holds for large t")
        if extremum is not None and isinstance(e, _EXTREMA):
            best, k = extremum(e, [walk(a) for a in e.args], t)
            cut[0] = max(cut[0], k)
            return best
        if not e.args or not contains(e, _BRANCHING):
            return e
        return e.func(*[walk(a) for a in e.args])

    out = walk(expr)
    return out, cut[0]


# ---------------------------------------------------------------------------
# min/max ordered as t -> oo
# ---------------------------------------------------------------------------
_GRID = tuple(sorted({*range(65), *(int(64 * 2 ** (k / 4)) for k in range(1, 4 * 58 + 1))}))  # 0 .. 2**64


def _eventual_extremum(e, args: list, t) -> tuple[sympy.Expr, int]:
    """(the argument of min/max ``e`` that is the extreme one for all large t, from which t on)."""
    is_min = isinstance(e, sympy.Min)
    best = args[0]
    for a in args[1:]:
        s = _order(a, best, t, e)
        if (s < 0) if is_min else (s > 0):
            best = a
    rivals = [a for a in args if a is not best]
    return best, max((_holds_from(best, a, t, is_min, e) for a in rivals), default=0)


def _order(a, b, t, whole) -> int:
    """The sign of a - b for all large t (0: they coincide) from the leading term of its expansion."""
    from extrap.theory import asymptotics as asy  # lazy: asymptotics needs nothing from here

    try:
        f = asy.expand(a - b, t)
        if f.terms:  # every term is above the error bound, so the leading one sets the sign
            return asy.sign(f.lead[1])
    except asy.GiveUp as why:
        raise Undecided(f"cannot order {a} and {b} in {whole} as t -> oo ({why})") from None
    if f.err is None:
        return 0
    why = f"their difference is only known up to O({_words(f.err)})"
    if contains(a - b, (sympy.sin, sympy.cos)):
        why += ", an oscillation (sin, cos), so they may swap again and again"
    raise Undecided(f"cannot order {a} and {b} in {whole} as t -> oo: {why}")


def _words(m) -> str:
    """A monomial of the scale t, ln t, ln ln t, ... in words ('1', 'ln t', 't^(1/2)*ln t')."""
    pf = m.power_form()
    if pf is None:
        return "an exponential"
    names = ("t", "ln t", "ln ln t", "ln ln ln t", "ln^(4) t", "ln^(5) t")
    parts = [
        n if e == 1 else f"{n if ' ' not in n else f'({n})'}^{e if e.is_Integer and e > 0 else f'({e})'}"
        for n, e in zip(names, pf)
        if e != 0
    ]
    return "*".join(parts) or "1"


def _holds_from(best, other, t, is_min: bool, whole) -> int:
    """Smallest K with best <= other (>= for max) at every t >= K: the last failure on the grid, then bisection."""
    cond = sympy.Le(best, other, evaluate=False) if is_min else sympy.Ge(best, other, evaluate=False)
    lo = None  # the largest grid distance where the order fails
    for i in range(len(_GRID) - 1, -1, -1):
        v = _truth(cond, t, _GRID[i])
        if v is None:
            raise Undecided(f"cannot evaluate {cond} at t={_GRID[i]}")
        if not v:
            lo = i
            break
    if lo is None:
        return 0
    if lo == len(_GRID) - 1:
        raise Undecided(f"{cond} fails at t = 2**64: {whole} has no eventual argument within reach")
    a, b = _GRID[lo], _GRID[lo + 1]  # fails at a, holds at b and beyond
    while b - a > 1:
        mid = (a + b) // 2
        v = _truth(cond, t, mid)
        if v is None:
            raise Undecided(f"cannot evaluate {cond} at t={mid}")
        a, b = (a, mid) if v else (mid, b)
    for probe in (b, b + 1, 2 * b + 1, b + 1000) + tuple(b + d for d in _SPREAD):  # one switch there?
        if _truth(cond, t, probe) is not True:
            raise Undecided(f"{cond} switches more than once after t={a}")
    return b
