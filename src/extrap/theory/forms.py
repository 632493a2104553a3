"""Each head's verdict from one symbolic analysis per scheme structure.

A scheme's sympy form is the same expression for every head with different numbers in
it (ALiBi's slope, KERPLE's r1, Sandwich's compression ratio, a T5 table).  It is built
once, with a symbol for every parameter entry that differs between heads (entries that
all heads share go in as their exact values), and analysed once:

* its eventual branch and cutoff (:mod:`extrap.theory.eventual`), when no condition
  depends on a parameter (T5's buckets, a window);
* its verdict (:func:`extrap.theory.convergence.classify_tail`), when the asymptotic
  expansion decides it from the signs of the parameters alone (each symbol is positive
  or negative when every head's value is): Sandwich's bounded oscillation for every
  compression ratio.  A head then gets that verdict with its values put in
  (:meth:`Verdict.for_head`).

Otherwise each head's form is the structure's with the head's exact values put in
(``xreplace``, which re-evaluates each rebuilt node as sympy would have on
construction), and is classified on its own.  A scheme whose ``fn`` cannot take
symbols (a Python ``if`` on a parameter value) is built head by head with
:meth:`BiasRPE.symbolic`, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import sympy
import torch

from extrap.positional import ops
from extrap.positional.base import BiasRPE
from extrap.positional.conventions import T
from extrap.theory.asymptotics import GiveUp
from extrap.theory.convergence import Substitution, Verdict, classify, classify_tail, classify_vanishing_sum
from extrap.theory.eventual import Undecided, eventual
from extrap.theory.scale import mentions

_PREFIX = "param_"  # symbol names: a verdict whose text names one holds no head's numbers
_FAILURES = (GiveUp, Undecided, TypeError, ValueError, ArithmeticError, AttributeError, NotImplementedError)


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


@dataclass
class _Structure:
    """A scheme's form with symbols for the parameter entries that differ between heads."""

    form: sympy.Expr
    symbols: dict  # parameter -> symbol, exact value, or a list of them (vector parameters)
    tail: tuple | None = None  # (eventual branch, cutoff) of ``form``, the same for every head
    verdict: Verdict | None = None  # classify_tail of that branch, valid for every head

    def subs(self, scheme: BiasRPE, values: Mapping[str, torch.Tensor], head: int) -> Substitution:
        """symbol -> the head's exact value, from ``scheme.head_values`` of the parameters that have a
        symbol (the others are in the form already: T5's 8 x 32 table need not become 256 rationals again)."""
        varying = {name: values[name] for name, sym in self.symbols.items() if any(map(_is_symbol, _as_list(sym)))}
        exact = scheme.head_values(varying, head) if varying else {}
        out = {}
        for name in exact:
            sym = self.symbols[name]
            pairs = zip(sym, exact[name]) if isinstance(sym, list) else [(sym, exact[name])]
            out.update((s, v) for s, v in pairs if _is_symbol(s))
        return out

    def deferred_subs(self, scheme: BiasRPE, values: Mapping[str, torch.Tensor], head: int) -> Callable:
        """:meth:`subs` on first call (then remembered), from a copy of the head's parameters taken now: a
        verdict that holds for every head needs the exact values only where an expression is rebuilt."""
        row = {name: values[name][head : head + 1].detach().clone() for name in self.symbols}
        return functools.cache(lambda: self.subs(scheme, row, 0))


def _is_symbol(x) -> bool:
    return isinstance(x, sympy.Dummy)


_STRUCTURES: dict[tuple, _Structure | None] = {}


def clear() -> None:
    _STRUCTURES.clear()


def head_verdict(scheme: BiasRPE, values: Mapping[str, torch.Tensor], head: int) -> Verdict:
    """The verdict of ``scheme.symbolic(head, values)``, from the scheme's structure where it decides."""
    key = (type(scheme).__name__, scheme.spec, _fingerprint(values))
    if key not in _STRUCTURES:
        _STRUCTURES[key] = _analyse(scheme, values)
    s = _STRUCTURES[key]
    if s is None:
        return classify(scheme.symbolic(head, values))
    if s.verdict is not None:
        return s.verdict.for_head(s.deferred_subs(scheme, values, head))
    subs = s.subs(scheme, values, head)
    if s.tail is not None:
        return classify_tail(s.tail[0].xreplace(subs), s.tail[1])
    return classify(s.form.xreplace(subs))


def _fingerprint(values: Mapping[str, torch.Tensor]) -> tuple:
    return tuple((k, tuple(v.shape), tuple(v.detach().double().flatten().tolist())) for k, v in sorted(values.items()))


def _analyse(scheme: BiasRPE, values: Mapping[str, torch.Tensor]) -> _Structure | None:
    """The structure, its eventual branch and its verdict where they hold for every head."""
    symbols = _symbols(scheme, values)
    shared = not any(isinstance(x, sympy.Dummy) for x in _flat(symbols.values()))
    try:
        form = _build(scheme, symbols, shared)
    except (TypeError, ValueError, ArithmeticError, AttributeError, NotImplementedError, IndexError):
        return None  # e.g. a comparison of a parameter with a number decides a Python branch
    s = _Structure(form, symbols)
    if shared:
        s.verdict = classify(form)  # every head has this very form
        return s
    try:
        s.tail = eventual(form, T)
        s.verdict = _structural_verdict(*s.tail)
    except _FAILURES:  # a condition or a sign depends on the head's numbers: decided per head
        return s
    texts = (s.verdict.explanation, s.verdict.test, s.verdict.growth or "")
    if any(_PREFIX in text for text in texts):
        s.verdict = None  # the explanation quotes a parameter: each head states its own number
    return s


def _structural_verdict(ev, cutoff: int) -> Verdict:
    """The verdict of the eventual branch with symbols in it: when it is a sum of terms that each tend to 0
    (TISA's Gaussians, whose order depends on each head's widths), r -> 0; otherwise from its expansion."""
    try:  # first, as it is cheaper: where it holds, the expansion gives the same verdict (r -> 0, error o(1))
        return classify_vanishing_sum(ev, cutoff)
    except GiveUp:
        return classify_tail(ev, cutoff, timeout=None)


def _build(scheme: BiasRPE, symbols: dict, shared: bool):
    """The form, evaluated as sympy builds it; with symbols, built unevaluated and then evaluated node by
    node, except sin/cos of c*t (their argument stays as written: Sandwich's 64 constants 10000^(-k/64)
    cost more to put in sympy's canonical form than the whole verdict, which only needs |cos| <= 1)."""
    if shared:
        return sympy.sympify(scheme.fn(_TrigBackend(ops.SYMPY), T, symbols))
    with sympy.evaluate(False):
        raw = sympy.sympify(scheme.fn(ops.SYMPY, T, symbols))
    return _evaluated(raw)


def _evaluated(e):
    """``e`` rebuilt bottom-up with evaluation, but for trig functions of c*t, relations and Piecewise,
    which are kept as built (a Piecewise's branches are evaluated, not its list of them)."""
    if not e.args or isinstance(e, sympy.core.relational.Relational):
        return e
    if _kept_trig(e):
        return e
    args = _evaluated_terms(e.args) if isinstance(e, sympy.Add) else [_evaluated(a) for a in e.args]
    return e.func(*args, evaluate=False) if isinstance(e, sympy.Piecewise) else e.func(*args)


def _kept_trig(e) -> bool:
    return isinstance(e, (sympy.cos, sympy.sin)) and _scaled_distance(e.args[0])


def _evaluated_terms(terms) -> list:
    """The terms of a sum, each :func:`_evaluated`; a term that is an earlier one with other parameter symbols
    (TISA's K Gaussians a_k exp(-|b_k| (t - c_k)^2)) is that one's result with its symbols renamed.

    Evaluation is the same function of the tree for both: the symbols carry the same assumptions and
    compare in the same order (sympy sorts by name, then by Dummy index), and nothing else of a symbol
    enters it.  Each Gaussian's evaluation costs milliseconds of assumption queries; a renaming, none.

    A term that is a sum of kept trig terms (Sandwich's 64 cosines, then - d̄/2) gives its terms: sympy's Add
    puts an evaluated inner sum's terms in its own place and collects the same (coefficient, term) pairs, so
    the outer sum is the same, its cosines sorted once instead of twice.
    """
    out, seen = [], {}
    for term in terms:
        if isinstance(term, sympy.Add) and all(map(_kept_trig, term.args)):
            out.extend(term.args)
            continue
        symbols = _plain_dummies(term)
        if not symbols:
            out.append(_evaluated(term))
            continue
        key = _rename(term, {d: sympy.Symbol(f"shape_{i}", **d.assumptions0) for i, d in enumerate(symbols)})
        if key in seen and _order(seen[key][0]) == _order(symbols):
            out.append(_rename(seen[key][1], dict(zip(seen[key][0], symbols))))
            continue
        out.append(_evaluated(term))
        seen[key] = (symbols, out[-1])
    return out


def _plain_dummies(e) -> list:
    """The Dummy symbols of ``e`` in order of first appearance; [] unless ``e`` is built of sums, products,
    powers and functions only (no Piecewise, relation or trig function kept unevaluated)."""
    found = []
    for x in sympy.preorder_traversal(e):
        if isinstance(x, sympy.Dummy):
            found += [x] if x not in found else []
        elif x.args and not isinstance(x, (sympy.Add, sympy.Mul, sympy.Pow, sympy.exp, sympy.Abs, sympy.log)):
            return []
    return found


def _order(symbols: list) -> list:
    return [[(a.name, a.dummy_index) < (b.name, b.dummy_index) for b in symbols] for a in symbols]


def _rename(e, mapping: dict):
    """``e`` with its symbols replaced as in ``mapping``, every node kept as it is (no evaluation)."""
    if not e.args:
        return mapping.get(e, e)
    return e.func(*[_rename(a, mapping) for a in e.args], evaluate=False)


def _scaled_distance(arg) -> bool:
    """arg is t, or a product of t with factors free of t."""
    if arg == T:
        return True
    return (
        isinstance(arg, sympy.Mul)
        and sum(1 for f in arg.args if f == T) == 1
        and not any(mentions(f, T) for f in arg.args if f != T)
    )


def _flat(items) -> list:
    return [x for item in items for x in (item if isinstance(item, list) else [item])]


def _symbols(scheme: BiasRPE, values: Mapping[str, torch.Tensor]) -> dict:
    """Per parameter: its exact value where every head has the same, else a symbol with the sign all heads share."""
    rows = {name: v.detach().double().reshape(v.shape[0], -1).T.tolist() for name, v in values.items()}  # per entry
    shared = {name for name, r in rows.items() if any(len(set(row)) == 1 for row in r)}
    first = scheme.head_values({name: values[name] for name in shared}, 0)  # exact only where needed (TISA: none)
    out: dict = {}
    for name, v in sorted(values.items()):
        exact = _as_list(first[name]) if name in shared else [None] * len(rows[name])
        entries = [
            first_value if len(set(row)) == 1 else _symbol(f"{name}_{i}", row)
            for i, (row, first_value) in enumerate(zip(rows[name], exact))
        ]
        out[name] = entries if v.dim() > 1 else entries[0]
    return out


def _as_list(x) -> list:
    return x if isinstance(x, list) else [x]


def _symbol(name: str, row: list) -> sympy.Dummy:
    if all(x > 0 for x in row):
        return sympy.Dummy(_PREFIX + name, positive=True)
    if all(x < 0 for x in row):
        return sympy.Dummy(_PREFIX + name, negative=True)
    if all(x != 0 for x in row):  # TISA's offsets: either sign, never 0
        return sympy.Dummy(_PREFIX + name, real=True, nonzero=True)
    return sympy.Dummy(_PREFIX + name, real=True)


__all__ = ["clear", "head_verdict"]
