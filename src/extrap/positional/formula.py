"""User formulas for a bias, e.g. ``"-2*log(n)"`` or ``"-(log(n))**2"``.

The text is parsed with Python's :mod:`ast` and walked node by node against a
whitelist (numbers, ``t``, ``n``, + - * / **, and a few functions).  Nothing is
ever passed to ``eval``: the walk builds a small tree that is evaluated on any
backend, so a formula plugs into the model, the theory engine and the plots
exactly like a built-in scheme.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

import sympy

from extrap.errors import ExtrapError
from extrap.positional import ops
from extrap.positional.base import BiasRPE, Option
from extrap.positional.conventions import T, n_from_t

MAX_LENGTH = 400
VARIABLES = ("t", "n")
FUNCTIONS = ("log", "exp", "sqrt", "cos", "sin", "abs", "min", "max")
CONSTANTS = {"pi": "pi", "e": "e", "E": "e"}

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}

Node = Callable[[Any, Any], Any]  # (xp, t) -> value


def looks_like_formula(text: str) -> bool:
    """Heuristic used by the registry: contains a variable or an operator."""
    return bool(re.search(r"[()*/+\-^]|\b[tn]\b", text))


def compile_formula(text: str) -> Node:
    """Parse ``text`` into an evaluable tree; raise ExtrapError naming what is refused."""
    if len(text) > MAX_LENGTH:
        raise ExtrapError(f"formula is longer than {MAX_LENGTH} characters")
    if "__" in text:
        raise ExtrapError("formula refused: names with '__' are not allowed")
    try:
        tree = ast.parse(text.replace("^", "**"), mode="eval")
    except SyntaxError as e:
        raise ExtrapError(f"malformed formula {text!r}: {e.msg}") from None
    return _build(tree.body, text)


def _build(node: ast.AST, text: str) -> Node:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        value = node.value
        return lambda xp, t: xp.const(value, t) if isinstance(value, float) else value
    if isinstance(node, ast.Name):
        if node.id == "t":
            return lambda xp, t: t
        if node.id == "n":
            return lambda xp, t: n_from_t(t)
        if node.id in CONSTANTS:
            return (lambda xp, t: xp.pi) if CONSTANTS[node.id] == "pi" else (lambda xp, t: xp.exp(xp.const(1, t)))
        raise ExtrapError(f"formula refused: unknown name '{node.id}' (use t, n, pi, e and {', '.join(FUNCTIONS)})")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        op, a, b = _BINOPS[type(node.op)], _build(node.left, text), _build(node.right, text)
        return lambda xp, t: op(a(xp, t), b(xp, t))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        a = _build(node.operand, text)
        sign = -1 if isinstance(node.op, ast.USub) else 1
        return lambda xp, t: sign * a(xp, t)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise ExtrapError("formula refused: only plain function calls like log(n) are allowed")
        fname = node.func.id
        if fname not in FUNCTIONS:
            raise ExtrapError(f"formula refused: unknown function '{fname}' (allowed: {', '.join(FUNCTIONS)})")
        if node.keywords:
            raise ExtrapError(f"formula refused: keyword arguments in {fname}()")
        args = [_build(a, text) for a in node.args]
        arity = 2 if fname in ("min", "max") else 1
        if len(args) != arity:
            raise ExtrapError(f"formula: {fname}() takes {arity} argument{'s' * (arity > 1)}")
        attr = {"min": "minimum", "max": "maximum"}.get(fname, fname)
        return lambda xp, t: getattr(xp, attr)(*(a(xp, t) for a in args))
    if isinstance(node, ast.Attribute):
        raise ExtrapError("formula refused: attribute access is not allowed")
    what = type(node).__name__
    raise ExtrapError(f"formula refused: {what} is not allowed (use numbers, t, n, + - * / ** and functions)")


class Formula(BiasRPE):
    """A user-written bias r(t) in ``t`` and ``n = t + 1``, the same in every head."""

    name = "formula"
    summary = 'your own bias r(t), e.g. "-2*log(n)" (t = i - j, n = t + 1)'
    reference = "any Toeplitz bias; verdict by Qin et al. 2024 Theorem 0.4"
    OPTIONS = (Option("expr", str, "", "the formula"),)

    def validate(self):
        expr = self.opts["expr"].strip()
        if not expr:
            raise ExtrapError("formula: empty expression")
        self._node = compile_formula(expr)
        # reject formulas that never mention the distance only if they are not constants: a
        # constant is legitimate (it is NoPE shifted), so just check it evaluates.
        value = self._node(ops.SYMPY, T)
        if not isinstance(value, sympy.Basic):
            value = sympy.sympify(value)
        if value.has(sympy.zoo, sympy.nan):
            raise ExtrapError(f"formula {expr!r} is undefined")

    @property
    def spec(self) -> str:
        return self.opts["expr"].strip()

    def fn(self, xp, t, p, i=None):
        return self._node(xp, t)
