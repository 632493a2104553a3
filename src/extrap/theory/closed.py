"""Closed-form tails R(J) = sum_{t>=J} b_t for the two commonest shapes of a convergent bias.

:class:`extrap.theory.trf.Series` sums any convergent head with exact terms plus an
Euler-Maclaurin tail whose derivatives are numeric and whose integral is a quadrature.
Two shapes of the eventual r(t) need none of that:

* geometric, r(t) = c - m t with m > 0 (ALiBi, KERPLE-power at r2 = 1, ``-t/1000``):
  R(J) = e^(c - m J) / (1 - e^-m) for every real J, so B and n(eps) are exact;
* Hurwitz zeta, r(t) = c - p ln(a t + q) with p > 1, a, q > 0 (KERPLE-log, Type1):
  R(J) = e^c a^-p zeta(p, J + q/a), from the Euler-Maclaurin expansion of zeta with its
  exact derivatives, whose error is at most the first term left out (the odd
  derivatives of x^-p all have one sign).

Both are the same numbers :class:`Series` defines (its terms below the cutoff come from
the scheme's numeric r, the rest from the symbolic tail), so every integer n(eps) of
000 Eq. 22 is settled by the same code (:meth:`Series.trf`), only with exact tails.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import sympy

from extrap.positional.conventions import T
from extrap.positional.ops import saturating_exp
from extrap.theory.quadrature import em_coefficient, pow10
from extrap.theory.scale import mentions
from extrap.theory.trf import DPS, MAX_DIRECT, Series

HURWITZ_START = 24  # exact terms before the zeta expansion, whose smallest term is then about e^(-2 pi 24) = 1e-65
HURWITZ_TERMS = 40  # Bernoulli corrections at most (40 digits need about 16 at u = 64)
LOGS_KEPT = 16  # (a, q) pairs whose logarithms ln(a t + q) are kept for the next head (see _affine_log)

_LOGS: dict[tuple, dict] = {}


def clear() -> None:
    """Forget the logarithms kept for later heads (benchmarks measure cold runs)."""
    _LOGS.clear()


def closed_series(head: Callable, tail_expr, cutoff: int, fast: bool) -> Series | None:
    """A :class:`Series` with a closed-form tail when r(t) = ``tail_expr`` for t >= ``cutoff`` has one of
    the two shapes above (None otherwise: the general :class:`Series` applies)."""
    if cutoff > MAX_DIRECT:
        return None
    with mpmath.workdps(DPS):
        parts = affine_split(tail_expr)  # c + k*f: both shapes start from it (one split, not one per shape)
        shape = None if parts is None else _geometric(parts) or _hurwitz(parts)
        if shape is None:
            return None
        return shape[0](head, cutoff, fast, *shape[1:])


def exact_mpf(c) -> mpmath.mpf | None:
    """An exact real sympy constant at the working precision (None if it is not one)."""
    if isinstance(c, sympy.Rational) and _binary(c):  # 0, 1, ALiBi's slopes: exact in every precision
        return mpmath.mpf(int(c.p)) / int(c.q)
    if not (c.is_number and c.is_extended_real and c.is_finite):
        return None
    return mpmath.mpf(sympy.Float(c.evalf(DPS + 10), DPS + 10)._mpf_)


def _binary(c: sympy.Rational) -> bool:
    """p/q with q a power of 2 and p within the working precision: an mpf holds it exactly, as does the
    evalf route above (p/q exactly, then no rounding), so both give the same number; this one without evalf."""
    return c.q & (c.q - 1) == 0 and abs(c.p).bit_length() <= mpmath.mp.prec


def affine_split(expr):
    """(c, k, f) with expr = c + k*f, c and k free of t (None when expr is not of that form)."""
    terms = sympy.Add.make_args(sympy.sympify(expr))
    dependent = [a for a in terms if mentions(a, T)]
    if len(dependent) != 1:  # sympy keeps like terms combined: two of them are not c + k*f
        return None
    c = sympy.Add(*[a for a in terms if a is not dependent[0]])
    factors = sympy.Mul.make_args(dependent[0])
    f = sympy.Mul(*[a for a in factors if mentions(a, T)])
    return c, sympy.Mul(*[a for a in factors if not mentions(a, T)]), f


def _geometric(parts):
    """(GeometricSeries, c, m) when ``parts`` = (c, k, f) of :func:`affine_split` is c - m t, m > 0."""
    if parts[2] != T:
        return None
    c, m = exact_mpf(parts[0]), exact_mpf(-parts[1])
    if c is None or m is None or not m > 0:
        return None
    return GeometricSeries, c, m


def _hurwitz(parts):
    """(HurwitzSeries, c, p, a, q) when ``parts`` = (c, k, f) of :func:`affine_split` is c - p ln(a t + q)."""
    if not isinstance(parts[2], sympy.log) or len(parts[2].args) != 1:
        return None
    inner = affine_split(parts[2].args[0])
    if inner is None or inner[2] != T:
        return None
    c, p, q, a = exact_mpf(parts[0]), exact_mpf(-parts[1]), exact_mpf(inner[0]), exact_mpf(inner[1])
    if any(x is None for x in (c, p, q, a)) or not (p > 1 and a > 0 and q > 0):  # `is`: mpf == None converts None
        return None
    return HurwitzSeries, c, p, a, q


class _ClosedTail(Series):
    """Series with an exact tail: B = b_0 + ... + b_{n0-1} + R(n0), refined by construction."""

    rounding = pow10(-(DPS - 4))  # relative error of a closed-form evaluation (a few roundings)

    def _setup(self, head: Callable, cutoff: int, n0: int, fast: bool) -> None:
        self.fast, self.finite = fast, False
        self._head, self._cutoff = head, cutoff
        self._dmemo, self._tails = {}, {}
        with mpmath.workdps(DPS):
            self.terms = []
            self._extend(head, cutoff, n0)
            self._check_agreement(head, cutoff)
            self.tail0, tail_err = self._em_tail(mpmath.mpf(n0))
            self.total = self._suffix[0] + self.tail0
            self.total_err = tail_err + self.rounding * self.total

    def refine(self) -> None:
        """Nothing to refine: B is already exact to the working precision."""

    def _em_tail(self, J, abs_tol=None, rough: bool = False, full_em: bool = False):
        """(R(J), error bound), exact whatever the flags; remembered, so that :meth:`_settle` finds the
        tail at the integer where :meth:`_search` stopped (one closed-form evaluation less per head)."""
        key = (J, mpmath.mp.prec)
        if key not in self._tails:
            self._tails[key] = self._closed_tail(J)
        return self._tails[key]

    def _search(self, target) -> int:
        """Newton on the exact tail from n0 (one step for a geometric tail), at integers, so that it stops
        where the tail is known; :meth:`_settle` then walks to the exact integer.  The bracketing search
        of :class:`Series` if it does not settle."""
        j = mpmath.mpf(self.n0)
        R = self.tail0
        for _ in range(50):
            nxt = max(self._newton(j, R, target)[0], mpmath.mpf(self.n0))
            if abs(nxt - j) < 1:
                return int(j)
            j = mpmath.ceil(nxt)
            R = self._em_tail(j)[0]
        return super()._search(target)


class GeometricSeries(_ClosedTail):
    """r(t) = c - m t from the cutoff on (000 Eq. 22 with b_t = e^(c - m t))."""

    def __init__(self, head: Callable, cutoff: int, fast: bool, c, m):
        self._c, self._m = c, m
        self._ratio = -mpmath.expm1(-m)  # 1 - e^-m without cancellation for small slopes
        self._b = lambda x: saturating_exp(c - m * x)
        self._setup(head, cutoff, max(cutoff, 1), fast)

    def _closed_tail(self, J):
        value = self._b(J) / self._ratio  # sum_{k>=0} e^(c - m (J + k))
        return value, self.rounding * value

    def _newton(self, j, R, target):
        """log R is linear in j with slope -m: one step lands on the crossing."""
        g = mpmath.log(R / target)
        return j + g / self._m, g


class HurwitzSeries(_ClosedTail):
    """r(t) = c - p ln(a t + q) from the cutoff on: b_t = e^c a^-p (t + q/a)^-p."""

    def __init__(self, head: Callable, cutoff: int, fast: bool, c, p, a, q):
        self._p, self._shift = p, q / a
        self._scale = mpmath.exp(c) * a ** (-p)
        self._coefficients: dict[int, list] = {}  # precision -> B_2k/(2k)! p(p+1)...(p+2k-2) for k = 1, 2, ...
        self._rising: dict[int, object] = {}  # precision -> the last of those products p(p+1)...
        log = _affine_log(a, q)
        self._b = lambda x: saturating_exp(c - p * log(x))
        self._setup(head, cutoff, max(cutoff, HURWITZ_START), fast)

    def _closed_tail(self, J):
        """e^c a^-p zeta(p, u), u = J + q/a, by Euler-Maclaurin with exact derivatives of u^-p:
        zeta(p, u) = u^(1-p)/(p-1) + u^-p/2 + sum_k B_2k/(2k)! p(p+1)...(p+2k-2) u^(-p-2k+1)."""
        p, u = self._p, J + self._shift
        up = u ** (-p)
        total = u * up / (p - 1) + up / 2
        power, u2 = up / u, u * u  # u^(-p-2k+1) for k = 1
        goal, err = pow10(-(mpmath.mp.dps + 2)) * total, up
        known = self._coefficients.setdefault(mpmath.mp.prec, [])
        for k in range(1, HURWITZ_TERMS + 1):
            if k > len(known):
                self._next_coefficient(known)
            term = known[k - 1] * power
            size = abs(term)
            if size >= err:  # the asymptotic series turned: stop before it grows
                err = size  # the remainder lies between 0 and the first term left out
                break
            total += term
            err = size  # the remainder is below the first term left out, itself below this one
            if err < goal:
                break
            power /= u2
        value = self._scale * total
        return value, self._scale * err + self.rounding * value

    def _next_coefficient(self, known: list) -> None:
        """Append B_2k/(2k)! p(p+1)...(p+2k-2) for the next k (the last product times (x - 1) x, x = p + 2(k-1):
        the operations the expansion once repeated at every J, in the same order, so the same bits), so that a
        head's later tails (1 to 3 terms each) reuse those of its first (at n0, ~15 terms)."""
        prec = mpmath.mp.prec
        if known:
            x = self._p + 2 * len(known)
            self._rising[prec] *= (x - 1) * x
        else:
            self._rising[prec] = self._p
        known.append(em_coefficient(len(known) + 1) * self._rising[prec])

    def _newton(self, j, R, target):
        """R(x) ~ R(j) ((x + q/a)/(j + q/a))^-(p-1): exact for the leading term, a few steps at most."""
        g = mpmath.log(R / target)
        u = j + self._shift
        return u * mpmath.exp(g / (self._p - 1)) - self._shift, g


def _affine_log(a, q) -> Callable:
    """x -> ln(a x + q) at the working precision, kept for every head with the same a and q: KERPLE-log's heads
    share r2 = a and q = 1, so a head's exact terms need the logarithms an earlier head took (equal numbers,
    the same operations at the same precision: the same bits)."""
    if (a, q) not in _LOGS and len(_LOGS) >= LOGS_KEPT:
        _LOGS.clear()
    kept = _LOGS.setdefault((a, q), {})

    def log(x):
        key = (x, mpmath.mp.prec)
        value = kept.get(key)
        if value is None:
            value = kept[key] = mpmath.log(a * x + q)
        return value

    return log


__all__ = ["GeometricSeries", "HurwitzSeries", "affine_split", "clear", "closed_series", "exact_mpf"]
