"""Sandwich's structure (:mod:`extrap.theory.forms`): its sum of d̄/2 kept cosines is evaluated once, with
one canonical sort, and the form is the one that evaluating each node in turn gives."""

from __future__ import annotations

import pytest
import sympy
import sympy.core.add

from extrap.positional import get, ops
from extrap.positional.conventions import T
from extrap.theory import forms


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
