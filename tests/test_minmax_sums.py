"""Exact B and n(eps) (000 Eq. 22) of min/max formulas whose last switch lies beyond term-by-term reach.

Each reference is independent of the engine: b_t = exp(r(t)) from the scheme's float64 torch bias,
summed directly over the distances before the switch K (or, at K ~ 10^12, the power law's own
Hurwitz zeta difference), plus the tail from K derived by hand: a geometric sum
e^(c - m K) / (1 - e^-m), or zeta(2, K + 1) for n^-2.
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
from extrap.theory.pieces import split

EPS = (1e-3, 1e-6)


@pytest.fixture(autouse=True)
def _thirty_digits():
    """The hand-derived tails at 30 digits (the engine sets its own precision)."""
    with mpmath.workdps(30):
        yield


def one(formula: str, eps=EPS):
    return analyse("formula:" + formula, 1, eps=eps, lengths=None)[0]


def r_float64(formula: str, t: np.ndarray) -> np.ndarray:
    import torch

    return get("formula:" + formula).bias(torch.as_tensor(t, dtype=torch.float64), {})[0].numpy()


def geometric_tail(c, m):
    """R(j) = sum_{t>=j} e^(c - m t) = e^(c - m j) / (1 - e^-m), and the least j with R(j) < x."""
    c, m = mpmath.mpf(c), mpmath.mpf(m)
    R = lambda j: mpmath.exp(c - m * j) / -mpmath.expm1(-m)  # noqa: E731
    first_below = lambda x: int(mpmath.floor((c - mpmath.log(-x * mpmath.expm1(-m))) / m)) + 1  # noqa: E731
    return R, first_below


def zeta2_tail():
    """R(j) = sum_{t>=j} (t+1)^-2 = zeta(2, j+1), and the least j with R(j) < x (bisection)."""
    R = lambda j: mpmath.zeta(2, j + 1)  # noqa: E731

    def first_below(x):
        lo, hi = 0, 10**30
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if R(mid) < x else (mid, hi)
        return hi

    return R, first_below


def reference(formula: str, K: int, tail, eps) -> tuple[float, dict]:
    """B and n(eps): float64 terms on 0..K-1 plus the hand-derived tail from K on."""
    R, first_below = tail
    b = np.exp(r_float64(formula, np.arange(K, dtype=np.float64)))
    suffix = np.cumsum(b[::-1])[::-1]  # sum_{j <= t < K} b_t, smallest terms first
    rest = float(R(K))
    B = float(np.sum(b)) + rest
    trf = {}
    for e in eps:
        target = B * e
        below = np.nonzero(suffix + rest < target)[0]
        trf[f"{e:g}"] = int(below[0]) if below.size else first_below(mpmath.mpf(B) * mpmath.mpf(repr(e)))
    return B, trf


def cutoff_of(formula: str, branch) -> int:
    """The engine's K, checked against the float64 bias: r = branch from K on, not at K - 1."""
    ev, K = eventual(get("formula:" + formula).symbolic(0, {}), T)
    assert sympy.simplify(ev - branch) == 0
    t = np.arange(K - 1, K + 5000, dtype=np.float64)
    same = np.isclose(r_float64(formula, t), sympy.lambdify(T, branch, "numpy")(t), rtol=1e-13, atol=0)
    assert same[1:].all() and not same[0]
    return K


# ---------------------------------------------------------------------------
# the issue's formula: -2 ln n on 1..221551, -t/9000 from 221552 on
# ---------------------------------------------------------------------------
def test_the_issue_formula_gets_exact_b_and_trf():
    f = "min(-2*log(n), -t/9000)"
    K = cutoff_of(f, -T / 9000)
    assert K == 221_552
    r = one(f)
    assert r.verdict == "converges" and r.trf_note is None
    assert float(r.series_sum) == pytest.approx(1.644929736598191, rel=1e-12)
    assert r.trf == {"0.001": 606, "1e-06": 167_359}
    B, trf = reference(f, K, geometric_tail(0, sympy.Rational(1, 9000)), EPS)
    assert float(r.series_sum) == pytest.approx(B, rel=1e-12) and r.trf == trf


def test_switch_points_are_exact():
    f = "min(-2*log(n), -t/9000)"
    pieces = split(get("formula:" + f).symbolic(0, {}), T, 221_552)
    assert [p.start for p in pieces] == [0, 1] and pieces[-1].stop == 221_552
    assert pieces[1].branch == -2 * sympy.log(T + 1)


def test_cli_json_prints_the_exact_numbers(capsys):
    assert main(["theory", "min(-2*log(n), -t/9000)", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert row["series_sum"] == pytest.approx(1.644929736598191, rel=1e-12)
    assert row["trf"] == {"0.001": 606, "1e-06": 167_359} and "trf_note" not in row


# ---------------------------------------------------------------------------
# switches near 2e5, 5e5, 1e7 and 1e12
# ---------------------------------------------------------------------------
CASES = [
    # min of a power law and a linear decay: n^-1.5 up to ~4.9e5, then e^(-t/25000)
    ("min(-1.5*log(n), -t/25000)", -T / 25000, (0, sympy.Rational(1, 25000)), (1e-3, 1e-6, 1e-9)),
    # nested: -t/25000, then n^-1.5 from ~4.9e5, then e^(3 - t/30000) from ~7e5
    ("min(max(-1.5*log(n), -t/25000), -t/30000 + 3)", 3 - T / 30000, (3, sympy.Rational(1, 30000)), EPS),
    # a branch with no closed form (Euler-Maclaurin between two points) until ~2.3e5
    ("min(-2*log(n) - sqrt(t)/1000, -t/9000)", -T / 9000, (0, sympy.Rational(1, 9000)), (1e-3, 1e-6, 1e-12)),
]


@pytest.mark.parametrize("formula, branch, geometric, eps", CASES)
def test_switches_near_2e5_and_5e5(formula, branch, geometric, eps):
    K = cutoff_of(formula, branch)
    assert 200_000 < K < 1_000_000
    r = one(formula, eps)
    B, trf = reference(formula, K, geometric_tail(*geometric), eps)
    assert float(r.series_sum) == pytest.approx(B, rel=1e-12)
    assert r.trf == trf


def test_max_of_two_with_a_switch_near_1e7():
    f = "max(-22.2 - t/1e6, -2*log(n))"  # n^-2, then e^(-22.2 - t/1e6) from ~6.6e4, n^-2 again from ~1e7
    K = cutoff_of(f, -2 * sympy.log(T + 1))
    assert 10**7 < K < 1.1 * 10**7
    eps = (1e-3, 1e-4, 1e-6, 1e-8)  # the last two in the linear piece and in the tail
    r = one(f, eps)
    B, trf = reference(f, K, zeta2_tail(), eps)
    assert float(r.series_sum) == pytest.approx(B, rel=1e-12)
    assert r.trf == trf and K - 10**7 < trf["1e-06"] < K < trf["1e-08"]


def test_switch_near_1e12_against_closed_forms():
    c = 18_096_000_000
    f = f"min(-2*log(n), -t/{c})"  # b_0 = 1, n^-2 on 1..K-1, e^(-t/c) from K ~ 1e12 on
    ev, K = eventual(get("formula:" + f).symbolic(0, {}), T)
    assert ev == -T / c
    # K is the first t >= 1 with t/c > 2 ln(t+1): exact, from mpmath at 30 digits
    assert K / c > 2 * mpmath.log(K + 1) and (K - 1) / c <= 2 * mpmath.log(K)
    assert 10**12 < K < 1.01 * 10**12
    geo, _ = geometric_tail(0, mpmath.mpf(1) / c)
    R = lambda j: mpmath.zeta(2, j + 1) - mpmath.zeta(2, K + 1) + geo(K) if j < K else geo(j)  # noqa: E731
    B = 1 + R(1)
    eps = (1e-3, 1e-6, 1e-12, 1e-15)  # R(K) ~ 1e-14 B: the last one falls in the geometric tail
    r = one(f, eps)
    assert float(r.series_sum) == pytest.approx(float(B), rel=1e-12)
    for e in eps:
        target, lo, hi = B * mpmath.mpf(repr(e)), 0, 10**14  # R(lo) >= target > R(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if R(mid) < target else (mid, hi)
        assert r.trf[f"{e:g}"] == hi
    assert r.trf["1e-12"] < K < r.trf["1e-15"]


# ---------------------------------------------------------------------------
# what stays null says exactly why
# ---------------------------------------------------------------------------
def test_a_piece_the_engine_cannot_sum_is_null_with_the_reason():
    r = one("min(-2*log(n) + sin(t)/10, -t/9000)")
    assert r.verdict == "converges" and r.series_sum is None and r.trf == {"0.001": None, "1e-06": None}
    assert "cannot be summed: Euler-Maclaurin is not accurate" in r.trf_note and "sin(t)/10" in r.trf_note


def test_a_switch_beyond_2_64_stays_null():
    r = one("min(-t/1e30, -log(n))")
    assert r.series_sum is None and "2**64" in r.trf_note


def test_a_window_beyond_term_by_term_reach_is_exact():
    # r = 0 for t < W, -oo beyond: B = W and R(j) = W - j < W eps from j = W - W eps + 1 (an exact tie at W - W eps)
    r = analyse("window:W=1000000", 1, eps=EPS, lengths=None)[0]
    assert float(r.series_sum) == 1_000_000 and r.trf == {"0.001": 999_001, "1e-06": 1_000_000}
