"""Bias RPEs against values derived independently: hand computations, closed forms, HF T5."""

import math

import numpy as np
import pytest
import sympy
import torch

from extrap import positional as P
from extrap.errors import ExtrapError
from extrap.positional import ops


def test_alibi_slopes_power_of_two_are_geometric():
    assert P.alibi_slopes(8) == [2.0**-k for k in range(1, 9)]
    assert P.alibi_slopes(4) == [2.0**-k for k in range(2, 9, 2)]


def test_alibi_slopes_non_power_of_two_match_hand_values():
    # H = 12: the 8 slopes of 8 heads, then odd powers 2^(-k/2) (k = 1, 3, 5, 7) of 16 heads
    expected = [2.0**-k for k in range(1, 9)] + [2.0 ** (-k / 2) for k in (1, 3, 5, 7)]
    np.testing.assert_allclose(P.alibi_slopes(12), expected, rtol=1e-15)
    assert len(P.alibi_slopes(5)) == 5 and P.alibi_slopes(5)[4] == 0.5  # from 8 heads: 2^-1


def test_alibi_variants_shift_and_same_h():
    t = torch.arange(4, dtype=torch.float64)
    shifted = P.get("alibi:shift=2").init_values(8)["slope"]
    np.testing.assert_allclose(shifted.numpy(), [2.0 ** -(k + 2) for k in range(1, 9)])
    same = P.get("alibi:h=3")
    bias = same.bias(t, same.init_values(4))
    assert torch.allclose(bias, -t / 8 * torch.ones(4, 1, dtype=torch.float64))
    with pytest.raises(ExtrapError):
        P.get("alibi:h=3,shift=1")


def test_type_examples_closed_forms():
    t = torch.arange(10, dtype=torch.float64)
    n = t + 1
    for spec, expected in [
        ("type1", 1 / n**2),
        ("type2", torch.exp(-(torch.log(n) ** 2))),
        ("example1", 1 / n),
        ("example2", 1 / ((n + 1) * torch.log(n + 1))),
    ]:
        s = P.get(spec)
        b = torch.exp(s.bias(t, s.init_values(2)))
        assert b.shape == (1, 10)  # head-independent: broadcasts over heads
        torch.testing.assert_close(b[0], expected, rtol=1e-12, atol=0)


def test_sandwich_matches_inner_products_of_sinusoids():
    # 003 Appendix E builds p_m = [sin(m w_i), cos(m w_i)], i = 0..d/2-1, and takes p_m . p_n.
    dbar, H, L = 16, 4, 40
    w = 1.0 / 10000 ** (2 * np.arange(dbar // 2) / dbar)
    pos = np.arange(L)[:, None] * w[None]
    emb = np.concatenate([np.sin(pos), np.cos(pos)], axis=-1)
    gram = emb @ emb.T
    s = P.get(f"sandwich:dbar={dbar}")
    m, k = 30, 7
    got = s.bias(torch.tensor([float(m - k)], dtype=torch.float64), s.init_values(H))[:, 0]
    ratios = np.arange(1, H + 1) * 8 / H
    np.testing.assert_allclose(got.numpy(), (gram[m, k] - dbar / 2) / ratios, rtol=1e-12)
    assert float(s.bias(torch.zeros(1, dtype=torch.float64), s.init_values(H)).abs().max()) < 1e-12


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("nb,md", [(32, 128), (16, 64), (64, 512)])
def test_t5_buckets_match_transformers(bidirectional, nb, md):
    T5Attention = pytest.importorskip("transformers.models.t5.modeling_t5").T5Attention
    i = torch.arange(0, 3000).unsqueeze(1)
    j = torch.arange(0, 3000, 7).unsqueeze(0)
    t = i - j
    if not bidirectional:
        t = t.clamp_min(0)
    ours = P.t5_bucket(t, bidirectional, nb, md)
    ref = T5Attention._relative_position_bucket(
        j - i if bidirectional else -t, bidirectional=bidirectional, num_buckets=nb, max_distance=md
    )
    assert torch.equal(ours, ref)


def test_t5_symbolic_bucket_agrees_with_torch():
    t = sympy.Symbol("t")
    expr = P.t5_bucket(t, False, 32, 128, ops.SYMPY)
    for d in [0, 5, 15, 16, 17, 40, 100, 127, 128, 500]:
        assert int(expr.subs(t, d)) == int(P.t5_bucket(torch.tensor([d]), False, 32, 128)[0])


def test_window_and_nope():
    w = P.get("window:3")
    b = w.bias(torch.arange(5.0), {})
    assert b[0, :3].eq(0).all() and torch.isinf(b[0, 3:]).all()
    assert P.get("nope").is_identity
    with pytest.raises(ExtrapError):
        P.get("window:0")


def test_kerple_power_gradient_is_finite_at_zero_distance():
    s = P.get("kerple-power")
    vals = {k: v.clone().requires_grad_(True) for k, v in s.init_values(4).items()}
    s.bias(torch.arange(6.0, dtype=torch.float64), vals).sum().backward()
    assert all(torch.isfinite(v.grad).all() for v in vals.values())


def test_kerple_positive_parameterisation_roundtrips():
    s = P.get("kerple-log")
    values = s.init_values(4)
    torch.testing.assert_close(s.values(s.to_stored(values, 4), 4), values)
    torch.testing.assert_close(values["r1"], torch.linspace(1.5, 3.0, 4, dtype=torch.float64))


def test_fire_is_bounded_by_progressive_interpolation():
    s = P.get("fire")
    v = s.init_values(3)
    i = torch.arange(100.0).unsqueeze(1)
    t = (i - torch.arange(100.0).unsqueeze(0)).clamp_min(0)
    b = s.bias(t, v, i=i)
    assert b.shape == (3, 100, 100) and torch.isfinite(b).all()
    assert not s.is_toeplitz and s.adds_bias


def test_conventions_define_t_and_n_once():
    from extrap.positional import conventions as C
    from extrap.positional.base import T

    assert P.T is T is C.T and C.distance(7, 3) == 4 and C.n_from_t(0) == 1
    assert P.get("n").symbolic(0, {}) == C.n_from_t(C.T) == C.T + 1  # a formula's n is t + 1
    assert P.get("type1").symbolic(0, {}) == -2 * sympy.log(C.n_from_t(C.T))
    i, j = torch.arange(4.0)[:, None], torch.arange(4.0)[None, :]
    assert torch.equal(C.distance(i, j), i - j)


def test_capabilities_of_every_scheme():
    caps = {
        name: tuple(getattr(P.get(name), c) for c in ("adds_bias", "is_toeplitz", "rotates", "embeds"))
        for name in P.REGISTRY
    }
    assert caps["alibi"] == caps["window"] == (True, True, False, False)
    assert caps["fire"] == (True, False, False, False)
    assert caps["nope"] == (False, False, False, False)  # r = 0: no bias to add
    assert caps["rope"] == caps["xpos"] == (False, False, True, False)
    assert caps["sinusoidal"] == caps["learned"] == (False, False, False, True)


def test_symbolic_forms_are_exact():
    t = P.T
    assert P.get("type1").symbolic(0, {}) == -2 * sympy.log(t + 1)
    assert P.get("kerple-log:r1=0.5").symbolic(1, P.get("kerple-log:r1=0.5").init_values(2)) == -sympy.Rational(
        1, 2
    ) * sympy.log(t + 1)
    assert P.get("sandwich-smooth").symbolic(0, {}) == -sympy.Rational(33, 40) * sympy.log(t + 1) - sympy.Rational(4, 5)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("-2*log(n)", lambda n: -2 * math.log(n)),
        ("-(log(n))**2", lambda n: -(math.log(n) ** 2)),
        ("-log(n)^2", lambda n: -(math.log(n) ** 2)),
        ("-0.5*t", lambda n: -0.5 * (n - 1)),
        ("-sqrt(t)", lambda n: -math.sqrt(n - 1)),
    ],
)
def test_formulas_evaluate_like_their_meaning(text, expected):
    s = P.get(text)
    got = s.bias(torch.arange(6, dtype=torch.float64), {})[0]
    for t in range(6):
        assert float(got[t]) == pytest.approx(expected(t + 1), rel=1e-12)
    assert float(s.scalar(4, 0, {})) == pytest.approx(expected(5), rel=1e-12)


@pytest.mark.parametrize(
    "hostile",
    [
        "__import__('os').system('echo pwned')",
        "t.__class__",
        "n.real",
        "(lambda: 1)()",
        "[t for t in n]",
        "open('x')",
        "exec('1')",
        "log(n, 2)",
        "t if t else n",
        "'a'",
        "n @ n",
    ],
)
def test_hostile_or_malformed_formulas_are_refused(hostile):
    with pytest.raises(ExtrapError):
        P.get(hostile)


def test_unknown_scheme_and_options_give_clear_errors():
    with pytest.raises(ExtrapError, match="did you mean 'alibi'"):
        P.get("alibj")
    with pytest.raises(ExtrapError, match="unknown option"):
        P.get("sandwich:foo=1")
    with pytest.raises(ExtrapError, match="even"):
        P.get("sandwich:dbar=7")
    with pytest.raises(ExtrapError):
        P.get("alibi").init_values(0)


@pytest.mark.parametrize(
    "name,fragments",
    [
        ("cape", ["'cape-ctx'", "'sinusoidal:cape=1'", "2021"]),  # spelling alone suggested 'cope'
        ("shape", ["'sinusoidal:shape=K'"]),  # spelling alone suggested 'shaw'
        ("yarn", ["'rope:scaling=yarn'"]),  # spelling alone suggested nothing
    ],
)
def test_a_name_that_is_an_option_of_a_scheme_is_pointed_to_it(name, fragments):
    with pytest.raises(ExtrapError) as err:
        P.get(name)
    for f in fragments:
        assert f in str(err.value), (f, str(err.value))
    assert "'cope'" not in str(err.value) and "'shaw'" not in str(err.value)


def test_the_alias_hints_name_no_scheme_and_suggest_specs_that_build():
    from extrap.positional.registry import ALIAS_HINTS

    assert not set(ALIAS_HINTS) & set(P.REGISTRY)  # a hint never shadows a registered scheme
    P.get("cape-ctx"), P.get("sinusoidal:cape=1"), P.get("sinusoidal:shape=8")


def test_spec_roundtrips_through_the_registry():
    for spec in ["alibi", "alibi:shift=2", "window:64", "sandwich:dbar=64", "t5:bidirectional=true", "-2*log(n)"]:
        s = P.get(spec)
        assert P.get(s.spec).spec == s.spec


@pytest.mark.parametrize("text, value", [("0", 0.0), ("-1", -1.0), ("log(8)-3*log(2)", 0.0), ("2**-3", 0.125)])
def test_constant_formulas_are_schemes(text, value):
    s = P.get(text)  # NoPE shifted by a constant: legitimate, and evaluable on every backend
    b = s.bias(torch.arange(5, dtype=torch.float64), {})
    assert b.shape == (1, 5) and torch.allclose(b, torch.full((1, 5), value, dtype=torch.float64))
    assert float(s.scalar(3, 0, {})) == pytest.approx(value, abs=1e-30)
    assert float(s.symbolic(0, {})) == pytest.approx(value, abs=1e-30)


def test_constant_sub_expressions_are_folded_exactly():
    s = P.get("log(2)*n - 1/3")
    t = torch.arange(4, dtype=torch.float64)
    torch.testing.assert_close(s.bias(t, {})[0], math.log(2) * (t + 1) - 1 / 3, rtol=1e-15, atol=0)
    assert s.symbolic(0, {}) == sympy.log(2) * (P.T + 1) - sympy.Rational(1, 3)  # exact, not 0.333...
    assert P.get("formula:-1/2*log(n)").symbolic(0, {}) == -sympy.log(P.T + 1) / 2


@pytest.mark.parametrize(
    "text, match",
    [
        ("2**10**10", "needs more than 2000 digits"),
        ("-10**400*t", "out of range"),
        ("1/0", "divides by zero"),
        ("-1/t", r"^formula -1/t is not finite at t = 0 \(r = -inf\)$"),
        ("log(t)", "not finite at t = 0"),
        ("sqrt(-n)", "not a real number at t = 0"),
        ("t\n+1", "control character"),
    ],
)
def test_formulas_that_cannot_be_a_bias_are_refused_when_built(text, match):
    with pytest.raises(ExtrapError, match=match) as e:
        P.get(text)
    assert "\n" not in str(e.value)


def test_a_pole_after_t0_masks_that_distance_on_every_backend():
    s = P.get("formula:-t-1/(t-1)**2")  # r(1) = -inf: distance 1 gets weight 0, like a window
    b = s.bias(torch.arange(4, dtype=torch.float64), {})[0]
    assert b[1] == -math.inf and torch.isfinite(b[[0, 2, 3]]).all()
    assert s.scalar(1, 0, {}) == -ops.MPMATH.inf
    assert ops.MPMATH.divide(0, 0) != ops.MPMATH.divide(0, 0)  # nan, as in torch


def test_saturating_exp_is_quick_where_mpmath_exp_is_not():
    import mpmath

    huge = mpmath.mpf(2) ** 2000
    assert ops.MPMATH.exp(-huge) == 0 and ops.MPMATH.exp(huge) == mpmath.inf
    assert ops.MPMATH.exp(mpmath.mpf(-2)) == mpmath.exp(-2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_torch_backend_exp_is_torch_exp_without_its_slow_underflow_lanes(dtype, monkeypatch):
    """Bit for bit torch.exp (0 below the underflow, subnormals in the band above it, inf, nan), while
    torch.exp itself never sees a lane that underflows past the band (its slow path on CPUs)."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat(
        [
            -torch.rand(4000, generator=g, dtype=torch.float64) * 1e5,  # TISA's far Gaussians
            -torch.rand(4000, generator=g, dtype=torch.float64) * 60 - 690,  # float64's subnormal band
            -torch.rand(4000, generator=g, dtype=torch.float64) * 30 - 80,  # float32's
            torch.randn(4000, generator=g, dtype=torch.float64) * 20,
            torch.tensor([math.inf, -math.inf, math.nan, -708.0, -745.1, -745.2, -746.0, -87.0, -103.9, -104.0, 0.0]),
        ]
    ).to(dtype)[torch.randperm(16011, generator=g)]
    expected = torch.exp(x)
    seen = []
    original = torch.exp
    monkeypatch.setattr(torch, "exp", lambda v: seen.append(float(v.detach()[~v.isnan()].min())) or original(v))
    got = ops.TORCH.exp(x)
    assert torch.equal(got.nan_to_num(7.0), expected.nan_to_num(7.0)) and torch.equal(got.isnan(), expected.isnan())
    assert ((got > 0) & (got < torch.finfo(dtype).tiny)).any()  # subnormal results are kept
    assert min(seen) >= (-746.0 if dtype == torch.float64 else -104.0)
    x.requires_grad_(True)
    ops.TORCH.exp(x).sum().backward()  # autograd: plain torch.exp
    assert torch.equal(x.grad.nan_to_num(7.0), expected.nan_to_num(7.0))


def test_torch_add_all_sums_a_generator_in_order_holding_few_terms():
    """((t0 + t1) + t2) + ... bit for bit, from a generator whose earlier terms are freed as it goes
    (Sandwich's 64 cosines of 16384 distances: holding them all costs more than computing them)."""
    import weakref

    g = torch.Generator().manual_seed(0)
    terms = [torch.rand(50, generator=g, dtype=torch.float64) * 10.0**k for k in range(-8, 8)]
    expected = terms[0]
    for x in terms[1:]:
        expected = expected + x
    made = []

    def fresh():
        for x in terms:
            assert all(ref() is None for ref in made[:-1])  # only the last term made is still alive
            y = x.clone()
            made.append(weakref.ref(y))
            yield y
            del y

    assert torch.equal(ops.TORCH.add_all(fresh()), expected)
    assert torch.equal(ops.TORCH.add_all(terms), expected)
