"""Sandwich's structure (:mod:`extrap.theory.forms`): its sum of d̄/2 kept cosines is evaluated once, with
one canonical sort, and the form is the one that evaluating each node in turn gives; its tail level
(:func:`extrap.theory.oscillation.oscillation_mean`) walks each cosine once."""

from __future__ import annotations

import pytest
import sympy
import sympy.core.add

from extrap.positional import get, ops
from extrap.positional.conventions import T
from extrap.theory import forms, oscillation


def _node_by_node(e):
    """Each node rebuilt with evaluation, bottom-up, trig terms of c*t kept as built: forms' rule, no shortcut."""
    if not e.args or forms._kept_trig(e):
        return e
    return e.func(*[_node_by_node(a) for a in e.args])


@pytest.mark.parametrize("dbar", [2, 16, 128])
@pytest.mark.parametrize("base", [10000.0, 500.5])
def test_sandwich_form_sorts_its_cosines_once_and_is_the_node_by_node_form(dbar, base, monkeypatch):
    scheme = get(f"sandwich:dbar={dbar},base={base}")
    symbols = forms._symbols(scheme, scheme.init_values(8))
    with sympy.evaluate(False):
        raw = sympy.sympify(scheme.fn(ops.SYMPY, T, symbols))
    expected = _node_by_node(raw)
    sorts, original = [], sympy.core.add._addsort
    monkeypatch.setattr(sympy.core.add, "_addsort", lambda args: sorts.append(len(args)) or original(args))
    built = forms._build(scheme, symbols, shared=False)
    assert built == expected and sympy.srepr(built) == sympy.srepr(expected)
    assert sum(1 for n in sorts if n >= dbar // 2) == 1  # not once for the cosines, then again with - d̄/2


W = sympy.Rational(1, 3)


@pytest.mark.parametrize(
    "expr, mean",
    [
        (sympy.Rational(-5, 2) + sum(sympy.cos(T * 2**-k) for k in range(4)), sympy.Rational(-5, 2)),
        ((sympy.cos(W * T) + sympy.sin(T + 1) - 4) / 7, sympy.Rational(-4, 7)),
        (sympy.cos(T**2) - 1, None),  # not linear in t
        (T * sympy.cos(T), None),  # an amplitude that grows
        (sympy.cos(T * sympy.log(T + 1)) + 2, None),
        (sympy.cos(sympy.Mul(T, T, evaluate=False)), None),  # t twice among the factors
    ],
)
def test_oscillation_mean_of_affine_sums_of_trig_terms(expr, mean):
    assert oscillation.oscillation_mean(expr, T) == mean


def test_oscillation_mean_walks_each_cosine_of_sandwich_once(monkeypatch):
    """mentions() on the cosine, then on t and on its frequency: 3 calls per cosine (5 before)."""
    scheme = get("sandwich")
    symbols = forms._symbols(scheme, scheme.init_values(8))
    ev = forms._build(scheme, symbols, shared=False)
    calls, original = [], oscillation.mentions
    monkeypatch.setattr(oscillation, "mentions", lambda e, t: calls.append(e) or original(e, t))
    assert oscillation.oscillation_mean(ev, T) == -64 / symbols["ratio"]  # 003 Eq. 6: -d̄/(2h)
    assert len(calls) <= 3 * 64 + 3
