"""The fast paths of the theory engine give what the slow ones give.

* One symbolic analysis per scheme structure (:mod:`extrap.theory.forms`): each head's verdict
  equals the one of its own form, built and classified head by head (TISA's included, whose
  structure is decided term by term).
* Taylor-jet derivatives (:mod:`extrap.theory.jets`) equal mpmath's numerical ones, and their shortcuts
  (constant factors, integer powers, products taken once) the plain recurrences bit for bit.
* The fixed-point Gauss-Laguerre rule integrates e^-y y^k exactly for k < 2n.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import sympy
import torch

from extrap.positional import get, ops
from extrap.positional.conventions import T
from extrap.theory import clear_cache, convergence, forms, jets
from extrap.theory.convergence import classify, classify_vanishing_sum
from extrap.theory.jets import compile_jet, weight_function
from extrap.theory.quadrature import laguerre
from extrap.theory.scale import GiveUp, is_zero, sign

CASES = [
    ("sandwich", None),
    ("sandwich:dbar=16", None),
    ("alibi", None),
    ("kerple-log", None),
    ("kerple-power:r2=0.5", None),
    ("kerple-power", {"r1": [0.5, 0.01, 2.0, 1e-4], "r2": [1.0, 0.5, 2.0, 1.5]}),
    ("kerple-log", {"r1": [1.01, 0.5, 2.0, 1.0], "r2": [0.01, 1.0, 10.0, 0.5]}),
    ("t5", {"table": [[-0.05 * k for k in range(32)], [0.1 * ((k * 7) % 5) - 0.3 for k in range(32)]]}),
    ("t5", {"table": [[0.0] * 31 + [1.5], [0.0] * 31 + [-2.0], [0.5] * 32]}),
    ("tisa", None),  # offsets of either sign: one analysis of the sum of Gaussians for every head
    (
        "tisa:kernels=2",
        {"a": [[0.1, -0.2], [-0.3, 0.05]], "b": [[0.1, 2.0], [0.5, 0.01]], "c": [[3.0, -1.0], [-2.0, 7.5]]},
    ),
    (
        "tisa:kernels=2",
        {"a": [[0.1, 0.2], [0.3, 0.05]], "b": [[0.1, 2.0], [0.5, 0.01]], "c": [[0.0, -1.0], [2.0, 7.5]]},
    ),
    (
        "tisa:kernels=2",
        {"a": [[0.1, 0.2], [0.3, 0.05]], "b": [[0.0, 2.0], [0.5, -0.4]], "c": [[1.0, -1.0], [2.0, 7.5]]},
    ),
]


@pytest.mark.parametrize("spec, custom", CASES, ids=[f"{s}-{'custom' if c else 'init'}" for s, c in CASES])
def test_verdict_from_the_structure_equals_the_verdict_of_each_head(spec, custom):
    scheme = get(spec)
    if custom is None:
        values = scheme.init_values(8)
    else:
        values = {k: torch.tensor(v, dtype=torch.float64) for k, v in custom.items()}
    clear_cache()
    for h in range(next(iter(values.values())).shape[0]):
        fast, slow = forms.head_verdict(scheme, values, h), classify(scheme.symbolic(h, values))
        assert (fast.verdict, fast.test, fast.explanation, fast.growth) == (
            slow.verdict,
            slow.test,
            slow.explanation,
            slow.growth,
        )
        assert fast.exponents == slow.exponents and fast.tail_level == slow.tail_level
        assert (fast.bounded, fast.fast, fast.finite, fast.settles, fast.oscillates) == (
            slow.bounded,
            slow.fast,
            slow.finite,
            slow.settles,
            slow.oscillates,
        )
        a, b = (sympy.lambdify(T, v.expr, "mpmath") for v in (fast, slow))
        with mpmath.workdps(40):  # the same function of t beyond both cutoffs
            assert all(abs(a(k) - b(k)) <= mpmath.mpf(10) ** -25 * (1 + abs(b(k))) for k in (10**3, 10**6 + 7))


def test_sandwich_heads_share_one_analysis(monkeypatch):
    calls = []
    original = forms.classify_tail
    monkeypatch.setattr(forms, "classify_tail", lambda *a, **k: calls.append(a) or original(*a, **k))
    scheme = get("sandwich")
    values = scheme.init_values(8)
    clear_cache()
    levels = [forms.head_verdict(scheme, values, h).tail_level for h in range(8)]
    assert len(calls) == 1
    assert levels == [-sympy.Integer(64) / (sympy.Integer(h + 1) * 8 / 8) for h in range(8)]  # -dbar/(2 h_k)


def test_tisa_heads_share_one_analysis(monkeypatch):
    """Which Gaussian decays slowest depends on each head's widths, so the whole sum has no expansion with
    symbols; each term tends to 0 whatever the parameters, so one verdict (r -> 0) holds for every head."""
    calls, tails = [], []
    original = forms.classify_vanishing_sum
    monkeypatch.setattr(forms, "classify_vanishing_sum", lambda *a, **k: calls.append(a) or original(*a, **k))
    monkeypatch.setattr(forms, "classify_tail", lambda *a, **k: tails.append(a))
    scheme = get("tisa")
    values = scheme.init_values(8)
    assert values["c"].min() < 0 < values["c"].max()  # offsets of both signs: a real, nonzero symbol
    clear_cache()
    verdicts = [forms.head_verdict(scheme, values, h) for h in range(8)]
    assert len(calls) == 1 and not tails  # the structure's, none per head, and no expansion of the whole sum
    assert {(v.verdict, v.test, v.tail_level) for v in verdicts} == {("diverges", "nth-term", 0)}


def test_a_shared_verdict_converts_a_heads_values_only_for_its_expression(monkeypatch):
    """TISA's heads read no parameter in their verdict: no exact values until ``expr`` is asked for, and then
    those of the call (a copy), even if the caller's tensors have changed since."""
    scheme = get("tisa")
    values = scheme.init_values(8)
    clear_cache()
    forms.head_verdict(scheme, values, 0)  # the structure
    asked = []
    original = type(scheme).head_values
    monkeypatch.setattr(type(scheme), "head_values", lambda *a, **k: asked.append(a[2]) or original(*a, **k))
    verdicts = [forms.head_verdict(scheme, values, h) for h in range(8)]
    assert asked == []
    expected = {q: v.clone() for q, v in values.items()}
    for v in values.values():
        v.mul_(2)  # in place, as training would
    expr = verdicts[3].expr
    assert len(asked) == 1 and expr == scheme.symbolic(3, expected) and verdicts[3].expr is expr


def _count_evaluated_exps(monkeypatch) -> list:
    calls, original = [], forms._evaluated

    def counted(e):
        calls.extend([e] if isinstance(e, sympy.exp) else [])
        return original(e)

    monkeypatch.setattr(forms, "_evaluated", counted)
    return calls


@pytest.mark.parametrize("spec", ["tisa", "tisa:kernels=12"])
def test_repeated_terms_are_evaluated_once_and_equal_sympys_own_build(spec, monkeypatch):
    """TISA's Gaussians with the same signs of their parameters share one shape: the first is evaluated, the
    others are its renamings, and the form is the one sympy builds with evaluation on (12 kernels: names
    ending in 10 sort before those ending in 2)."""
    scheme = get(spec)
    symbols = forms._symbols(scheme, scheme.init_values(4))
    direct = sympy.sympify(scheme.fn(ops.SYMPY, T, symbols))
    signs = {tuple(str(symbols[q][k].assumptions0) for q in "abc") for k in range(len(symbols["a"]))}
    calls = _count_evaluated_exps(monkeypatch)
    built = forms._build(scheme, symbols, shared=False)
    assert len(calls) == len(signs) < len(symbols["a"])  # one per sign pattern of (a_k, b_k, c_k)
    assert built == direct and sympy.srepr(built) == sympy.srepr(direct)


def test_terms_whose_symbols_compare_otherwise_are_evaluated_each(monkeypatch):
    a, b, d, c = (sympy.Dummy(n, positive=True) for n in "abdc")
    with sympy.evaluate(False):
        raw = a * sympy.exp(-b * T**2) + d * sympy.exp(-c * T**2)  # a < b, but d > c
    calls = _count_evaluated_exps(monkeypatch)
    built = forms._evaluated(raw)
    assert len(calls) == 2 and sympy.srepr(built) == sympy.srepr(a * sympy.exp(-b * T**2) + d * sympy.exp(-c * T**2))


def test_a_sum_that_does_not_vanish_is_not_a_vanishing_sum():
    a, b = sympy.Dummy("a", positive=True), sympy.Dummy("b", positive=True)
    c = sympy.Dummy("c", real=True, nonzero=True)
    with pytest.raises(GiveUp):
        classify_vanishing_sum(a * sympy.exp(-b * T**2) + c, 0)  # tends to c, not 0
    with pytest.raises(GiveUp):
        classify_vanishing_sum(a * sympy.exp(-b * T**2) + b * sympy.log(T + 1), 0)
    v = classify_vanishing_sum(a * sympy.exp(-b * (T - c) ** 2) + a / (T + 1), 0)
    assert (v.verdict, v.test, v.tail_level, v.bounded, v.settles) == ("diverges", "nth-term", 0, True, False)


def test_a_nonzero_symbol_of_either_sign_is_not_zero():
    c, x = sympy.Dummy("c", real=True, nonzero=True), sympy.Dummy("x", real=True)
    assert not is_zero(-2 * c) and not is_zero(c**2)
    for undecided in (x, -2 * x, c - 1):  # may be 0; a sum is left to each head's numbers
        with pytest.raises(GiveUp):
            is_zero(undecided)
    with pytest.raises(GiveUp):
        sign(c)  # nonzero, but its sign still depends on the head


X = sympy.Symbol("x", positive=True)


@pytest.mark.parametrize(
    "b",
    [
        sympy.exp(-(sympy.log(X + 1) ** 2)),  # Type2
        sympy.exp(-sympy.Rational(3, 10) * sympy.sqrt(X)),  # KERPLE-power, r2 = 1/2
        1 / ((X + 1) ** 2 * sympy.log(X + 2)),
        sympy.exp(-X / 1000 + sympy.sin(X) / 7 + sympy.cos(X / 3)),
        (X + 2) ** sympy.Rational(-7, 3) * sympy.exp(-1 / (X + 1)),
    ],
)
def test_taylor_jets_equal_numerical_derivatives(b):
    jet = compile_jet(b, X)
    f = sympy.lambdify(X, b, "mpmath")
    with mpmath.workdps(40):
        for J in (mpmath.mpf(64), mpmath.mpf("517.25")):
            exact, numeric = jet(J, 11), list(mpmath.diffs(f, J, 11))
            for k, (p, q) in enumerate(zip(exact, numeric)):
                assert abs(p - q) <= mpmath.mpf(10) ** -30 * abs(q), (k, p, q)


def _plain_recurrences() -> dict:
    """The jets' recurrences as first written (every product in every sum, p + 1 in mpf arithmetic)."""

    def mul(a, b):
        return [mpmath.fsum(a[j] * b[k - j] for j in range(k + 1)) for k in range(len(a))]

    def exp(a):
        e = [mpmath.exp(a[0])]
        for k in range(1, len(a)):
            e.append(mpmath.fsum(j * a[j] * e[k - j] for j in range(1, k + 1)) / k)
        return e

    def log(a):
        out = [mpmath.log(a[0])]
        for k in range(1, len(a)):
            out.append((a[k] - mpmath.fsum(j * out[j] * a[k - j] for j in range(1, k)) / k) / a[0])
        return out

    def power(a, p):
        out = [a[0] ** p]
        for k in range(1, len(a)):
            out.append(mpmath.fsum(((p + 1) * j - k) * a[j] * out[k - j] for j in range(1, k + 1)) / (k * a[0]))
        return out

    def sin_cos(a):
        s, c = [mpmath.sin(a[0])], [mpmath.cos(a[0])]
        for k in range(1, len(a)):
            s.append(mpmath.fsum(j * a[j] * c[k - j] for j in range(1, k + 1)) / k)
            c.append(-mpmath.fsum(j * a[j] * s[k - j] for j in range(1, k + 1)) / k)
        return s, c

    return {"_mul": mul, "_exp": exp, "_log": log, "_pow": power, "_sin_cos": sin_cos}


@pytest.mark.parametrize(
    "b",
    [
        sympy.exp(-(sympy.log(X + 1) ** 2)),  # Type2: a constant factor and an integer power
        3 * sympy.exp(-sympy.Rational(3, 10) * sympy.sqrt(X)) * sympy.pi,
        1 / ((X + 1) ** 2 * sympy.log(X + 2)) * sympy.Rational(7, 3),
        sympy.exp(-X / 1000 + sympy.sin(2 * X) / 7 + sympy.cos(X / 3)) * (X + 1) ** -3,
        (X + 2) ** sympy.Rational(-7, 3) * sympy.exp(-1 / (X + 1)),
    ],
)
def test_taylor_jets_are_the_plain_recurrences_bit_for_bit(b, monkeypatch):
    """Constant factors, integer powers and the products j a_j taken once give the very same coefficients."""
    with mpmath.workdps(40):
        points = (mpmath.mpf(64), mpmath.mpf("517.25"), mpmath.mpf(10) ** 9 + mpmath.mpf(1) / 3)
        fast = [[d._mpf_ for d in compile_jet(b, X)(J, 11)] for J in points]
        for name, plain in _plain_recurrences().items():
            monkeypatch.setattr(jets, name, plain)
        assert fast == [[d._mpf_ for d in compile_jet(b, X)(J, 11)] for J in points]


def test_a_weight_function_is_sympys_lambdify_without_the_rendered_docstring():
    b = sympy.exp(-(sympy.log(X + 1) ** 2) + sympy.Rational(1, 3) * sympy.sqrt(X))
    fast, plain = weight_function(b, X), sympy.lambdify(X, b, modules=[{"exp": ops.saturating_exp}, "mpmath"])
    with mpmath.workdps(40):
        assert all(fast(mpmath.mpf(k))._mpf_ == plain(mpmath.mpf(k))._mpf_ for k in (1, 64, 10**9 + 7))
    assert str(b) in plain.__doc__ and (str(b) not in fast.__doc__) == ("docstring_limit" in jets._NO_DOCSTRING)


def test_unsupported_forms_fall_back():
    assert compile_jet(sympy.floor(X) + X, X) is None


@pytest.mark.parametrize("n", [8, 16])
def test_laguerre_rule_is_exact_on_polynomials(n):
    with mpmath.workdps(40):
        for k in range(2 * n):  # int_0^oo e^-y y^k dy = k!
            value = laguerre(lambda y, k=k: mpmath.exp(-y) * y**k, n)
            assert abs(value - math.factorial(k)) <= mpmath.mpf(10) ** -35 * math.factorial(k)


def _record_scans(monkeypatch) -> list:
    """The spec of each scheme whose bias :func:`numerics.scan` sums from now on (caches cleared first)."""
    from extrap.theory import numerics

    calls = []
    real = numerics.scan
    monkeypatch.setattr(numerics, "scan", lambda *a, **k: calls.append(a[0].spec) or real(*a, **k))
    clear_cache()
    return calls


def test_scan_shift_ignores_nan_and_cape_reuses_its_base_scan(monkeypatch):
    """The NaN-free fast path of the largest bias equals the NaN-ignoring one (a row of NaN gives -inf),
    and CAPE's static part reuses the partial sums of its base RPE: one pass of ALiBi's bias for both."""
    from extrap.theory import analyse, numerics

    r = torch.tensor([[0.5, float("nan"), 2.0], [float("nan")] * 3, [-1.0, -3.0, -2.0]], dtype=torch.float64)
    assert numerics._largest(r).tolist() == [2.0, -math.inf, -1.0]
    assert numerics._largest(r[2:]).tolist() == [-1.0]
    calls = _record_scans(monkeypatch)
    alibi = analyse("alibi", 4)
    cape = analyse("cape-ctx", 4)
    assert calls == ["alibi"]
    assert [c.dilution for c in cape] == [a.dilution for a in alibi]
    clear_cache()
    analyse("alibi", 4)
    assert calls == ["alibi", "alibi"]  # clear_cache forgets it


def test_a_scheme_with_the_same_bias_values_reuses_the_partial_sums(monkeypatch):
    """KERPLE-power at r2 = 1 is ALiBi bit for bit (t**1 == t): its dilution comes from ALiBi's scan, and is
    what its own scan gives; another bias (other slopes) or another grid scans again."""
    from extrap.theory import analyse

    calls = _record_scans(monkeypatch)
    alibi = analyse("alibi", 4)
    power = analyse("kerple-power", 4)
    assert calls == ["alibi"]
    assert [p.dilution for p in power] == [a.dilution for a in alibi]
    analyse("kerple-power:r1=0.25", 4)
    analyse("kerple-power", 4, lengths=(1024, 4096))
    assert calls == ["alibi", "kerple-power:r1=0.25", "kerple-power"]
    clear_cache()
    alone = analyse("kerple-power", 4)
    assert calls[-1] == "kerple-power" and [p.dilution for p in alone] == [p.dilution for p in power]


def test_gaussian_terms_are_recognised_without_expansion(monkeypatch):
    """A vanishing sum's terms C exp(k (t + d)^n) (k < 0, d real, n a positive integer) are accepted from the
    tree alone, TISA's kernels included; every other term still goes through the asymptotic expansion."""
    a, b = sympy.Dummy("a", positive=True), sympy.Dummy("b", positive=True)
    c, x = sympy.Dummy("c", real=True, nonzero=True), sympy.Dummy("x")
    expanded = []
    original = convergence.asy.expand
    monkeypatch.setattr(convergence.asy, "expand", lambda e, t: expanded.append(e) or original(e, t))
    fast = [a * sympy.exp(-b * (T - c) ** 2), sympy.exp(-b * T**3), 2 * sympy.exp(-b * T)]
    v = classify_vanishing_sum(sympy.Add(*fast, a / (T + 1)), 0)
    assert expanded == [a / (T + 1)] and (v.verdict, v.tail_level) == ("diverges", 0)
    for slow in (a * sympy.exp(b * (T - c) ** 2), a * sympy.exp(-c * T**2), sympy.exp(-b * (T - x) ** 2)):
        expanded.clear()  # k > 0 (grows), the sign of k unknown, a shift that may be complex
        with pytest.raises(GiveUp):
            classify_vanishing_sum(slow + a / (T + 1), 0)
        assert slow in expanded


def test_binary_constants_skip_evalf_and_give_its_number(monkeypatch):
    """exact_mpf of p/2^k (0, 1, ALiBi's slopes) is the evalf route's number, bit for bit, at each precision,
    without evalf; other constants (1/3, pi) still take evalf."""
    from extrap.theory.closed import DPS, exact_mpf

    consts = [
        sympy.Integer(0),
        sympy.Integer(-7),
        sympy.Rational(1, 256),
        sympy.Rational(3, 2),
        sympy.Rational(5, 2**300),
    ]
    consts += [sympy.Rational((2**130 + 1) * s, 2**40) for s in (1, -1)]  # beyond 15 digits: evalf at low precision
    with mpmath.workdps(DPS):
        third, pi = exact_mpf(sympy.Rational(1, 3)), exact_mpf(sympy.pi)
    reference = {}
    for dps in (15, DPS):
        with mpmath.workdps(dps):
            reference[dps] = [mpmath.mpf(sympy.Float(c.evalf(DPS + 10), DPS + 10)._mpf_)._mpf_ for c in consts]
    evalf_calls = []
    real = sympy.core.evalf.EvalfMixin.evalf
    monkeypatch.setattr(sympy.core.evalf.EvalfMixin, "evalf", lambda *a, **k: evalf_calls.append(a[0]) or real(*a, **k))
    for dps in (15, DPS):
        with mpmath.workdps(dps):
            assert [exact_mpf(c)._mpf_ for c in consts] == reference[dps]
    assert evalf_calls == consts[-2:]  # only where p does not fit the 15-digit precision
    with mpmath.workdps(DPS):
        assert exact_mpf(sympy.Rational(1, 3)) == third and exact_mpf(sympy.pi) == pi and len(evalf_calls) == 4


@pytest.mark.parametrize("spec, converted", [("kerple-power:r2=0.5", {"r1"}), ("t5", set()), ("alibi", {"slope"})])
def test_a_head_converts_only_the_parameters_that_have_a_symbol(spec, converted, monkeypatch):
    """The others are exact numbers in the structure's form already (T5's 8 x 32 table is never rebuilt)."""
    scheme = get(spec)
    values = scheme.init_values(8)
    asked = []
    original = type(scheme).head_values
    clear_cache()
    forms.head_verdict(scheme, values, 0)  # the structure, built from every parameter
    record = lambda s, v, h, **k: asked.append(set(v)) or original(s, v, h, **k)  # noqa: E731
    monkeypatch.setattr(type(scheme), "head_values", record)
    for h in range(1, 8):
        forms.head_verdict(scheme, values, h)
    assert asked == ([converted] * 7 if converted else [])


@pytest.mark.parametrize("spec, converted", [("tisa", set()), ("t5", {"table"}), ("kerple-power:r2=0.5", {"r2"})])
def test_the_structure_converts_only_parameters_with_an_entry_every_head_shares(spec, converted, monkeypatch):
    """Those entries go into the form as exact numbers; the others become symbols (TISA: all 15 a head)."""
    scheme = get(spec)
    values = scheme.init_values(8)
    asked = []
    original = type(scheme).head_values
    monkeypatch.setattr(
        type(scheme), "head_values", lambda s, v, h, **k: asked.append(set(v)) or original(s, v, h, **k)
    )
    clear_cache()
    forms.head_verdict(scheme, values, 0)
    assert asked[0] == converted


def test_powers_of_ten_are_those_of_each_precision():
    """pow10 keeps a table of constants: the entry of each precision is that precision's 10^k, bit for bit."""
    from extrap.theory.quadrature import pow10

    for dps in (15, 40, 15, 60, 40):
        with mpmath.workdps(dps):
            for k in (-38, -14, -6, 0, 3):
                assert pow10(k)._mpf_ == (mpmath.mpf(10) ** k)._mpf_


def test_a_run_of_equal_exact_terms_takes_one_exp(monkeypatch):
    """A window's 512 weights e^0 are one exp, and still sum to B = 512 with n(eps) = ceil(512 (1 - eps))."""
    from extrap.theory import analyse, trf

    calls = []
    real = trf.saturating_exp
    monkeypatch.setattr(trf, "saturating_exp", lambda x: calls.append(x) or real(x))
    clear_cache()
    (row,) = analyse("window", 1, eps=(1e-3,), lengths=None)
    assert row.series_sum == 512 and row.trf == {"0.001": 512}
    assert len(calls) < 8  # one for the run of zeros (and none per term)


def test_the_integer_search_leaves_its_tail_for_the_walk(monkeypatch):
    """A closed-form tail is evaluated once per point: the search stops at an integer whose tail the walk
    to the exact n(eps) starts from (KERPLE-log's Hurwitz tails, ALiBi's geometric ones)."""
    from extrap.theory import analyse, closed

    def counted(real, points):  # holds each series: a freed one's id could be reused by the next head's
        return lambda s, J: points.append((s, J)) or real(s, J)

    for cls in (closed.HurwitzSeries, closed.GeometricSeries):
        points = []
        monkeypatch.setattr(cls, "_closed_tail", counted(cls._closed_tail, points))
        clear_cache()
        rows = analyse("kerple-log" if cls is closed.HurwitzSeries else "alibi", 4, eps=(1e-3, 1e-12), lengths=None)
        assert all(r.verdict == "converges" and None not in r.trf.values() for r in rows)
        keys = [(id(s), J) for s, J in points]
        assert keys and len(keys) == len(set(keys))


def _plain_merge(terms):
    """The reference: each term joins the first earlier monomial that cmp calls equal, or starts its own."""
    merged = []
    for m, c in terms:
        for it in merged:
            if it[0].cmp(m) == 0:
                it[1] = it[1] + c
                break
        else:
            merged.append([m, sympy.sympify(c)])
    return merged


def test_merging_by_exact_key_equals_the_plain_merge():
    """Expansion's merge matches rational monomials through a dict (TISA's K Gaussians: K comparisons, not K²/2);
    with irrational and symbolic coefficients, exponents and repeats mixed in, it is the plain loop's merge."""
    import random

    from extrap.theory.asymptotics import Mono, _merge
    from extrap.theory.scale import _unit

    r = sympy.Rational
    coefficients = [r(-1, 2), r(3, 7), -sympy.sqrt(2), r(1), sympy.pi / 4, sympy.log(4) - 2 * sympy.log(2) + r(3, 7)]
    pool = [Mono([(_unit(1), c)]) for c in coefficients] + [Mono([(_unit(1), r(-1, 2)), (_unit(2), c)]) for c in (
        r(1), sympy.E, r(2))] + [Mono.power([r(1, 3)]), Mono.power([sympy.sqrt(3)]), Mono(())]  # fmt: skip
    rng = random.Random(0)
    for trial in range(40):
        terms = [(rng.choice(pool), r(rng.randint(-3, 3), rng.randint(1, 4))) for _ in range(rng.randint(1, 14))]
        want = _plain_merge(terms)
        got = _merge(tuple(terms), 0)
        assert [(m.logm, c) for m, c in got] == [(m.logm, c) for m, c in want], trial
        k = rng.randint(0, len(want))  # a prefix of already-merged terms, then more
        more = terms[: rng.randint(0, len(terms))]
        assert [(m.logm, c) for m, c in _merge(tuple((m, c) for m, c in want[:k]) + tuple(more), k)] == [
            (m.logm, c) for m, c in _plain_merge([(m, c) for m, c in want[:k]] + more)
        ], trial


def test_tisa_with_hundreds_of_kernels_gets_its_verdict_within_the_time_limit():
    """256 Gaussians per head gave up after the 10 s limit (K² comparisons of exp monomials): now decided."""
    from extrap.theory import analyse

    res = analyse("tisa:kernels=256", 1, eps=(1e-3,))[0]
    assert (res.verdict, res.test) == ("diverges", "nth-term")
