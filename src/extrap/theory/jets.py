"""Derivatives of a tail's weight b(x) = exp(r(x)) at a point, from Taylor arithmetic.

The Euler-Maclaurin tail of :class:`extrap.theory.trf.Series` needs b(J), b'(J), ...,
b^(11)(J).  Numerical differentiation (``mpmath.diffs``) evaluates b at many points
at raised precision; here the sympy form of b is evaluated once on truncated Taylor
series ("jets") in x - J: each node maps the coefficients of its arguments to its own
by the usual recurrences (exp, log, powers, sin/cos), so every derivative is exact up to
the rounding of the working precision.  Forms with other functions return None from
:func:`compile_jet`, and the caller differentiates numerically as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import mpmath
import sympy

from extrap.positional.ops import EXP_MAG, saturating_exp

Coefficients = list  # c_k = f^(k)(J) / k!, k = 0..n


class Unsupported(Exception):
    """The jet of a node cannot be formed (e.g. a power of a jet whose value is 0)."""


# sympy >= 1.13 renders the expression into each function's docstring unless told not to (~0.1 ms a form)
_NO_DOCSTRING = {"docstring_limit": 0} if "docstring_limit" in inspect.signature(sympy.lambdify).parameters else {}


def weight_function(expr, x) -> Callable:
    """``expr`` (a weight b(x)) as an mpmath function of ``x``: ``sympy.lambdify`` to mpmath, whose exp
    saturates beyond every numeric range (:func:`extrap.positional.ops.saturating_exp`)."""
    return sympy.lambdify(x, expr, modules=[{"exp": saturating_exp}, "mpmath"], **_NO_DOCSTRING)


def compile_jet(expr, x) -> Callable[[object, int], list] | None:
    """``f(J, n)`` -> [b(J), b'(J), ..., b^(n)(J)] for ``expr`` in ``x``, or None for unsupported forms."""
    try:
        node = _compile(sympy.sympify(expr), x)
    except Unsupported:
        return None

    def derivatives(J, n: int) -> list:
        c = node(J, n)
        out, fact = [], mpmath.mpf(1)
        for k in range(n + 1):
            out.append(c[k] * fact)
            fact *= k + 1
        return out

    return derivatives


def _compile(e, x):
    if e == x:
        return lambda J, n: [J, mpmath.mpf(1)] + [mpmath.mpf(0)] * (n - 1)
    if not e.has(x):
        value = _constant(e)
        return lambda J, n: [value()] + [mpmath.mpf(0)] * n
    args = [_compile(a, x) for a in e.args]
    if e.is_Add:
        return lambda J, n: _fold(lambda a, b: [p + q for p, q in zip(a, b)], [f(J, n) for f in args])
    if e.is_Mul:
        return lambda J, n: _fold(_mul, [f(J, n) for f in args])
    if e.is_Pow and not e.exp.has(x):
        p = _constant(e.exp)
        return lambda J, n: _pow(args[0](J, n), p())
    if e.is_Pow:  # b^k = exp(k log b)
        return lambda J, n: _exp(_mul(args[1](J, n), _log(args[0](J, n))))
    unary = {sympy.exp: _exp, sympy.log: _log, sympy.sin: _sin, sympy.cos: _cos}.get(type(e))
    if unary is None or len(args) != 1:
        raise Unsupported(type(e).__name__)
    return lambda J, n: unary(args[0](J, n))


def _constant(c) -> Callable:
    """The exact real constant ``c`` at the working precision (converted once per precision)."""
    if not (c.is_number and c.is_extended_real and c.is_finite):
        raise Unsupported(f"constant {c}")
    memo: dict = {}

    def value():
        prec = mpmath.mp.prec
        if prec not in memo:
            memo[prec] = mpmath.mpf(sympy.Float(c.evalf(mpmath.mp.dps + 10), mpmath.mp.dps + 10)._mpf_)
        return memo[prec]

    return value


def _fold(op, items: list) -> Coefficients:
    out = items[0]
    for item in items[1:]:
        out = op(out, item)
    return out


def _mul(a: Coefficients, b: Coefficients) -> Coefficients:
    # a constant factor (all higher coefficients exactly 0): each sum has one nonzero product, which fsum
    # returns as it is (it skips zeros and rounds the exact sum once), so the products alone are the same bits
    if not any(a[1:]):
        return [a[0] * q for q in b]
    if not any(b[1:]):
        return [q * b[0] for q in a]
    return [mpmath.fsum(a[j] * b[k - j] for j in range(k + 1)) for k in range(len(a))]


def _exp(a: Coefficients) -> Coefficients:
    """k e_k = sum_{j=1..k} j a_j e_{k-j}."""
    if mpmath.isinf(a[0]) or mpmath.mag(a[0]) > EXP_MAG:
        raise Unsupported("exp beyond every numeric range")
    e = [mpmath.exp(a[0])]
    ja = _scaled(a)
    for k in range(1, len(a)):
        e.append(mpmath.fsum(ja[j] * e[k - j] for j in range(1, k + 1)) / k)
    return e


def _log(a: Coefficients) -> Coefficients:
    """a_0 k l_k = k a_k - sum_{j=1..k-1} j l_j a_{k-j}."""
    if not a[0] > 0:
        raise Unsupported("log of a non-positive value")
    out = [mpmath.log(a[0])]
    jl = [0]  # j l_j, each product once (as _scaled)
    for k in range(1, len(a)):
        s = mpmath.fsum(jl[j] * a[k - j] for j in range(1, k))
        out.append((a[k] - s / k) / a[0])
        jl.append(k * out[k])
    return out


def _pow(a: Coefficients, p) -> Coefficients:
    """a_0 k c_k = sum_{j=1..k} ((p + 1) j - k) a_j c_{k-j}."""
    if a[0] == 0:
        if p == int(p) and p >= 0:
            return _fold(_mul, [a] * int(p)) if p else [mpmath.mpf(1)] + [mpmath.mpf(0)] * (len(a) - 1)
        raise Unsupported("power of a value 0")
    if a[0] < 0 and p != int(p):
        raise Unsupported("non-integer power of a negative value")
    out = [a[0] ** p]
    # (p + 1) j - k in integers when p is a small integer: the same exact value as in mpf arithmetic
    q = int(p) + 1 if p == int(p) and abs(p) < 2**53 else p + 1
    for k in range(1, len(a)):
        s = mpmath.fsum((q * j - k) * a[j] * out[k - j] for j in range(1, k + 1))
        out.append(s / (k * a[0]))
    return out


def _sin_cos(a: Coefficients) -> tuple[Coefficients, Coefficients]:
    """k s_k = sum j a_j c_{k-j},  k c_k = -sum j a_j s_{k-j}."""
    s, c = [mpmath.sin(a[0])], [mpmath.cos(a[0])]
    ja = _scaled(a)
    for k in range(1, len(a)):
        s.append(mpmath.fsum(ja[j] * c[k - j] for j in range(1, k + 1)) / k)
        c.append(-mpmath.fsum(ja[j] * s[k - j] for j in range(1, k + 1)) / k)
    return s, c


def _scaled(a: Coefficients) -> list:
    """j a_j for every j, each computed once: the recurrences use the same rounded product for every k."""
    return [j * x for j, x in enumerate(a)]


def _sin(a: Coefficients) -> Coefficients:
    return _sin_cos(a)[0]


def _cos(a: Coefficients) -> Coefficients:
    return _sin_cos(a)[1]


__all__ = ["Unsupported", "compile_jet", "weight_function"]
