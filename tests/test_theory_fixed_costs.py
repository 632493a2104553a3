"""The fixed costs of a scheme's symbolic analysis: shortcuts that give what the plain computation gives.

Comparisons of monomials of the scale (:mod:`extrap.theory.scale`) with rational exponents and coefficients
walk down both sorted logarithms instead of building their quotient; the scale's L_k are constants; a
Piecewise's constant condition is not substituted at 15 huge distances.
"""

from __future__ import annotations

import random

import pytest
import sympy

from extrap.positional import get, ops
from extrap.positional.conventions import T
from extrap.theory import eventual as ev
from extrap.theory import scale
from extrap.theory.scale import GiveUp, Mono, _unit, log_scale, sign


def _plain_cmp(a: Mono, b: Mono) -> int:
    """The reference: the sign of the leading coefficient of Mono(log a - log b)."""
    diff = Mono(a.logm + tuple((pm, -c) for pm, c in b.logm))
    return sign(diff.logm[0][1]) if diff.logm else 0


def _random_mono(rng: random.Random) -> Mono:
    r = sympy.Rational
    logm = []
    for _ in range(rng.randint(0, 3)):
        k = rng.randint(1, 3)
        pm = tuple(r(rng.randint(-2, 2), rng.choice((1, 2, 3))) if i in (k, k + 1) else 0 for i in range(7))
        if any(pm):
            logm.append((tuple(map(sympy.sympify, pm)), r(rng.randint(-3, 3), rng.randint(1, 3))))
    return Mono(logm)


def test_rational_monomials_compare_as_their_quotient_does_without_building_it(monkeypatch):
    rng = random.Random(1)
    pool = [_random_mono(rng) for _ in range(60)] + [Mono(()), log_scale(1), log_scale(2), scale.T_MONO]
    pool += [Mono(m.logm) for m in pool[:10]]  # equal monomials, other objects
    pairs = [(a, b) for a in pool for b in rng.sample(pool, 12)]
    want = [_plain_cmp(a, b) for a, b in pairs]
    assert {-1, 0, 1} <= set(want)
    built = []
    real_init = Mono.__init__
    monkeypatch.setattr(Mono, "__init__", lambda self, logm: built.append(1) or real_init(self, logm))
    assert [a.cmp(b) for a, b in pairs] == want
    assert not built  # no quotient was built


def test_irrational_monomials_still_compare_through_their_quotient():
    a = Mono([(_unit(1), sympy.sqrt(2))])
    b = Mono([(_unit(1), sympy.Rational(7, 5))])
    assert a.exact_key() is None and b.exact_key() is not None
    assert a.cmp(b) == _plain_cmp(a, b) == 1 and b.cmp(a) == -1 and a.cmp(Mono(a.logm)) == 0


def test_log_scales_are_constants_equal_to_a_fresh_build():
    for k in range(6):
        assert log_scale(k) is log_scale(k)
        assert log_scale(k).logm == scale._log_scale(k).logm == Mono.power([0] * k + [1]).logm
    with pytest.raises(GiveUp):
        log_scale(6)


def test_a_constant_condition_is_eventually_itself_without_substitution(monkeypatch):
    """A window's Piecewise((0, t < W), (-oo, True)): its fallback condition is not tried at huge distances."""
    tried = []
    real = ev._truth
    monkeypatch.setattr(ev, "_truth", lambda cond, t, value: tried.append(cond) or real(cond, t, value))
    for cond in (sympy.true, sympy.false, True, False):
        assert ev.eventual_truth(cond, T) is bool(cond)
        assert {real(cond, T, n) for n in ev._HUGE} == {bool(cond)}  # what sampling gives
    tried.clear()
    form = get("window:W=40").fn(ops.SYMPY, T, {})
    assert ev.eventual(form, T) == (-sympy.oo, 40)
    assert sympy.true not in tried


@pytest.mark.parametrize("spec", ["t5", "t5:bidirectional=true", "t5:num_buckets=8,max_distance=5"])
def test_t5s_last_step_is_the_relation_sympy_evaluates_without_asking_it(spec, monkeypatch):
    """T5's form: its tail condition t >= start is built unevaluated, as its steps are, and is the very relation
    (and form) that sympy's evaluation gives; building it asks no assumption of t - start."""
    from sympy.core import relational

    from extrap.theory import forms

    scheme = get(spec)
    symbols = forms._symbols(scheme, scheme.init_values(2))
    asked = []
    real = relational.is_ge
    monkeypatch.setattr(relational, "is_ge", lambda *a, **k: asked.append(a) or real(*a, **k))
    form = scheme.fn(ops.SYMPY, T, symbols)
    assert not asked
    (value, cond), *steps = form.args
    assert cond == (T >= cond.rhs) and asked  # sympy's own evaluation: the same relation
    assert form == sympy.Piecewise((value, T >= cond.rhs), *steps, evaluate=False)


@pytest.mark.parametrize(
    "spec", ["type2", "kerple-power:r2=0.5", "formula:-2*log(1+t)-exp(-t)/(t+1)", "formula:-sqrt(t+3)*abs(t-2)"]
)
def test_a_series_puts_its_variable_in_by_xreplace_which_is_what_subs_gives(spec, monkeypatch):
    """Series' weight exp(r(x)): the tail form with t -> x (x > 0) rebuilt by xreplace, node for node what subs
    builds (no class in these forms substitutes a symbol its own way); subs itself is not called."""
    from extrap.theory import analyse, analysis, trf

    (row,) = analyse(spec, 1, eps=(1e-3,), lengths=None)
    scheme = get(spec)
    head = analysis._numeric_r(scheme, 0, scheme.init_values(1))
    form = row.detail.expr
    x = sympy.Symbol("x", positive=True)
    assert sympy.srepr(form.xreplace({T: x})) == sympy.srepr(form.subs(T, x))
    called = []
    real = sympy.Basic.subs
    monkeypatch.setattr(sympy.Basic, "subs", lambda self, *a, **k: called.append(a) or real(self, *a, **k))
    series = trf.Series(head, form, row.detail.cutoff)
    assert series.total > 0 and not [a for a in called if a[0] is T]


def _plain(terms, err=None):
    from extrap.theory.asymptotics import Expansion

    e = Expansion(terms, err)
    return [(m.logm, c) for m, c in e.terms], e.err


def test_scaling_and_splitting_an_expansion_keep_its_order_as_the_constructor_does(monkeypatch):
    """-f, c*f, f.growing() and f.small() of an expansion in rational monomials take its terms in its order; the
    constructor (merge, zero and error checks, sort) gives the same terms.  Others still go through it."""
    from extrap.theory.asymptotics import Expansion

    rng = random.Random(2)
    r = sympy.Rational
    pool = [_random_mono(rng) for _ in range(40)] + [Mono(()), log_scale(1), scale.T_MONO, scale.T_MONO ** r(1, 2)]
    cases = []
    for _ in range(60):
        terms = [
            (rng.choice(pool), r(rng.choice((-3, -1, 1, 2, 5)), rng.randint(1, 4))) for _ in range(rng.randint(0, 6))
        ]
        err = rng.choice([None, Mono(()), scale.T_MONO**-2, log_scale(2) ** -1])
        cases.append(Expansion(terms, err))
    irrational = Expansion([(scale.T_MONO, sympy.sqrt(2)), (Mono([(_unit(1), sympy.sqrt(3))]), r(1, 3))])
    built = []
    real_init = Expansion.__init__
    monkeypatch.setattr(Expansion, "__init__", lambda self, *a, **k: built.append(1) or real_init(self, *a, **k))
    for f in cases:
        for got, want in (
            (-f, _plain([(m, -c) for m, c in f.terms], f.err)),
            (f.scale(r(-7, 3)), _plain([(m, r(-7, 3) * c) for m, c in f.terms], f.err)),
            (f.growing(), _plain([(m, c) for m, c in f.terms if m.cmp(Mono(())) > 0])),
            (f.small(), _plain([(m, c) for m, c in f.terms if m.cmp(Mono(())) < 0], f.err)),
        ):
            assert ([(m.logm, c) for m, c in got.terms], got.err) == want
    fast = len(built)
    assert fast == 4 * len(cases)  # only the references were built
    assert [(m.logm, c) for m, c in (-irrational).terms] == _plain([(m, -c) for m, c in irrational.terms])[0]
    assert len(built) > fast + 1  # an irrational monomial: the constructor, as before


@pytest.mark.parametrize("spec", ["t5", "t5:bidirectional=true", "t5:num_buckets=8,max_distance=5"])
def test_t5s_form_is_built_from_its_buckets_steps_in_one_piecewise(spec, monkeypatch):
    """T5's form: the steps of t5_bucket's Piecewise, each with its table entry, after the tail's step; the bucket's
    own Piecewise is not built on the way (one Piecewise, not two)."""
    from extrap.positional.bias import t5_bucket
    from extrap.theory import forms

    scheme = get(spec)
    o = scheme.opts
    symbols = forms._symbols(scheme, scheme.init_values(2))
    bucket = t5_bucket(T, o["bidirectional"], o["num_buckets"], o["max_distance"], ops.SYMPY)
    pieces = []
    real = sympy.Piecewise.__new__
    monkeypatch.setattr(sympy.Piecewise, "__new__", lambda cls, *a, **k: pieces.append(a) or real(cls, *a, **k))
    form = scheme.fn(ops.SYMPY, T, symbols)
    assert len(pieces) == 1
    table = symbols["table"]
    assert form.args[1:] == tuple((table[int(b)], cond) for b, cond in bucket.args)
