"""The eventual form of a piecewise bias: which branch holds for all large t, and from where.

Convergence of sum_t b_t depends only on the tail, so the tests look at the branch
of every ``Piecewise`` that is selected for all large distances (a window's
``-oo``, T5's last bucket).  The cutoff ``K`` from which that branch is selected
is what the series engine needs to split a sum into an exact head and a smooth
tail.
"""

from __future__ import annotations

import sympy
from sympy.core.evalf import PrecisionExhausted

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
    if expr.has(sympy.Min, sympy.Max):
        expr = expr.rewrite(sympy.Piecewise)  # min/max of user formulas become branches
    if not expr.has(sympy.Piecewise):
        return expr, 0
    cut = [0]

    def walk(e):
        if isinstance(e, sympy.Piecewise):
            for branch, cond in e.args:
                truth = eventual_truth(cond, t)
                cut[0] = max(cut[0], switch_point(cond, t, truth))
                if truth:
                    return walk(branch)
            raise Undecided(f"no branch of {e} holds for large t")
        if not e.args or not e.has(sympy.Piecewise):
            return e
        return e.func(*[walk(a) for a in e.args])

    out = walk(expr)
    return out, cut[0]
