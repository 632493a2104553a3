"""The asymptotic scale t, ln t, ln ln t, ...: its monomials and how they compare as t -> oo.

Monomials of the scale are ``exp(E) * t^a0 * L1^a1 * ... * L5^a5`` with
``Lk = ln(ln(...ln t))`` (k logs).  Each monomial is stored as its logarithm,
a finite sum ``sum c_P P`` of *growing* power monomials P, because then
``M1 > M2`` (M1/M2 -> oo) exactly when the largest P in ``log M1 - log M2`` has a
positive coefficient, and products/powers of monomials are sums/scalings.
:mod:`extrap.theory.asymptotics` builds expansions on these monomials.
"""

from __future__ import annotations

import sympy

DEPTH = 7  # slots of a power monomial: t, L1, ..., L6


class GiveUp(Exception):
    """The expression is outside the class this engine expands; use sympy.limit."""


# ---------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------
def sign(c) -> int:
    """Sign of an exact real constant; GiveUp when it cannot be decided."""
    if isinstance(c, int):
        return (c > 0) - (c < 0)
    c = as_sympy(c)
    if c.is_Rational:  # fast path: no assumption machinery
        return (c.p > 0) - (c.p < 0)
    symbolic = bool(c.free_symbols)  # a scheme's parameters as symbols (one analysis for all heads)
    if symbolic and c.is_Add:  # r1 - 1: decided head by head, without sympy's costly attempts
        raise GiveUp(f"the sign of {c} depends on the parameter values")
    if c.is_zero:
        return 0
    if c.is_positive:
        return 1
    if c.is_negative:
        return -1
    if symbolic:
        raise GiveUp(f"the sign of {c} depends on the parameter values")
    v = c.evalf(50)
    if not v.is_real:
        raise GiveUp(f"constant {c} is not real")
    if abs(v) < sympy.Float("1e-40"):
        return 0  # e.g. log(2) + log(3) - log(6), which sympy does not cancel
    return 1 if v > 0 else -1


def contains(expr, types) -> bool:
    """Whether any node of ``expr`` is one of ``types``: one pass, cheaper than ``expr.has``."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, types):
            return True
        stack.extend(e.args)
    return False


def mentions(expr, t) -> bool:
    """Whether the symbol ``t`` occurs in ``expr`` (``expr.has(t)`` without its pattern matching)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.is_Symbol:
            if e == t:
                return True
        else:
            stack.extend(e.args)
    return False


def gaussian_decay(term, t) -> bool:
    """term = C exp(k (t + d)^n), C and d free of t, k < 0 by its assumptions, n a positive integer: it tends to 0.
    A sufficient check on the tree, without the asymptotic expansion (TISA's a_k exp(-|b_k| (t - c_k)^2))."""
    factors = sympy.Mul.make_args(term)
    growing = [f for f in factors if mentions(f, t)]
    if len(growing) != 1 or not isinstance(growing[0], sympy.exp):
        return False
    if any(f.is_finite is not True for f in factors if f is not growing[0]):
        return False
    inner = sympy.Mul.make_args(growing[0].args[0])
    power = [f for f in inner if mentions(f, t)]
    k = sympy.Mul(*[f for f in inner if not mentions(f, t)])
    if len(power) != 1 or k.is_extended_negative is not True or k.is_finite is not True:
        return False
    base, n = power[0].as_base_exp()
    if not (n.is_Integer and n > 0):
        return False
    shift = [a for a in sympy.Add.make_args(base) if a != t]
    return (
        len(shift) == len(sympy.Add.make_args(base)) - 1
        and not any(mentions(a, t) for a in shift)
        and all(a.is_finite is True and a.is_extended_real is True for a in shift)
    )


def is_zero(c) -> bool:
    """Whether an exact real constant is 0; GiveUp when it cannot be decided.

    A product or power of parameter symbols that sympy proves nonzero (a symbol declared nonzero, as
    for a parameter whose heads' values differ in sign but none is 0) is not 0, whatever its sign."""
    if isinstance(c, sympy.Rational):  # the usual case: sign's fast path, without its conversions
        return c.p == 0
    if not isinstance(c, int):
        c = as_sympy(c)
        if not c.is_Rational and not c.is_Add and c.free_symbols and c.is_zero is False:
            return False
    return sign(c) == 0


def as_sympy(c):
    return c if isinstance(c, sympy.Basic) else sympy.sympify(c)


# ---------------------------------------------------------------------------
# power monomials (tuples of exponents) and general monomials
# ---------------------------------------------------------------------------
def _pm_cmp(a: tuple, b: tuple) -> int:
    """Compare t^a0 L1^a1 ... with t^b0 L1^b1 ...: the first differing exponent decides."""
    for x, y in zip(a, b):
        if x is not y and x != y:  # mostly the shared 0s and 1s of sympy: equal by identity, no __ne__
            s = sign(x - y)
            if s:
                return s
    return 0


def _unit(k: int) -> tuple:
    return tuple(sympy.Integer(1) if i == k else sympy.Integer(0) for i in range(DEPTH))


class Mono:
    """exp(sum c_P P) with P growing power monomials; stored as sorted (P, c) pairs."""

    __slots__ = ("logm", "_rational")

    def __init__(self, logm):
        self._rational = None
        items: list[list] = []
        for pm, c in logm:
            for it in items:
                if _pm_cmp(it[0], pm) == 0:
                    it[1] = it[1] + c
                    break
            else:
                items.append([pm, as_sympy(c)])
        items = [(pm, c) for pm, c in items if not is_zero(c)]
        items.sort(key=_PMKey)
        self.logm = tuple(items)

    @staticmethod
    def power(exps) -> Mono:
        """t^a0 L1^a1 ... L5^a5 (exponent list of length <= DEPTH - 1)."""
        exps = list(exps)
        if len(exps) >= DEPTH:
            if any(not is_zero(e) for e in exps[DEPTH - 1 :]):
                raise GiveUp("too many nested logarithms")
            exps = exps[: DEPTH - 1]
        return Mono([(_unit(k + 1), e) for k, e in enumerate(exps)])

    def power_form(self):
        """Exponents (a0, ..., a5) if this is t^a0 L1^a1 ...; None if it has an exp part."""
        out = [sympy.Integer(0)] * (DEPTH - 1)
        for pm, c in self.logm:
            nz = [i for i, e in enumerate(pm) if e != 0]
            if len(nz) != 1 or nz[0] == 0 or pm[nz[0]] != 1:
                return None
            out[nz[0] - 1] = c
        return tuple(out)

    def __mul__(self, other: Mono) -> Mono:
        return Mono(self.logm + other.logm)

    def __pow__(self, k) -> Mono:
        return Mono([(pm, c * k) for pm, c in self.logm])

    def beyond_log_powers(self) -> bool:
        """True if this monomial outgrows every power of ln t (so it is at least t^delta)."""
        return bool(self.logm) and _pm_cmp(self.logm[0][0], _unit(2)) > 0 and sign(self.logm[0][1]) > 0

    def inv(self) -> Mono:
        return self**-1

    def exact_key(self) -> tuple | None:
        """The canonical form as a hashable key when every exponent and coefficient is rational: merged, without
        zeros and sorted, it is then equal for equal monomials and different for different ones; None otherwise
        (equality needs :meth:`cmp`)."""
        if self._rational is None:  # found once per monomial (it is immutable): merges and sorts ask often
            self._rational = all(_is_rational(c) and all(map(_is_rational, pm)) for pm, c in self.logm)
        return self.logm if self._rational else None

    def cmp(self, other: Mono) -> int:
        """+1 if self/other -> oo, -1 if -> 0, 0 if they are the same monomial."""
        if self.exact_key() is not None and other.exact_key() is not None:
            return _rational_cmp(self.logm, other.logm)
        diff = Mono(self.logm + tuple((pm, -c) for pm, c in other.logm))
        if not diff.logm:
            return 0
        return sign(diff.logm[0][1])

    def __repr__(self) -> str:
        pf = self.power_form()
        names = ["t"] + [f"L{k}" for k in range(1, DEPTH)]
        if pf is not None:
            parts = [f"{n}^{e}" for n, e in zip(names, pf) if e != 0]
            return "*".join(parts) or "1"
        inner = " + ".join(f"{c}*{'*'.join(f'{n}^{e}' for n, e in zip(names, pm) if e != 0)}" for pm, c in self.logm)
        return f"exp({inner})"


def _is_rational(x) -> bool:
    return isinstance(x, sympy.Rational)  # Integer too; not Float, not a symbol


def _rational_cmp(a: tuple, b: tuple) -> int:
    """:meth:`Mono.cmp` of two monomials with rational exponents and coefficients, from their logarithms ``a``
    and ``b`` (each merged, without zeros, sorted from the largest P down): the sign of the leading coefficient
    of a - b, found by walking down both instead of building Mono(a - b).  Rational arithmetic is exact and
    their order total, so it is the same coefficient (c_a + (-c_b) = c_a - c_b) of the same P."""
    i = j = 0
    while i < len(a) and j < len(b):
        s = _pm_cmp(a[i][0], b[j][0])
        if s:
            return sign(a[i][1]) if s > 0 else -sign(b[j][1])
        s = sign(a[i][1] - b[j][1])
        if s:
            return s
        i, j = i + 1, j + 1
    if i < len(a):
        return sign(a[i][1])
    return -sign(b[j][1]) if j < len(b) else 0


class _PMKey:
    """Sort key: larger power monomials first."""

    __slots__ = ("pm",)

    def __init__(self, item):
        self.pm = item[0]

    def __lt__(self, other):
        return _pm_cmp(self.pm, other.pm) > 0


ONE = Mono(())
T_MONO = Mono.power([1])


def _log_scale(k: int) -> Mono:
    exps = [0] * (k + 1)
    exps[k] = 1
    return Mono.power(exps)


_LOG_SCALES = tuple(_log_scale(k) for k in range(DEPTH - 1))  # constants of the scale, as ONE and T_MONO


def log_scale(k: int) -> Mono:
    """L_k = ln ln ... ln t (k logs) as a monomial; L_0 = t (GiveUp beyond L_5, as Mono.power)."""
    return _LOG_SCALES[k] if 0 <= k < len(_LOG_SCALES) else _log_scale(k)


def mono_max(a: Mono | None, b: Mono | None) -> Mono | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a.cmp(b) >= 0 else b
