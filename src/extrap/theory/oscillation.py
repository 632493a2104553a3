"""The level a bounded, oscillating bias r(t) keeps on average (its tail weight, 003 Eq. 6)."""

from __future__ import annotations

import sympy

from extrap.theory.scale import mentions


def oscillation_mean(expr, t):
    """Long-run mean of ``expr`` when it is affine in sin/cos of linear arguments in t.

    Each ``cos(w t + c)`` with ``w != 0`` averages to 0 over long ranges, so the
    mean of ``a + sum_i c_i cos(w_i t)`` is ``a`` (003 Eq. 6: Sandwich oscillates
    around ``-dbar/(2h)``).  Returns None when the form does not apply.
    """
    mean = []
    for term in sympy.Add.make_args(sympy.sympify(expr)):
        factors = sympy.Mul.make_args(term)
        dependent = [a for a in factors if mentions(a, t)]  # one walk of each term (Sandwich has 64)
        if not dependent:
            mean.append(term)
            continue
        if len(dependent) == 1 and dependent[0].is_Add:  # c*(a + cos(w t)): c times the inner mean
            inner = oscillation_mean(dependent[0], t)
            if inner is None:
                return None
            mean.append(sympy.Mul(*[a for a in factors if a is not dependent[0]]) * inner)
            continue
        if len(dependent) != 1 or not isinstance(dependent[0], (sympy.sin, sympy.cos)):
            return None
        if not _linear(dependent[0].args[0], t):
            return None
    return sympy.Add(*mean)


def _linear(arg, t) -> bool:
    """arg = a + w*t with w a nonzero constant: one term mentions t, and of its factors only t itself does."""
    dependent = [[f for f in sympy.Mul.make_args(a) if mentions(f, t)] for a in sympy.Add.make_args(arg)]
    dependent = [factors for factors in dependent if factors]  # each factor walked once
    return len(dependent) == 1 and len(dependent[0]) == 1 and dependent[0][0] == t


__all__ = ["oscillation_mean"]
