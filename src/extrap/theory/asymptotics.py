"""Asymptotic expansions of a bias r(t) as t -> oo, in the scale t, ln t, ln ln t, ...

The convergence tests of :mod:`extrap.theory.convergence` only need to know how
``-r(t)`` compares with ``ln n``, ``ln ln n``, ... (the Cauchy/Bertrand log-scale
tests).  ``sympy.limit`` answers that, but takes up to a second per level on
expressions like ``ln(t+2) + ln ln(t+2)`` and sometimes returns unsimplified
results.  This module computes a truncated asymptotic expansion instead, which
answers every level at once in about a millisecond.  When an expression falls
outside what it handles it raises :class:`GiveUp`, and the caller falls back to
``sympy.limit``.

The monomials of the scale (t^a0 L1^a1 ... and exponentials of such) and their
order are in :mod:`extrap.theory.scale`.  An :class:`Expansion` is ``sum c_i M_i + O(err)`` with every ``M_i > err``;
``err=None`` means the sum is exact.  Bounded oscillations (sin, cos of a growing
argument) enter as ``O(1)``, which is all the verdicts need: a bounded change of
``r`` multiplies ``b_t`` by a bounded factor.
"""

from __future__ import annotations

from functools import lru_cache

import sympy

from extrap.theory.scale import (
    DEPTH,
    ONE,
    T_MONO,
    GiveUp,
    Mono,
    as_sympy,
    is_zero,
    log_scale,
    mentions,
    mono_max,
    sign,
)

SERIES_TARGET_POWER = 2  # expand log(1+u), (1+u)^k, exp(u) until u^N is below t^-2 ...
SERIES_MAX_TERMS = 4  # ... or after this many terms (the verdicts need -r only up to o(1))


# ---------------------------------------------------------------------------
# expansions
# ---------------------------------------------------------------------------
class Expansion:
    """sum c_i M_i + O(err), terms sorted from largest to smallest, all above err."""

    __slots__ = ("terms", "err")

    def __init__(self, terms=(), err: Mono | None = None, distinct: int = 0):
        """``distinct``: the first that many ``terms`` are already pairwise different monomials (an expansion's
        own terms), so only the others are compared with them: the same merge, without its n² comparisons
        (a sum of K Gaussians, TISA's kernels, is K additions)."""
        merged = _merge(tuple(terms), distinct)
        out = [(m, c) for m, c in merged if not is_zero(c) and (err is None or m.cmp(err) > 0)]
        out.sort(key=_TermKey)
        self.terms = tuple(out)
        self.err = err

    @staticmethod
    def _ordered(terms: list, err: Mono | None) -> Expansion:
        """``terms`` kept as they are: what the constructor makes of terms from one expansion, in its order, whose
        monomials are rational (:func:`_rational_monomials`) and whose coefficients are not 0.  They were merged,
        checked against ``err`` and sorted when that expansion was made; the order of rational monomials is exact
        and total, so no term merges, each is still above ``err`` and the sort keeps them where they are."""
        out = object.__new__(Expansion)
        out.terms, out.err = tuple(terms), err
        return out

    @staticmethod
    def const(c) -> Expansion:
        return Expansion([(ONE, c)])

    @property
    def lead(self):
        if not self.terms:
            raise GiveUp("no leading term (the expression cancels to its error term)")
        return self.terms[0]

    def __add__(self, other: Expansion) -> Expansion:
        return Expansion(self.terms + other.terms, mono_max(self.err, other.err), distinct=len(self.terms))

    def __neg__(self) -> Expansion:
        return self.scale(-1)

    def __sub__(self, other: Expansion) -> Expansion:
        return self + (-other)

    def scale(self, c) -> Expansion:
        if is_zero(c):
            return Expansion()
        terms = [(m, c * k) for m, k in self.terms]
        if _rational_monomials(self.terms) and all(isinstance(k, sympy.Rational) for _, k in terms):
            return Expansion._ordered(terms, self.err)  # nonzero rationals: each product is a nonzero rational
        return Expansion(terms, self.err, distinct=len(self.terms))

    def times_mono(self, mono: Mono) -> Expansion:
        terms = [(m * mono, c) for m, c in self.terms]  # one factor for all: still pairwise different
        return Expansion(terms, None if self.err is None else self.err * mono, distinct=len(terms))

    def __mul__(self, other: Expansion) -> Expansion:
        if not self.terms and self.err is None or not other.terms and other.err is None:
            return Expansion()  # exact zero
        errs = []
        if self.err is not None:
            errs.append(self.err * (other.terms[0][0] if other.terms else other.err))
        if other.err is not None:
            errs.append(other.err * (self.terms[0][0] if self.terms else self.err))
        err = None
        for e in errs:
            err = mono_max(err, e)
        terms = [(m1 * m2, c1 * c2) for m1, c1 in self.terms for m2, c2 in other.terms]
        return Expansion(terms, err)

    def split(self):
        """(c, M, u) with self = c*M*(1 + u) and u -> 0."""
        m, c = self.lead
        inv = m.inv()
        u_terms = [(mi * inv, ci / c) for mi, ci in self.terms[1:]]
        return c, m, Expansion(u_terms, None if self.err is None else self.err * inv)

    def growing(self) -> Expansion:
        """The terms that tend to infinity."""
        kept = [(m, c) for m, c in self.terms if m.cmp(ONE) > 0]
        return Expansion._ordered(kept, None) if _rational_monomials(self.terms) else Expansion(kept)

    def constant(self):
        for m, c in self.terms:
            if m.cmp(ONE) == 0:
                return c
        return sympy.Integer(0)

    def small(self) -> Expansion:
        """The terms and error that tend to zero (the error must be o(1))."""
        kept = [(m, c) for m, c in self.terms if m.cmp(ONE) < 0]
        return Expansion._ordered(kept, self.err) if _rational_monomials(self.terms) else Expansion(kept, self.err)

    def __repr__(self) -> str:
        s = " + ".join(f"{c}*{m}" for m, c in self.terms) or "0"
        return s + (f" + O({self.err})" if self.err is not None else "")


def _rational_monomials(terms) -> bool:
    return all(m.exact_key() is not None for m, _ in terms)


def _merge(terms: tuple, distinct: int) -> list[list]:
    """[monomial, summed coefficient] per different monomial, in order of first appearance: each term joins the
    first earlier one with the same monomial (``cmp`` 0), or starts its own.

    Monomials whose exponents' coefficients are all rational are equal exactly when their canonical forms are
    (:meth:`Mono.exact_key`), so they are matched through a dict; every comparison that could give up (one side
    not rational) is still made, in the original order, so the result and any GiveUp are the plain loop's."""
    merged: list[list] = []
    by_key: dict = {}
    others: list[int] = []  # positions of monomials without an exact key, ascending
    for n, (m, c) in enumerate(terms):
        key = m.exact_key()
        hit = by_key.get(key) if key is not None and n >= distinct else None
        if n >= distinct:
            for pos in range(len(merged)) if key is None else others:
                if hit is not None and pos > hit:
                    break
                if merged[pos][0].cmp(m) == 0:
                    hit = pos
                    break
        if hit is not None:
            merged[hit][1] = merged[hit][1] + c
            continue
        if key is None:
            others.append(len(merged))
        else:
            by_key[key] = len(merged)
        merged.append([m, as_sympy(c)])
    return merged


class _TermKey:
    __slots__ = ("m",)

    def __init__(self, item):
        self.m = item[0]

    def __lt__(self, other):
        return self.m.cmp(other.m) > 0


def _series(u: Expansion, coeffs) -> Expansion:
    """sum_{j>=1} coeffs(j) u^j for u -> 0, truncated once u^N is below t^-SERIES_TARGET_POWER."""
    if not u.terms:
        return Expansion([], u.err)  # u is exactly 0 or only an error term: series = O(err)
    lead = u.terms[0][0]
    if lead.cmp(ONE) >= 0:
        raise GiveUp("series argument does not tend to 0")
    target = T_MONO ** (-SERIES_TARGET_POWER)
    out = Expansion()
    power = Expansion.const(1)
    j = 0
    while True:
        j += 1
        power = power * u
        out = out + power.scale(coeffs(j))
        nxt = lead ** (j + 1)
        if nxt.cmp(target) <= 0 or j >= SERIES_MAX_TERMS:
            break
    return out + Expansion([], mono_max(nxt, u.err))


def _log1p(u: Expansion) -> Expansion:
    return _series(u, lambda j: sympy.Rational((-1) ** (j + 1), j))


def _pow1p(u: Expansion, k) -> Expansion:
    return Expansion.const(1) + _series(u, lambda j: sympy.binomial(k, j))


def _expm1(u: Expansion) -> Expansion:
    return _series(u, lambda j: sympy.Rational(1, sympy.factorial(j)))


def _log_mono(m: Mono) -> Expansion:
    """log M = sum c_P P as an expansion (each P is itself a monomial of the scale)."""
    return Expansion([(Mono.power(pm), c) for pm, c in m.logm])


def _exp(f: Expansion) -> Expansion:
    if f.err is not None and f.err.cmp(ONE) >= 0:
        raise GiveUp("exp of an expression known only up to O(1)")
    logm = []
    for m, c in f.growing().terms:
        pf = m.power_form()
        if pf is None:
            raise GiveUp("exp of an exponential (nested exp)")
        logm.append((_pm_of(pf), c))
    big = Mono(logm)
    rest = Expansion.const(1) + _expm1(f.small())
    return rest.times_mono(big).scale(sympy.exp(f.constant()))


def _pm_of(pf) -> tuple:
    """Power-form exponents (a0..a5) as a power-monomial tuple of length DEPTH."""
    pf = list(pf) + [sympy.Integer(0)] * (DEPTH - len(pf))
    return tuple(sympy.sympify(e) for e in pf[:DEPTH])


def _log(f: Expansion) -> Expansion:
    c, m, u = f.split()
    if sign(c) <= 0:
        raise GiveUp("logarithm of an eventually non-positive expression")
    return Expansion.const(sympy.log(c)) + _log_mono(m) + _log1p(u)


def _pow(f: Expansion, k) -> Expansion:
    k = sympy.sympify(k)
    if k.is_Integer and 0 <= k <= 8:
        out = Expansion.const(1)
        for _ in range(int(k)):
            out = out * f
        return out
    c, m, u = f.split()
    if not k.is_Integer and sign(c) <= 0:
        raise GiveUp("non-integer power of an eventually negative expression")
    return _pow1p(u, k).times_mono(m**k).scale(c**k)


# ---------------------------------------------------------------------------
# sympy expression -> expansion
# ---------------------------------------------------------------------------
def expand(expr, t) -> Expansion:
    """Asymptotic expansion of ``expr`` as ``t -> oo``; raises GiveUp when unsupported."""
    return _expand(sympy.sympify(expr), t)


def clear() -> None:
    """Forget the expansions kept by expression (benchmarks measure cold runs)."""
    _expand.cache_clear()


@lru_cache(maxsize=4096)
def _expand(e, t) -> Expansion:
    if not mentions(e, t):
        if not (e.is_extended_real is not False and e.is_finite is not False):
            raise GiveUp(f"constant {e} is not a finite real")
        if e.has(sympy.oo, -sympy.oo, sympy.zoo, sympy.nan):
            raise GiveUp("infinite constant")
        return Expansion() if is_zero(e) else Expansion.const(e)
    if e == t:
        return Expansion([(T_MONO, 1)])
    if e.is_Add:  # one merge of every argument's terms: the same expansion as adding them one at a time
        parts = [_expand(a, t) for a in e.args]
        err = None
        for part in parts:
            err = mono_max(err, part.err)
        return Expansion([term for part in parts for term in part.terms], err)
    if e.is_Mul:
        out = Expansion.const(1)
        for a in e.args:
            out = out * _expand(a, t)
        return out
    if e.is_Pow:
        base, k = e.args
        if not mentions(k, t):
            return _pow(_expand(base, t), k)
        return _exp(_expand(k * sympy.log(base), t))  # b^k = exp(k ln b)
    if isinstance(e, sympy.exp):
        return _exp(_expand(e.args[0], t))
    if isinstance(e, sympy.log):
        if len(e.args) != 1:
            raise GiveUp("log with a base")
        return _log(_expand(e.args[0], t))
    if isinstance(e, (sympy.sin, sympy.cos)):
        return Expansion([], ONE)  # bounded: O(1)
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        inner = _expand(e.args[0], t)  # floor(f) = f - frac(f) = f + O(1)
        return Expansion(inner.growing().terms + ((ONE, inner.constant()),), mono_max(inner.err, ONE))
    if isinstance(e, sympy.Abs):
        inner = _expand(e.args[0], t)
        return inner if sign(inner.lead[1]) > 0 else -inner
    raise GiveUp(f"unsupported function {type(e).__name__}")


__all__ = ["DEPTH", "ONE", "T_MONO", "Expansion", "GiveUp", "Mono", "expand", "is_zero", "log_scale", "sign"]
