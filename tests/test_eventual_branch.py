"""min/max in user formulas: the eventual branch decides the verdict (000 Theorem 0.4), and the
distance from which it holds is exact, so B and n(eps) (000 Eq. 22) match a direct summation.

The branch is the argument that stays least (min) or greatest (max) as t -> oo, ordered by the
leading term of the difference of the arguments' expansions; the cutoff is one past the last
distance where another argument is still more extreme, however often they swap before it.
"""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest
import sympy

from extrap.cli import main
from extrap.positional import get
from extrap.positional.conventions import T
from extrap.theory import analyse
from extrap.theory.eventual import eventual
from extrap.theory.intervals import Unbounded, last_failure

EPS = (1e-3, 1e-6)


def one(formula: str, eps=EPS):
    return analyse("formula:" + formula, 1, eps=eps, lengths=None)[0]


def r_float64(formula: str, t: np.ndarray) -> np.ndarray:
    """r(t) in float64 from the scheme's own torch bias (independent of the symbolic engine)."""
    import torch

    return get("formula:" + formula).bias(torch.as_tensor(t, dtype=torch.float64), {})[0].numpy()


def direct_trf(formula: str, eps, terms: int) -> tuple[float, dict]:
    """B and n(eps) = min{j : sum_{t>=j} b_t < B eps} (000 Eq. 22) by summing b_t = exp(r(t)) term by
    term in float64 over t < terms (the caller picks ``terms`` so that the rest is negligible)."""
    b = np.exp(r_float64(formula, np.arange(terms, dtype=np.float64)))
    suffix = np.cumsum(b[::-1])[::-1]  # suffix[j] = sum_{j <= t < terms} b_t
    B = float(suffix[0])
    return B, {f"{e:g}": int(np.argmax(suffix < B * e)) for e in eps}


def direct_trf_mpmath(formula: str, eps, terms: int) -> dict:
    """The same at 40 digits (for eps far below float64's resolution), with the scheme's mpmath r."""
    scheme = get("formula:" + formula)
    with mpmath.workdps(40):
        b = [mpmath.exp(scheme.scalar(k, 0, {})) for k in range(terms)]
        B = mpmath.fsum(b)
        out, tail = {}, B
        for e in eps:
            target, j, tail = B * mpmath.mpf(repr(e)), 0, B
            while not tail < target:
                tail -= b[j]
                j += 1
            out[f"{e:g}"] = j
    return out


def eventual_of(formula: str):
    return eventual(get("formula:" + formula).symbolic(0, {}), T)


def assert_cutoff_is_exact(formula: str, branch, cutoff: int, upto: int) -> None:
    """r(t) equals ``branch`` at every t in [cutoff, upto) and not at cutoff - 1 (float64)."""
    t = np.arange(max(cutoff - 1, 0), upto, dtype=np.float64)
    r = r_float64(formula, t)
    f = sympy.lambdify(T, branch, "numpy")(t) * np.ones_like(t)
    same = np.isclose(r, f, rtol=1e-12, atol=0)
    assert same[1:].all() if cutoff > 0 else same.all()
    if cutoff > 0:
        assert not same[0]


# ---------------------------------------------------------------------------
# the verdict comes from the eventual branch
# ---------------------------------------------------------------------------
def test_min_of_log_and_linear_converges_and_its_trf_is_exact():
    f = "min(-log(n), -t/1000)"  # -t/1000 at t = 0, -log n on 1..9118, -t/1000 for good from 9119
    r = one(f)
    assert r.verdict == "converges"
    branch, cutoff = eventual_of(f)
    assert branch == -T / 1000
    assert_cutoff_is_exact(f, branch, cutoff, 200_000)
    B, trf = direct_trf(f, EPS, 60_000)  # the rest: 1000 e^-60 of B
    assert r.trf == trf
    assert float(r.series_sum) == pytest.approx(B, rel=1e-13)


def test_max_of_two_logs_diverges_like_its_eventual_branch():
    r = one("max(-log(n), -2*log(n))")
    assert r.verdict == "diverges" and r.growth == "S(j) ~ ln j"  # eventually -ln n: the harmonic series
    assert eventual_of("max(-log(n), -2*log(n))") == (-sympy.log(T + 1), 0)
    assert one("min(-log(n), -2*log(n))").verdict == "converges"


@pytest.mark.parametrize(
    "formula, winner",
    [
        ("max(-2*log(n), -2*log(n+1) + 3/n)", -2 * sympy.log(T + 2) + 3 / (T + 1)),  # differ by 1/n + O(n^-2)
        ("min(-2*log(n), -2*log(n+1) + 3/n)", -2 * sympy.log(T + 1)),
        ("max(-2*log(n), -2*log(n) + 1/n)", -2 * sympy.log(T + 1) + 1 / (T + 1)),
    ],
)
def test_equal_order_branches_are_told_apart_by_their_difference(formula, winner):
    branch, cutoff = eventual_of(formula)
    assert branch == winner and cutoff == 0
    r = one(formula, eps=(1e-2, 1e-3))
    assert r.verdict == "converges"
    B, trf = direct_trf(formula, (1e-2, 1e-3), 2_000_000)  # the rest: ~1e-6 of B, far below b_j there
    assert r.trf == trf
    assert float(r.series_sum) == pytest.approx(B, rel=1e-5)


def test_equal_leading_terms_the_second_level_decides_the_verdict():
    slow, fast = "-log(n) - log(log(n+1))/2", "-log(n) - 2*log(log(n+1))"  # Bertrand q = 1/2 and q = 2
    assert one(f"max({fast}, {slow})").verdict == "diverges"
    assert one(f"min({fast}, {slow})").verdict == "converges"


# ---------------------------------------------------------------------------
# late switches: the cutoff, hence B and the TRF, are exact
# ---------------------------------------------------------------------------
def test_late_switch_min_linear_and_steep_power():
    f = "min(-t/10, -50*log(n))"  # n^-50 until t = 4167, e^(-t/10) from 4168 on
    branch, cutoff = eventual_of(f)
    assert branch == -T / 10
    assert_cutoff_is_exact(f, branch, cutoff, 100_000)
    eps = (1e-20, 1e-25)
    r = one(f, eps=eps)
    assert r.verdict == "converges"
    assert r.trf == direct_trf_mpmath(f, eps, 64)  # the rest: below 64^-49 of B


def test_late_switch_max_with_the_trf_beyond_the_switch():
    f = "max(-t/10, -3*log(n))"  # e^(-t/10) up to t = 150, n^-3 from 151 on; n(1e-6) lies beyond
    branch, cutoff = eventual_of(f)
    assert branch == -3 * sympy.log(T + 1)
    assert_cutoff_is_exact(f, branch, cutoff, 100_000)
    r = one(f)
    B, trf = direct_trf(f, EPS, 2_000_000)
    assert r.trf == trf and trf["1e-06"] > cutoff
    assert float(r.series_sum) == pytest.approx(B, rel=1e-12)


def test_a_swap_between_two_spot_checks_is_found():
    # -t/100 - 41.35 is the smaller one at t = 0 and for t >= 898, but -7.4 ln n is smaller on about
    # 600..897: a single-switch search sampled at a few distances took the cutoff to be 0 and summed
    # the wrong weights there (n(1e-3) = 691 instead of 680)
    f = "min(-t/100 - 41.35, -7.4*log(n))"
    branch, cutoff = eventual_of(f)
    assert_cutoff_is_exact(f, branch, cutoff, 100_000)
    assert 800 < cutoff < 1000
    r = one(f)
    B, trf = direct_trf(f, EPS, 10_000)
    assert r.trf == trf
    assert float(r.series_sum) == pytest.approx(B, rel=1e-12)


def test_arguments_that_swap_many_times_near_the_crossing():
    # sin(t)/100 makes the two arguments trade places again and again around t ~ 9120
    f = "min(-t/1000 + sin(t)/100, -log(n))"
    r = one(f, eps=())
    assert r.verdict == "converges"
    branch, cutoff = eventual_of(f)
    assert branch == -T / 1000 + sympy.sin(T) / 100
    assert_cutoff_is_exact(f, branch, cutoff, 200_000)


def test_nested_min_max():
    f = "min(max(min(-t/7, -2*log(n)), -3*log(n)), max(-t/100, -4*log(n)+2))"
    branch, cutoff = eventual_of(f)
    assert branch == 2 - 4 * sympy.log(T + 1)
    assert_cutoff_is_exact(f, branch, cutoff, 100_000)
    r = one(f)
    assert r.verdict == "converges"
    B, trf = direct_trf(f, EPS, 200_000)  # the rest: ~1e-15 of B
    assert r.trf == trf


# ---------------------------------------------------------------------------
# what stays open, and says so
# ---------------------------------------------------------------------------
def test_switch_beyond_reach_keeps_the_verdict_without_sums():
    r = one("min(-t/1e30, -log(n))")  # -log n until t ~ 7e31: converges, but no term can be summed to get there
    assert r.verdict == "converges"
    assert r.trf == {"0.001": None, "1e-06": None} and r.series_sum is None
    assert "2**64" in r.trf_note


def test_an_oscillating_difference_stays_inconclusive():
    r = one("min(-2*log(n), -2*log(n)+sin(t)/n)", eps=())
    assert r.verdict == "inconclusive" and "swap again and again" in r.explanation


def test_last_failure_finds_the_last_distance_of_a_middle_gap():
    d = (T - 600) * (T - 900)  # >= 0 except on 601..899
    assert last_failure(d, T, 1, 2**64, lambda k: None) == 899
    assert last_failure(d + 10**6, T, 1, 2**64, lambda k: None) is None
    assert last_failure(-d, T, 1, 2**64, lambda k: None) == 2**64  # fails for every large t


def test_interval_bounds_that_never_tighten_are_given_up_not_trusted():
    # log(t+1) log(t+2) - log(t+1)^2 ~ ln(t)/t: each product is ~ln(t)^2, so on a range of t the bound
    # straddles 0 however narrow the range; an undecided distance counts as a failure (the cutoff can
    # only move up), and a search that would have to visit every distance stops within its budget
    d = sympy.log(T + 1) * sympy.log(T + 2) - sympy.log(T + 1) ** 2 - 1 / (T + 2)
    assert last_failure(d, T, 1, 2**64, lambda k: None) == 2**64
    with pytest.raises(Unbounded):
        last_failure(d, T, 1, 2**64, lambda k: True)


def test_cli_json(capsys):
    assert main(["theory", "min(-log(n), -t/1000)", "--json", "--eps", "1e-3,1e-6"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["verdict"] == "converges" and row["trf"] == direct_trf(row["pe"], EPS, 60_000)[1]


def test_theorem_0_5_says_which_sum_is_missing():
    from extrap.theory import compare

    c = compare("formula:min(-t/1e30, -log(n))", "formula:-t/1e30 - 1", num_heads=1, eps=(1e-3,))
    assert c.smaller is None and "needs B of min(-t/1e30, -log(n))" in c.explanation
