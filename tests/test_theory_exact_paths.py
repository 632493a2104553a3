"""Faster evaluations in the theory engine give the plain ones' numbers bit for bit.

* A Hurwitz tail's Euler-Maclaurin coefficients, kept per head and precision, give the tail and its error
  bound of the loop that rebuilds them at every J (at any J, in any order, at two precisions).
* Heads with the same a and q share the logarithms ln(a t + q) of their exact terms.
* The partial sums' shift (each row's largest bias, by torch.amax) is max(dim).values, NaN ignored.
"""

from __future__ import annotations

import math

import mpmath
import pytest
import torch

from extrap.theory import closed, numerics
from extrap.theory.quadrature import em_coefficient, pow10


def _plain_tail(s: closed.HurwitzSeries, J):
    """The reference: the expansion of HurwitzSeries._closed_tail with p(p+1)... rebuilt at every call."""
    p, u = s._p, J + s._shift
    up = u ** (-p)
    total = u * up / (p - 1) + up / 2
    rising, power, u2 = p, up / u, u * u
    goal, err = pow10(-(mpmath.mp.dps + 2)) * total, up
    for k in range(1, closed.HURWITZ_TERMS + 1):
        size = abs(term := em_coefficient(k) * rising * power)
        if size >= err:
            err = size
            break
        total += term
        err = size
        if err < goal:
            break
        rising *= (p + 2 * k - 1) * (p + 2 * k)
        power /= u2
    value = s._scale * total
    return value, s._scale * err + s.rounding * value


@pytest.mark.parametrize("p", ["1.5", "1.7142857142857142", "3", "7.25"])
def test_hurwitz_coefficients_kept_per_head_give_the_plain_tails(p):
    with mpmath.workdps(closed.DPS):
        c, a, q = mpmath.mpf(0), mpmath.mpf(1), mpmath.mpf(1)
        s = closed.HurwitzSeries(lambda k: -mpmath.mpf(p) * mpmath.log(1 + k), 0, False, c, mpmath.mpf(p), a, q)
    for dps in (closed.DPS, 20):
        with mpmath.workdps(dps):
            for J in (10**7, 24, 25, 10**3, 10**25, 31, 24):
                got, want = s._closed_tail(mpmath.mpf(J)), _plain_tail(s, mpmath.mpf(J))
                assert [x._mpf_ for x in got] == [x._mpf_ for x in want], (dps, J)
    assert len(s._coefficients) == 2  # one set per precision


def test_heads_with_the_same_a_and_q_share_their_logarithms():
    """KERPLE-log's heads share r2 (a) and q = 1: the second head takes no logarithm of its own, and every
    exact term is the plain exp(c - p ln(a t + q)) bit for bit."""
    closed.clear()
    with mpmath.workdps(closed.DPS):
        c, a, q = mpmath.mpf(0), mpmath.mpf(3) / 7, mpmath.mpf(1)
        series = []
        for p in (mpmath.mpf("1.5"), mpmath.mpf("2.75")):
            series.append(closed.HurwitzSeries(lambda k, p=p: -p * mpmath.log(a * k + q), 0, False, c, p, a, q))
            if len(series) == 1:
                taken = dict(closed._LOGS[(a, q)])
        assert closed._LOGS[(a, q)] == taken and len(taken) >= closed.HURWITZ_START
        for s in series:
            plain = [mpmath.exp(c - s._p * mpmath.log(a * k + q)) for k in range(s.n0)]
            assert [x._mpf_ for x in s.terms] == [x._mpf_ for x in plain]
    closed.clear()
    assert not closed._LOGS


def test_each_rows_largest_bias_is_the_plain_maximum():
    g = torch.Generator().manual_seed(1)
    for case in range(6):
        r = torch.randn(8, 3000, generator=g, dtype=torch.float64) * 50
        if case == 1:
            r[torch.rand(8, 3000, generator=g) < 0.01] = math.nan
        if case == 2:
            r[3] = -math.inf  # a fully masked head
            r[5] = math.nan
        if case == 3:
            r[torch.rand(8, 3000, generator=g) < 0.2] = math.inf
        if case == 4:  # zeros of both signs and nothing larger
            r = -r.abs()
            r[:, ::7], r[:, 3::7] = 0.0, -0.0
        top = r.max(dim=1).values  # the reference: max(dim).values, after nan_to_num where a row has NaN
        want = torch.nan_to_num(r, nan=-math.inf).max(dim=1).values if bool(top.isnan().any()) else top
        assert torch.equal(numerics._largest(r), want), case


def test_clear_cache_leaves_nothing_a_cold_run_would_compute():
    """bench/theory_speed.py's rounds start cold: every table the engine fills on first use is emptied."""
    from extrap.positional.bias import t5_bucket_steps
    from extrap.theory import analyse, asymptotics, clear_cache, quadrature

    analyse("type2", 1, eps=(1e-12,))  # expansions, Laguerre rules, powers of 10, Euler-Maclaurin coefficients
    analyse("t5", 2)
    tables = (quadrature._POW10, quadrature._EM_COEFFICIENTS, quadrature._LAGUERRE_RULES)
    assert asymptotics._expand.cache_info().currsize and all(tables) and t5_bucket_steps.cache_info().currsize
    clear_cache()
    assert asymptotics._expand.cache_info().currsize == 0 and not any(tables)
    assert t5_bucket_steps.cache_info().currsize == 0
