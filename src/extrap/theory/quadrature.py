"""The tail integral int_J^oo b(x) dx of the Euler-Maclaurin tail of a series.

:func:`tail_integral` maps the integrand so that it decays like e^-y and applies
Gauss-Laguerre quadrature (:func:`laguerre`), falling back to tanh-sinh
(``mpmath.quad``) on growing pieces when two Laguerre sizes disagree.  Everything
runs at mpmath's current working precision.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
from numpy.polynomial.laguerre import laggauss

from extrap.theory.errors import SeriesError

QUAD_MAXDEGREE = 7  # bounded tanh-sinh effort: oscillating tails fail fast instead of running for minutes


_POW10: dict[tuple[int, int], object] = {}


def clear() -> None:
    """Forget the tables filled on first use (a cold run computes them as a fresh process does)."""
    _POW10.clear()
    _EM_COEFFICIENTS.clear()
    _LAGUERRE_RULES.clear()


def pow10(k):
    """10^k as an mpmath number at the working precision (a constant table, like the coefficients below:
    every tolerance of the engine asks for one, ~200 a round, and an mpf power costs microseconds)."""
    key = (k, mpmath.mp.prec)
    c = _POW10.get(key)
    if c is None:
        c = _POW10[key] = mpmath.mpf(10) ** k
    return c


_EM_COEFFICIENTS: dict[tuple[int, int], object] = {}


def em_coefficient(k: int):
    """B_2k / (2k)!, the k-th Euler-Maclaurin coefficient, at the working precision (computed once)."""
    key = (k, mpmath.mp.prec)
    c = _EM_COEFFICIENTS.get(key)
    if c is None:
        c = _EM_COEFFICIENTS[key] = mpmath.bernoulli(2 * k) / mpmath.factorial(2 * k)
    return c


def tail_integral(b: Callable, J, d, fast: bool, abs_tol=None, rough: bool = False):
    """(int_J^oo b, error bound) after a change of variable that makes the integrand ~ e^-y.

    ``d`` holds b(J), b'(J), b''(J); l1 = (log b)', l2 = (log b)'' at J.
    * l2 <= 0 (exponential or faster, e.g. ALiBi, Gaussians): x = J + s y with
      s = -1/l1, the local decay length.
    * l2 > 0 (slower than exponential: powers, Type2, stretched exponentials): fit
      b ~ C (x+c)^-p to l1 = -p/(x+c), l2 = p/(x+c)^2 and map
      x + c = (J + c) e^(y/(p-1)), which turns every shifted power (Type1,
      KERPLE-log) into exactly C' e^-y.
    Two Gauss-Laguerre sizes then agree to working precision; when they do not,
    mpmath's tanh-sinh quadrature of the same mapped integrand takes over.
    """
    bJ, dbJ, ddbJ = d[0], d[1], d[2]
    l1 = dbJ / bJ
    l2 = ddbJ / bJ - l1**2
    if l1 >= 0:  # not decaying at J yet: no scale to map with
        return _quad(lambda y: b(J + y), J, abs_tol, scale=max(J, 1))
    if l2 <= 0:
        s = -1 / l1
        g = lambda y: b(J + s * y) * s  # noqa: E731
    else:
        shift, p = -l1 / l2, l1**2 / l2  # x + c and the exponent, as fitted at J
        if not p > 1:  # locally not summable yet (log-power tails): doubly logarithmic scale
            return _quad(_loglog_map(b, J), J, abs_tol, scale=mpmath.mpf(1) / 4)
        c, s = shift - J, 1 / (p - 1)
        g = _power_map(b, shift, c, s)
    big = laguerre(g, _LAGUERRE_SIZES[1])
    if rough:
        return big, mpmath.mpf(0)
    small = laguerre(g, _LAGUERRE_SIZES[0])
    diff = abs(big - small)
    tol = pow10(-(mpmath.mp.dps - 6)) * abs(big)
    if abs_tol is not None:
        tol = max(tol, abs_tol)
    if diff <= tol:
        return big, diff
    # not an exponential or a shifted power: x = J exp(e^y - 1) makes powers decay like
    # exp(-(p-1) e^y) and Bertrand tails 1/(x ln^q x) like e^{-(q-1) y}, both easy for tanh-sinh
    if l2 <= 0:
        return _quad(g, J, abs_tol, scale=1)
    return _quad(_loglog_map(b, J), J, abs_tol, scale=mpmath.mpf(1) / 4)


def _power_map(b: Callable, shift, c, s) -> Callable:
    """The integrand after x + c = (J + c) e^(s y): b(x) dx/dy, with e^(s y) computed once (not twice)."""

    def g(y):
        e = mpmath.exp(s * y)
        return b(shift * e - c) * shift * s * e

    return g


def _loglog_map(b: Callable, J) -> Callable:
    """The integrand of int_J^oo b(x) dx after x = J exp(e^y - 1), y in [0, oo)."""

    def g(y):
        e = mpmath.exp(y)
        x = J * mpmath.exp(e - 1)
        return b(x) * x * e

    return g


def _quad(f: Callable, J, abs_tol=None, scale=1):
    """(int_0^oo f, error) by tanh-sinh on [0, w], [w, 3w], [3w, 7w], ... until the rest is negligible.

    Growing pieces follow the integrand outwards only as far as it carries weight,
    so samples stay away from astronomically large x (cos(10^10^5) costs minutes),
    and slowly decaying integrands are not cut off early.  Bounded effort per piece.
    """
    total, err = mpmath.mpf(0), mpmath.mpf(0)
    a, width = mpmath.mpf(0), mpmath.mpf(scale) * 8
    negligible = pow10(-(mpmath.mp.dps + 3))
    for _ in range(80):
        v, e = mpmath.quad(f, [a, a + width], error=True, maxdegree=QUAD_MAXDEGREE)
        total, err = total + v, err + e
        ok = pow10(-(mpmath.mp.dps - 12)) * abs(total)
        if abs_tol is not None:
            ok = max(ok, abs_tol)
        if err > ok:  # one inaccurate piece already spoils the sum: fail fast
            raise SeriesError(f"quadrature of the tail integral not accurate at t={mpmath.nstr(J, 6)}")
        a += width
        if abs(f(a)) * width <= negligible * abs(total):  # what is left is below the working precision
            return total, err
        width *= 2
    raise SeriesError(f"the tail integral at t={mpmath.nstr(J, 6)} does not settle")


_LAGUERRE_SIZES = (8, 16)  # exact for pure exponentials; agreement estimates the error
_LAGUERRE_RULES: dict[tuple[int, int], tuple[list, list]] = {}


def laguerre(g: Callable, n: int):
    """int_0^oo g(y) dy by n-point Gauss-Laguerre applied to e^y g(y)."""
    nodes, weights = _laguerre_rule(n)
    return mpmath.fsum(w * g(y) for y, w in zip(nodes, weights))


def _laguerre_rule(n: int):
    """Nodes y_i and weights w_i e^(y_i) of n-point Gauss-Laguerre at the working precision.

    Newton from numpy's float roots on L_n(y), L_n'(y) = n (L_n - L_{n-1}) / y, in fixed point
    (integers scaled by 2^P, 40 guard bits over the working precision): quadratic convergence
    reaches the working precision in three or four steps, each a few integer operations per
    term of the recurrence instead of mpf ones.
    """
    key = (n, mpmath.mp.prec)
    if key in _LAGUERRE_RULES:
        return _LAGUERRE_RULES[key]
    shift = mpmath.mp.prec + 40
    settled = 1 << (mpmath.mp.prec + 4)  # a step below 2^-(prec + 4) of y: converged
    nodes, weights = [], []
    for y0 in laggauss(n)[0]:
        y = int(mpmath.ldexp(mpmath.mpf(float(y0)), shift))
        for _ in range(8):
            l_prev, l_n = _laguerre_pair(n, y, shift)
            dy = (l_n * y) // (n * (l_n - l_prev))
            y -= dy
            if abs(dy) * settled < y:
                break
        _, l_next = _laguerre_pair(n + 1, y, shift)
        node = mpmath.ldexp(y, -shift)
        nodes.append(node)
        weights.append(node / ((n + 1) ** 2 * mpmath.ldexp(l_next, -shift) ** 2) * mpmath.exp(node))
    _LAGUERRE_RULES[key] = (nodes, weights)
    return nodes, weights


def _laguerre_pair(n: int, y: int, shift: int) -> tuple[int, int]:
    """(L_{n-1}(y), L_n(y)) scaled by 2^shift, for y scaled by 2^shift, by the three-term recurrence
    (k+1) L_{k+1} = (2k+1-y) L_k - k L_{k-1}: each step rounds once, by at most 2^-shift."""
    one = 1 << shift
    a, b = one, one - y
    for k in range(1, n):
        a, b = b, ((2 * k + 1) * b - ((y * b) >> shift) - k * a) // (k + 1)
    return a, b
