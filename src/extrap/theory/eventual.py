"""The eventual form of a piecewise bias: which branch holds for all large t, and from where.

Convergence of sum_t b_t depends only on the tail, so the tests look at the branch
of every ``Piecewise`` that is selected for all large distances (a window's
``-oo``, T5's last bucket).  The cutoff ``K`` from which that branch is selected
is what the series engine needs to split a sum into an exact head and a smooth
tail.

``min``/``max`` (user formulas) are not conditions to sample: their eventual argument is
the one that is the least (greatest) as t -> oo, by the sign of the leading term of the
arguments' difference (:mod:`extrap.theory.asymptotics`; nested ones from the inside
out), and their cutoff is one past the last distance where another argument is still
more extreme, found by interval arithmetic over 0..2**64 (:mod:`extrap.theory.intervals`),
however many times the arguments swap before it: ``min(-log(n), -t/1000)`` picks
-t/1000 at t = 0, -log n from t = 1, and -t/1000 again for good from t = 9119.  Arguments
whose difference only oscillates (``sin``) stay undecided; a cutoff beyond 2**64 or one
the intervals cannot bound is None (the verdict stands, the sums are not taken).
"""

from __future__ import annotations

import sympy
from sympy.core.evalf import PrecisionExhausted

from extrap.theory.intervals import Unbounded, last_failure_monotone
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


def _threshold(cond, t) -> tuple[bool, int] | None:
    """(eventual truth, switch point) of ``t < c``, ``t <= c``, ``t > c``, ``t >= c`` (c a number), exactly.

    For an integer t >= 0: t < c and t >= c switch at ceil(c), t <= c and t > c at floor(c) + 1.
    """
    if not isinstance(cond, sympy.core.relational.Relational) or cond.rel_op not in _SIGN_TRUTH:
        return None
    op, c = cond.rel_op, cond.rhs
    if cond.rhs == t:  # c < t is t > c
        op, c = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op], cond.lhs
    elif cond.lhs != t:
        return None
    if not (c.is_Rational or (c.is_Float and c.is_finite)):
        return None
    k = sympy.ceiling(c) if op in ("<", ">=") else sympy.floor(c) + 1
    return op in (">", ">="), max(int(k), 0)


def eventual_truth(cond, t) -> bool:
    """True/False if ``cond`` has that value at every huge distance we try."""
    if cond is sympy.true or cond is sympy.false or isinstance(cond, bool):  # a Piecewise's last branch
        return bool(cond)  # what substituting each distance gives (a window's fallback: 15 subs saved)
    known = _threshold(cond, t)
    if known is not None:
        return known[0]
    vals = {_truth(cond, t, n) for n in _HUGE}
    if len(vals) != 1 or None in vals:
        raise Undecided(f"cannot decide the condition {cond} for large t")
    return vals.pop()


def switch_point(cond, t, truth: bool) -> int:
    """Smallest K with cond(t) == truth for t >= K, assuming one switch (thresholds)."""
    if cond in (sympy.true, sympy.false, True, False):
        return 0
    known = _threshold(cond, t)
    if known is not None:
        return known[1]
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


def eventual(expr, t) -> tuple[sympy.Expr, int | None]:
    """(branch of ``expr`` that holds for all large t, cutoff K from which it holds).

    K is None when the branch is known but not where it starts (a min/max whose arguments
    swap beyond 2**64, or whose difference interval arithmetic cannot bound).
    """
    expr = sympy.sympify(expr)
    if not contains(expr, _BRANCHING):
        return expr, 0
    return _walk(expr, t)


_EXTREMA = (sympy.Min, sympy.Max)
_BRANCHING = (sympy.Piecewise, sympy.Min, sympy.Max)


def _walk(expr, t) -> tuple[sympy.Expr, int | None]:
    """The eventual form of ``expr``: each Piecewise by its conditions, each min/max by its eventual argument."""
    cut: list = [0]  # None once some cutoff is unknown

    def record(k: int | None) -> None:
        cut[0] = None if k is None or cut[0] is None else max(cut[0], k)

    def walk(e):
        if isinstance(e, sympy.Piecewise):
            for branch, cond in e.args:
                truth = eventual_truth(cond, t)
                record(switch_point(cond, t, truth))
                if truth:
                    return walk(branch)
            raise Undecided(f"no branch of {e} holds for large t")
        if isinstance(e, _EXTREMA):  # arguments first: min(max(a, b), c) compares max's winner with c
            best, k = _eventual_extremum(e, [walk(a) for a in e.args], t)
            record(k)
            return best
        if not e.args or not contains(e, _BRANCHING):
            return e
        return e.func(*[walk(a) for a in e.args])

    out = walk(expr)
    return out, cut[0]


# ---------------------------------------------------------------------------
# min/max ordered as t -> oo
# ---------------------------------------------------------------------------
def _eventual_extremum(e, args: list, t) -> tuple[sympy.Expr, int | None]:
    """(the argument of min/max ``e`` that is the extreme one for all large t, from which t on).

    Its rivals are ordered by the leading term of the difference's asymptotic expansion;
    the cutoff is one past the last distance where some rival is still more extreme, found
    by interval arithmetic on 0..2**64 (:func:`extrap.theory.intervals.last_failure`).
    """
    is_min = isinstance(e, sympy.Min)
    best = args[0]
    for a in args[1:]:
        s = _order(a, best, t, e)
        if (s < 0) if is_min else (s > 0):
            best = a
    cutoffs = [_holds_from(best, a, t, is_min) for a in args if a is not best]
    return best, None if None in cutoffs else max(cutoffs, default=0)


def _order(a, b, t, whole) -> int:
    """The sign of a - b for all large t (0: they coincide) from the leading term of its expansion."""
    from extrap.theory import asymptotics as asy  # lazy: asymptotics needs nothing from here

    try:
        f = asy.expand(a - b, t)
        if f.terms:  # every term is above the error bound, so the leading one sets the sign
            return asy.sign(f.lead[1])
    except asy.GiveUp as why:
        return _sampled_order(a, b, t, whole, str(why))
    if f.err is None:
        return 0
    why = f"their difference is only known up to O({_words(f.err)})"
    if contains(a - b, (sympy.sin, sympy.cos)):
        why += ", an oscillation (sin, cos), so they may swap again and again"
    raise Undecided(f"cannot order {a} and {b} in {whole} as t -> oo: {why}")


def _sampled_order(a, b, t, whole, why: str) -> int:
    """Beyond the expansion engine: the order that a < b and a > b take at every huge distance tried."""
    try:
        below, above = eventual_truth(sympy.Lt(a, b), t), eventual_truth(sympy.Gt(a, b), t)
    except Undecided:
        raise Undecided(f"cannot order {a} and {b} in {whole} as t -> oo ({why})") from None
    if below == above:
        raise Undecided(f"cannot order {a} and {b} in {whole} as t -> oo ({why})")
    return -1 if below else 1


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


def _holds_from(best, other, t, is_min: bool) -> int | None:
    """Smallest K with best <= other (>= for max) at every distance t >= K, or None where it cannot be
    bounded: interval arithmetic on 0..2**64, exact comparisons where a point interval cannot tell."""
    cond = sympy.Le(best, other, evaluate=False) if is_min else sympy.Ge(best, other, evaluate=False)
    sign = -1 if is_min else 1
    try:
        k = last_failure_monotone(
            best - other, t, sign, _SEARCH_TOP, lambda k: _truth(cond, t, k), lambda e: _lead_sign(e, t)
        )
    except Unbounded:
        return None
    if k is None:
        return 0
    return k + 1 if k < _SEARCH_TOP else None  # still failing at 2**64: the switch lies beyond reach


def _lead_sign(e, t) -> int:
    """The sign of ``e`` (an expression in t) for all large t, from its expansion's leading term."""
    from extrap.theory import asymptotics as asy

    try:
        f = asy.expand(e, t)
        return asy.sign(f.lead[1])
    except asy.GiveUp as why:
        raise Unbounded(f"no eventual sign for {e} ({why})") from None
