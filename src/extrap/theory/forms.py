"""Each head's symbolic r(t) from one form per scheme structure.

A scheme's sympy form is the same expression for every head with different numbers in
it (ALiBi's slope, KERPLE's r1 and r2, Sandwich's compression ratio, a T5 table).  It is
built once with each head parameter as a symbol, and each head's r(t) is that form with
the head's exact values put in (``xreplace``, which re-evaluates each rebuilt node as
sympy would have on construction).  Building it per head repeats the costly part (64
cosines for Sandwich, a Piecewise of buckets for T5) for every head.

A scheme whose ``fn`` cannot take symbols (a Python ``if`` on a parameter value) is
built head by head with :meth:`BiasRPE.symbolic`, as before.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy
import torch

from extrap.positional import ops
from extrap.positional.base import BiasRPE
from extrap.positional.conventions import T


class _TrigBackend:
    """The sympy backend, except that cos and sin of ``c*t`` (c a product of positive rationals and their
    rational powers, t the distance) skip sympy's ``eval``: its rewrites (negation, multiples of pi or
    of I, numbers, inverse functions) never apply there, so the result is the same expression, for
    about a tenth of the cost (Sandwich has 64 such cosines)."""

    def __init__(self, base):
        self._base = base

    def __getattr__(self, name: str):
        return getattr(self._base, name)

    def cos(self, x):
        return sympy.cos(x, evaluate=False) if _plain_multiple(x) else sympy.cos(x)

    def sin(self, x):
        return sympy.sin(x, evaluate=False) if _plain_multiple(x) else sympy.sin(x)


def _plain_multiple(x) -> bool:
    """x is t or c*t with c > 0 built from rationals and rational powers of positive rationals."""
    if x == T:
        return True
    if not isinstance(x, sympy.Mul) or sum(1 for f in x.args if f == T) != 1:
        return False
    return all(f == T or _positive_constant(f) for f in x.args)


def _positive_constant(f) -> bool:
    if f.is_Rational:
        return f > 0
    return f.is_Pow and f.base.is_Rational and f.base > 0 and f.exp.is_Rational


_TEMPLATES: dict[tuple, tuple | None] = {}  # scheme structure -> (form, {param: symbol or [symbols]}) or None


def clear() -> None:
    _TEMPLATES.clear()


def head_form(scheme: BiasRPE, values: Mapping[str, torch.Tensor], head: int):
    """``scheme.symbolic(head, values)``, from the scheme's form with symbols for its parameters."""
    shapes = tuple((k, tuple(v.shape[1:])) for k, v in sorted(values.items()))
    key = (type(scheme).__name__, scheme.spec, shapes)
    if key not in _TEMPLATES:
        _TEMPLATES[key] = _template(scheme, values)
    template = _TEMPLATES[key]
    if template is None:
        return scheme.symbolic(head, values)
    form, symbols = template
    exact = scheme.head_values(values, head)
    mapping = {}
    for name, sym in symbols.items():
        if isinstance(sym, list):
            mapping.update(zip(sym, exact[name]))
        else:
            mapping[sym] = exact[name]
    return form.xreplace(mapping) if mapping else form


def _template(scheme: BiasRPE, values: Mapping[str, torch.Tensor]):
    """(form with symbols, symbols by parameter), or None when ``fn`` needs numbers."""
    symbols: dict = {}
    for name, v in sorted(values.items()):
        size = int(v[0].numel()) if v.dim() > 1 else 0
        base = f"param_{name}"
        symbols[name] = (
            [sympy.Dummy(f"{base}_{i}", real=True) for i in range(size)] if size else sympy.Dummy(base, real=True)
        )
    try:
        form = scheme.fn(_TrigBackend(ops.SYMPY), T, symbols)
    except (TypeError, ValueError, ArithmeticError, AttributeError, NotImplementedError, IndexError):
        return None  # e.g. a comparison of a parameter with a number decides a Python branch
    return sympy.sympify(form), symbols


__all__ = ["clear", "head_form"]
