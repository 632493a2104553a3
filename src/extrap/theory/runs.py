"""Finite sums sum_{start <= t < stop} b_t of one piece of a min/max formula, and their suffixes.

A piece (:mod:`extrap.theory.pieces`) is a range of distances on which r(t) is one smooth
branch.  Its sum is the finite-range version of the tails of :class:`extrap.theory.trf.Series`:

* :class:`DirectRun`: term by term (short pieces, and the distances where the branches tie);
* :class:`GeometricRun`, r = c - m t: e^(c - m j) (1 - e^(-m L)) / (1 - e^-m) over L terms;
* :class:`PowerRun`, r = c - p ln(a t + q): e^c a^-p (zeta(p, j + q/a) - zeta(p, stop + q/a))
  (the Hurwitz zeta function, digamma for p = 1);
* :class:`SmoothRun`, any other branch: Euler-Maclaurin between two points,
  sum_{t=j}^{c-1} b_t = int_j^c b + E(j) - E(c), E(J) = b(J)/2 - sum_k B_2k/(2k)! b^(2k-1)(J),
  with the derivatives from Taylor jets (:mod:`extrap.theory.jets`) and the integral by
  Gauss-Legendre on ranges that double away from both ends.  Where E is not accurate at an end
  (b varies too fast there), a few thousand terms at that end are summed directly.

Each run gives ``suffix(j)`` = (sum over j <= t < stop, its error bound), so the TRF search
of :class:`extrap.theory.piecewise.PiecewiseSeries` can settle an integer inside a piece.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import sympy

from extrap.positional.conventions import T
from extrap.positional.ops import saturating_exp
from extrap.theory.closed import affine_split, exact_mpf
from extrap.theory.errors import NotReal, SeriesError
from extrap.theory.jets import Unsupported, compile_jet, weight_function
from extrap.theory.quadrature import QUAD_MAXDEGREE, em_coefficient, pow10
from extrap.theory.scale import mentions
from extrap.theory.trf import DPS, EM_TERMS, term_at

SHORT = 4096  # pieces up to this long are summed term by term
EDGES = (0, 64, 512, 4096)  # terms summed directly at an end where Euler-Maclaurin is not yet accurate
ROUNDING = pow10(-(DPS - 6))  # relative error of a closed form or a quadrature at the working precision


def weight(head: Callable, k: int):
    """b_k = exp(r(k)) from the formula itself, arithmetic failures reported as verdicts (as in Series)."""
    b = term_at(lambda t: saturating_exp(head(t)), k)
    if isinstance(b, mpmath.mpc) or mpmath.isnan(b):
        raise NotReal(f"b_t is not a real number at t={k}")
    if mpmath.isinf(b):
        raise SeriesError(f"b_t at t={k} is beyond every numeric range")
    return b


class Run:
    """sum_{start <= t < stop} b_t (``total``, error bound ``err``) with its suffixes."""

    start: int
    stop: int
    total: object
    err: object

    def suffix(self, j: int) -> tuple:
        """(sum_{j <= t < stop} b_t, error bound) for start <= j <= stop."""
        raise NotImplementedError


class DirectRun(Run):
    """Every term from the formula (min/max evaluated at each distance)."""

    def __init__(self, head: Callable, start: int, stop: int):
        self.start, self.stop = start, stop
        terms = [weight(head, k) for k in range(start, stop)]
        self._suffix = [mpmath.mpf(0)] * (len(terms) + 1)
        for i in range(len(terms) - 1, -1, -1):
            self._suffix[i] = self._suffix[i + 1] + terms[i]
        self.total, self.err = self._suffix[0], ROUNDING * self._suffix[0]

    def suffix(self, j: int) -> tuple:
        v = self._suffix[j - self.start]
        return v, ROUNDING * v


class GeometricRun(Run):
    """r(t) = c - m t (any real m): a finite geometric sum."""

    def __init__(self, start: int, stop: int, c, m):
        self.start, self.stop, self._c, self._m = start, stop, c, m
        self.total, self.err = self.suffix(start)

    def suffix(self, j: int) -> tuple:
        n, m = self.stop - j, self._m
        first = saturating_exp(self._c - m * j)
        v = first * n if m == 0 else first * mpmath.expm1(-m * n) / mpmath.expm1(-m)
        return v, ROUNDING * v


class PowerRun(Run):
    """r(t) = c - p ln(a t + q), a > 0: b_t = e^c a^-p (t + q/a)^-p, a difference of Hurwitz zetas."""

    def __init__(self, start: int, stop: int, c, p, a, q):
        self.start, self.stop, self._p, self._shift = start, stop, p, q / a
        self._scale = mpmath.exp(c) * a ** (-p)
        self.total, self.err = self.suffix(start)

    def _zeta(self, u):
        return -mpmath.digamma(u) if self._p == 1 else mpmath.zeta(self._p, u)

    def suffix(self, j: int) -> tuple:
        hi, lo = self._zeta(j + self._shift), self._zeta(self.stop + self._shift)
        v = self._scale * (hi - lo)
        return v, ROUNDING * self._scale * (abs(hi) + abs(lo))


class SmoothRun(Run):
    """Euler-Maclaurin between the ends, direct terms where it is not accurate (see the module)."""

    def __init__(self, head: Callable, branch, start: int, stop: int):
        self.start, self.stop = start, stop
        x = sympy.Symbol("x", positive=True)
        b = sympy.exp(sympy.sympify(branch).subs(T, x))
        self._b = weight_function(b, x)
        self._jet = compile_jet(b, x)
        self._mid = {}  # (J, precision) -> (E(J), error)
        lo = next((start + h for h in EDGES if self._edge(start + h)), None)
        hi = next((stop - h for h in EDGES if self._edge(stop - h)), None)
        if lo is None or hi is None or hi - lo < SHORT:
            where = f"{start}..{start + EDGES[-1]}" if lo is None else f"{stop - EDGES[-1]}..{stop}"
            raise SeriesError(
                f"the piece r(t) = {branch} on {start} <= t < {stop} cannot be summed: Euler-Maclaurin "
                f"is not accurate anywhere on t = {where} (b varies too fast for its derivatives to decay)"
            )
        self._lo, self._hi = lo, hi
        self._head = DirectRun(head, start, lo)
        self._tail = DirectRun(head, hi, stop)
        body, body_err = self._body(lo)
        self.total = self._head.total + body + self._tail.total
        self.err = self._head.err + body_err + self._tail.err

    def _derivatives(self, J) -> list:
        if self._jet is not None:
            try:
                return self._jet(J, 2 * EM_TERMS - 1)
            except (Unsupported, ZeroDivisionError, ValueError, OverflowError):
                pass
        return list(mpmath.diffs(self._b, J, 2 * EM_TERMS - 1))

    def _edge(self, J: int) -> bool:
        """E(J) = b(J)/2 - sum_k B_2k/(2k)! b^(2k-1)(J), kept when its series has settled to the working precision."""
        d = self._derivatives(mpmath.mpf(J))
        total, prev = d[0] / 2, None
        for k in range(1, EM_TERMS + 1):
            corr = em_coefficient(k) * d[2 * k - 1]
            if prev is not None and abs(corr) > abs(prev):
                break  # the asymptotic series started to grow: stop at its smallest term
            total -= corr
            prev = corr
            if abs(corr) <= pow10(-(DPS + 2)) * abs(d[0]):
                break
        err = abs(prev) if prev is not None else abs(d[0])
        self._mid[J, mpmath.mp.prec] = (total, err)
        return err <= pow10(-(DPS - 8)) * abs(d[0])

    def _body(self, j: int) -> tuple:
        """(sum_{j <= t < hi} b_t, error) for lo <= j <= hi: the integral plus the ends' corrections."""
        if j >= self._hi:
            return mpmath.mpf(0), mpmath.mpf(0)
        for J in (j, self._hi):
            if (J, mpmath.mp.prec) not in self._mid:
                self._edge(J)
        (ej, ej_err), (eh, eh_err) = self._mid[j, mpmath.mp.prec], self._mid[self._hi, mpmath.mp.prec]
        integral, q_err = _integral(self._b, j, self._hi)
        v = integral + ej - eh
        return v, q_err + ej_err + eh_err + ROUNDING * abs(v)

    def suffix(self, j: int) -> tuple:
        if j >= self._hi:
            return self._tail.suffix(j)
        if j < self._lo:
            head, head_err = self._head.suffix(j)
            return head + self.total - self._head.total, head_err + self.err
        body, err = self._body(j)
        return body + self._tail.total, err + self._tail.err


def _integral(b: Callable, a: int, c: int) -> tuple:
    """(int_a^c b, error) by Gauss-Legendre on [a, a+1], [a+1, a+2], [a+2, a+4], ... and the same towards c."""
    cuts, k = {a, c}, 1
    while a + k < c:
        cuts.update((a + k, c - k))
        k *= 2
    points = [mpmath.mpf(x) for x in sorted(cuts)]
    v, e = mpmath.quad(b, points, error=True, maxdegree=QUAD_MAXDEGREE, method="gauss-legendre")
    if not e <= pow10(-(mpmath.mp.dps - 10)) * abs(v):
        raise SeriesError(f"the integral of b over {a} <= t < {c} is not accurate (error {mpmath.nstr(e, 3)})")
    return v, e


def make_run(head: Callable, start: int, stop: int, branch) -> Run:
    """The cheapest exact run for r(t) = ``branch`` on start <= t < stop (None: term by term)."""
    if branch is None or stop - start <= SHORT:
        return DirectRun(head, start, stop)
    with mpmath.workdps(DPS):
        b = weight_function(sympy.exp(branch), T)
        for k in (start, (start + stop) // 2, stop - 1):  # the branch must be the formula's weight there
            ref, mine = weight(head, k), b(mpmath.mpf(k))
            if abs(mine - ref) > pow10(-10) * abs(ref):
                raise SeriesError(f"symbolic and numeric forms of r(t) disagree at t={k}: {ref} vs {mine}")
        return _closed_run(branch, start, stop) or SmoothRun(head, branch, start, stop)


def _closed_run(branch, start: int, stop: int) -> Run | None:
    if not mentions(branch, T):  # a constant weight (0 for r = -oo): a geometric sum of ratio 1
        c = mpmath.mpf("-inf") if branch == -sympy.oo else exact_mpf(branch)
        return None if c is None else GeometricRun(start, stop, c, mpmath.mpf(0))
    parts = affine_split(branch)
    if parts is None:
        return None
    c, k, f = parts
    if f == T:
        c, m = exact_mpf(c), exact_mpf(-k)
        return None if c is None or m is None else GeometricRun(start, stop, c, m)
    if not isinstance(f, sympy.log) or len(f.args) != 1:
        return None
    inner = affine_split(f.args[0])
    if inner is None or inner[2] != T:
        return None
    c, p, q, a = exact_mpf(c), exact_mpf(-k), exact_mpf(inner[0]), exact_mpf(inner[1])
    if None in (c, p, q, a) or not (a > 0 and a * start + q > 0):
        return None
    return PowerRun(start, stop, c, p, a, q)


__all__ = ["DirectRun", "GeometricRun", "PowerRun", "Run", "SmoothRun", "make_run", "weight"]
