"""User formulas for a bias, e.g. ``"-2*log(n)"`` or ``"-(log(n))**2"``.

The text is parsed with Python's :mod:`ast` and walked node by node against a
whitelist (numbers, ``t``, ``n``, + - * / **, and a few functions).  Nothing is
ever passed to ``eval``: the walk builds a small tree that is evaluated on any
backend, so a formula plugs into the model, the theory engine and the plots
exactly like a built-in scheme.

Constant sub-expressions (``log(2)``, ``2**10``) are folded once, at compile time,
exactly (sympy) and as a float, each step bounded in magnitude, digits and time, so
``2**10**10`` or ``1/0`` is refused in one line instead of hanging or crashing.  A
compiled formula is then evaluated on the distances the model and the numerics use;
a bias that is NaN or +inf there, or -inf at t = 0 (where a token would attend to
nothing), is refused, naming the distance.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from typing import Any

import mpmath

from extrap.errors import ExtrapError
from extrap.positional import conventions, ops
from extrap.positional.base import BiasRPE, Option
from extrap.positional.conventions import n_from_t
from extrap.timeout import TimeLimit, time_limit

MAX_LENGTH = 400
VARIABLES = ("t", "n")
FUNCTIONS = ("log", "exp", "sqrt", "cos", "sin", "abs", "min", "max")
CONSTANTS = {"pi": "pi", "e": "e", "E": "e"}
MAX_DIGITS = 2000  # decimal digits of an exact constant's numerator or denominator
CHECK_SECONDS = 2.0  # folding constants and the symbolic checks of one formula
PREFIX = 1024  # distances 0..PREFIX-1 must all carry a finite bias
FAR = tuple(2**k for k in range(11, 21))  # longer contexts, up to the numerics' 10**6: no NaN, no +inf
TAIL = tuple(10**k for k in range(7, 16))  # the far tail: a NaN there means r is complex or undefined

_BINOPS = {  # on backend xp; xp.divide makes a pole +-inf on each of them
    ast.Add: lambda xp, a, b: a + b,
    ast.Sub: lambda xp, a, b: a - b,
    ast.Mult: lambda xp, a, b: a * b,
    ast.Div: lambda xp, a, b: xp.divide(a, b),
    ast.Pow: lambda xp, a, b: a**b,
}


class Refused(Exception):
    """A constant sub-expression that cannot be evaluated: the formula is invalid."""


class Const:
    """A folded constant: ``exact`` (sympy) and ``approx``, its float64 value."""

    def __init__(self, exact, approx: float):
        self.exact, self.approx = exact, approx
        self._mp: dict[int, Any] = {}

    def mpf(self):
        """The value at mpmath's working precision (computed once per precision)."""
        import sympy

        prec = mpmath.mp.prec
        if prec not in self._mp:
            self._mp[prec] = mpmath.mpf(sympy.Float(self.exact.evalf(mpmath.mp.dps + 5), mpmath.mp.dps + 5)._mpf_)
        return self._mp[prec]


def number(value: int | float, text: str) -> Const:
    import sympy  # here, not at the top: the registry loads without sympy

    if isinstance(value, float):
        if not math.isfinite(value):
            raise Refused(f"{text} is not a finite number")
        return Const(sympy.Rational(repr(value)), value)
    return _checked(sympy.Integer(value), text)


def _digits(exact) -> float:
    """Decimal digits of the largest numerator or denominator in ``exact``."""
    import sympy

    bits = max((max(abs(r.p).bit_length(), r.q.bit_length()) for r in exact.atoms(sympy.Rational)), default=0)
    return bits * math.log10(2)


def _checked(exact, text: str) -> Const:
    """``exact`` with its float value, refused unless it is a real number within float64's range."""
    import sympy
    from sympy.core.evalf import PrecisionExhausted

    if exact.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
        raise Refused(f"{text} is undefined")
    if _digits(exact) > MAX_DIGITS:
        raise Refused(f"{text} needs more than {MAX_DIGITS} digits")
    if exact.is_extended_real is False:
        raise Refused(f"{text} is not a real number")
    try:
        value = exact.evalf(20, strict=True)
    except PrecisionExhausted:  # e.g. log(8) - 3*log(2): zero, or too close to tell
        exact = sympy.simplify(exact)
        if exact != 0:
            raise Refused(f"{text} cannot be told apart from 0") from None
        value = exact
    if not value.is_extended_real:
        raise Refused(f"{text} is not a real number")
    approx = float(value)
    if not math.isfinite(approx):
        raise Refused(f"{text} is out of range (beyond 1.8e308)")
    return Const(exact, approx)


def fold_unary(sign: int, a: Const) -> Const:
    return Const(sign * a.exact, sign * a.approx)


def fold_binop(kind: type, a: Const, b: Const, text: str) -> Const:
    if (kind is ast.Div and b.exact == 0) or (kind is ast.Pow and a.exact == 0 and b.approx < 0):
        raise Refused(f"{text} divides by zero")
    if kind is ast.Pow and b.exact.is_Rational and a.exact not in (0, 1, -1):
        if abs(b.approx) * _digits(a.exact) > MAX_DIGITS:  # checked before sympy expands it exactly
            raise Refused(f"{text} needs more than {MAX_DIGITS} digits")
    return _checked(_BINOPS[kind](ops.SYMPY, a.exact, b.exact), text)


_EXACT = {"log": "log", "exp": "exp", "sqrt": "sqrt", "cos": "cos", "sin": "sin"}  # function -> sympy's name
_EXACT |= {"abs": "Abs", "min": "Min", "max": "Max"}


def fold_call(fname: str, args: list[Const], text: str) -> Const:
    if fname == "log" and args[0].exact == 0:
        raise Refused(f"{text} is -infinity")
    import sympy

    return _checked(getattr(sympy, _EXACT[fname])(*(a.exact for a in args)), text)


class Node:
    """One node of a compiled formula: ``node(xp, t)``; ``const`` is set when it does not depend on t."""

    def __init__(self, fn: Callable[[Any, Any], Any], const: Const | None = None):
        self.fn, self.const = fn, const

    def __call__(self, xp, t):
        return self.fn(xp, t)


def looks_like_formula(text: str) -> bool:
    """Heuristic used by the registry: contains a variable or an operator, or is a number."""
    return bool(re.search(r"[()*/+\-^]|\b[tn]\b", text) or re.match(r"\s*[0-9.]", text))


def compile_formula(text: str) -> Node:
    """Parse ``text`` into an evaluable tree; raise ExtrapError naming what is refused."""
    if len(text) > MAX_LENGTH:
        raise ExtrapError(f"formula is longer than {MAX_LENGTH} characters")
    if "__" in text:
        raise ExtrapError("formula refused: names with '__' are not allowed")
    source = text.replace("^", "**")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:  # ValueError: a NUL byte
        raise ExtrapError(f"malformed formula {text!r}: {getattr(e, 'msg', None) or type(e).__name__}") from None
    try:
        with time_limit(CHECK_SECONDS, required=False):
            return _Builder(source).build(tree.body)
    except Refused as e:
        raise ExtrapError(f"formula {text} is invalid: {e}") from None
    except TimeLimit:
        raise ExtrapError(
            f"formula {text} is invalid: its constants take over {CHECK_SECONDS:g} s to evaluate"
        ) from None
    except RecursionError:
        raise ExtrapError(f"formula {text} is nested too deeply") from None


class _Builder:
    """The whitelist walk: every accepted node becomes a :class:`Node`; constants are folded."""

    def __init__(self, source: str):
        self.source = source

    def text(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or ast.unparse(node)

    def build(self, node: ast.AST) -> Node:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return _constant(number(node.value, self.text(node)))
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return self._binop(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            a = self.build(node.operand)
            sign = -1 if isinstance(node.op, ast.USub) else 1
            if a.const is not None:
                return _constant(fold_unary(sign, a.const))
            return Node(lambda xp, t: sign * a(xp, t))
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Attribute):
            raise ExtrapError("formula refused: attribute access is not allowed")
        what = type(node).__name__
        raise ExtrapError(f"formula refused: {what} is not allowed (use numbers, t, n, + - * / ** and functions)")

    def _name(self, node: ast.Name) -> Node:
        if node.id == "t":
            return Node(lambda xp, t: t)
        if node.id == "n":
            return Node(lambda xp, t: n_from_t(t))
        if node.id in CONSTANTS:
            import sympy

            exact = sympy.pi if CONSTANTS[node.id] == "pi" else sympy.E
            return _constant(Const(exact, float(exact)))
        raise ExtrapError(f"formula refused: unknown name '{node.id}' (use t, n, pi, e and {', '.join(FUNCTIONS)})")

    def _binop(self, node: ast.BinOp) -> Node:
        a, b = self.build(node.left), self.build(node.right)
        kind = type(node.op)
        if a.const is not None and b.const is not None:
            return _constant(fold_binop(kind, a.const, b.const, self.text(node)))
        if kind is ast.Div and b.const is not None and b.const.exact == 0:
            raise Refused(f"{self.text(node)} divides by zero")
        op = _BINOPS[kind]
        return Node(lambda xp, t: op(xp, a(xp, t), b(xp, t)))

    def _call(self, node: ast.Call) -> Node:
        if not isinstance(node.func, ast.Name):
            raise ExtrapError("formula refused: only plain function calls like log(n) are allowed")
        fname = node.func.id
        if fname not in FUNCTIONS:
            raise ExtrapError(f"formula refused: unknown function '{fname}' (allowed: {', '.join(FUNCTIONS)})")
        if node.keywords:
            raise ExtrapError(f"formula refused: keyword arguments in {fname}()")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise ExtrapError(f"formula refused: starred arguments in {fname}()")
        arity = 2 if fname in ("min", "max") else 1
        if len(node.args) != arity:
            raise ExtrapError(f"formula: {fname}() takes {arity} argument{'s' * (arity > 1)}")
        args = [self.build(a) for a in node.args]
        if all(a.const is not None for a in args):
            return _constant(fold_call(fname, [a.const for a in args], self.text(node)))
        attr = {"min": "minimum", "max": "maximum"}.get(fname, fname)
        return Node(lambda xp, t: getattr(xp, attr)(*(a(xp, t) for a in args)))


def _constant(c: Const) -> Node:
    """A folded constant: exact for sympy, its float for torch, at the working precision for mpmath."""

    def fn(xp, t):
        if xp.name == "sympy":
            return c.exact
        if xp.tensors:
            return xp.const(c.approx, t)
        return c.mpf()

    return Node(fn, c)


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
        _check_distances(self._node, expr)
        _check_symbolic(self._node, expr)

    @property
    def spec(self) -> str:
        return self.opts["expr"].strip()

    def fn(self, xp, t, p, i=None):
        out = self._node(xp, t)
        if xp.name == "torch" and out.shape != t.shape:  # a constant formula: one value per distance
            out = out.expand(t.shape)
        return out


def _check_distances(node: Node, expr: str) -> None:
    """Refuse a bias that is NaN or +inf at a distance the model or the numerics use (-inf at t = 0)."""
    import torch  # here, not at the top: the registry loads without torch

    near = torch.arange(PREFIX, dtype=torch.float64)
    t = torch.cat([near, torch.tensor(FAR + TAIL, dtype=torch.float64)])
    with torch.no_grad():
        try:
            r = node(ops.TORCH, t).expand(t.shape)
        except RuntimeError as e:
            raise ExtrapError(f"formula {expr} cannot be evaluated: {str(e).splitlines()[0]}") from None
    bad = torch.isnan(r)
    bad[: PREFIX + len(FAR)] |= r[: PREFIX + len(FAR)] == math.inf
    bad[0] |= r[0] == -math.inf
    if bool(bad.any()):
        k = int(torch.nonzero(bad)[0])
        what = "not a real number" if math.isnan(float(r[k])) else "not finite"
        raise ExtrapError(f"formula {expr} is {what} at t = {int(t[k])} (r = {float(r[k])})")


def _check_symbolic(node: Node, expr: str) -> None:
    """The exact form must exist and be real (a complex formula has no softmax weight)."""
    import sympy

    try:
        with time_limit(CHECK_SECONDS, required=False):
            value = sympy.sympify(node(ops.SYMPY, conventions.T))
            undefined = value.has(sympy.zoo, sympy.nan)
            real = None if undefined else value.is_extended_real
    except TimeLimit:
        raise ExtrapError(f"formula {expr} takes over {CHECK_SECONDS:g} s to evaluate symbolically") from None
    except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError) as e:
        raise ExtrapError(f"formula {expr} cannot be evaluated symbolically: {type(e).__name__}") from None
    if undefined:
        raise ExtrapError(f"formula {expr} is undefined")
    if real is False:
        raise ExtrapError(f"formula {expr} takes complex values")
