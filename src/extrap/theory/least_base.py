"""Men et al. 2024's least base, found exactly: the smallest β with B(m; β) >= 0 for every m < L.

B(m; β) = Σ_i w_i(m) cos(m θ_i(β)) (Theorem 1; w = 1 for RoPE, xPos's decay weights otherwise) with
power-law frequencies θ_i(β) = c_i β^(-e_i), e_i >= 0 (plain RoPE: c_i = 1, e_i = 2i/d; linear and NTK
scalings, partial rotary and p-RoPE keep the form).  The set of passing bases is not an interval: it
has islands 0.07-0.53% wide at d = 128 (issue 28), so no grid and no bisection over β is safe.

Proven stepping.  With δ = ln(β'/β) > 0, each angle moves by at most m·θ_i(β)·e_i·δ (θ_i falls with β),
so |B(m; β') - B(m; β)| <= δ·r(m), r(m) = m Σ_i w_i θ_i(β) e_i; and |∂²B/∂(ln β)²| <= m Σ_i w_i e_i² θ_i(β)
(m θ_i(β) + 1) on [β, ∞).  A base failing at m with B(m; β) = -v < 0 thus fails on all of [β, β·e^δ) for
δ = v/r(m), and up to the root of -v + B'δ + Rδ²/2 (B' the exact slope).  The search steps up by the
largest such δ over the failing m, from 10^(1/240) on, and stops at the first base that passes.  Every
base below the answer is proven to fail, except within steps of :data:`FLOOR` (relative 1e-9) taken where
the proven step is shorter, next to a sign change: an island narrower than 1e-9 could be stepped over,
and the answer is within a relative 1e-9 above the true least base.  B is evaluated in float64 as
one matrix product (cos((m0 + j)θ) from cos(m0 θ), cos(jθ)); margins subtract the float64 error bound,
and a base whose B comes within it of zero is decided by
:func:`~extrap.theory.aggregation.first_negative` (mpmath at 40 digits).
"""

from __future__ import annotations

import math

import torch

from extrap.devices import one_thread
from extrap.theory import aggregation as agg

FLOOR = 1e-9  # the shortest step (relative): where a proven step is shorter, the search steps this far
_J = 64  # distances per block of the product


def power_law(frequencies, probe: tuple[float, float, float] = (10.0, 1e3, 1e5)):
    """(c, e) with θ_i(β) = c_i β^(-e_i) for every pair, from θ at three bases; None if not of that form."""
    t = torch.as_tensor(frequencies(list(probe)), dtype=torch.float64)
    if t.dim() != 2 or t.shape[0] != 3 or bool((t < 0).any()):
        return None
    zero = (t == 0).all(0)
    if bool(((t == 0) != zero[None, :]).any()):
        return None
    safe = torch.where(zero[None, :], torch.ones_like(t), t)
    e = -torch.log(safe[1] / safe[0]) / math.log(probe[1] / probe[0])
    c = torch.where(zero, torch.zeros_like(e), safe[0] * probe[0] ** e)
    if bool((e < -1e-12).any()) or not torch.allclose(c * probe[2] ** (-e), t[2], rtol=1e-9, atol=0):
        return None
    return c, e.clamp(min=0.0)


def _sums(theta, slope, weights, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B(m), Σ_i w_i(m) sin(m θ_i) slope_i) for m < length, float64, from (J, 2K) @ (2K, blocks) products."""
    j = torch.arange(_J, dtype=torch.float64)[:, None] * theta[None, :]
    m0 = (_J * torch.arange(-(-length // _J), dtype=torch.float64))[:, None] * theta[None, :]
    cj, sj, cm, sm = torch.cos(j), torch.sin(j), torch.cos(m0), torch.sin(m0)
    if weights is not None:  # e^(a m) = e^(a m0) e^(a j)
        cj, sj, cm, sm = cj * weights[0], sj * weights[0], cm * weights[1], sm * weights[1]
    cos = torch.cat([cj, -sj], dim=1) @ torch.cat([cm, sm], dim=1).T  # cos(m0 θ + j θ), (J, blocks)
    sin = torch.cat([cj * slope, sj * slope], dim=1) @ torch.cat([sm, cm], dim=1).T  # sin(m0 θ + j θ)·slope
    return cos.T.reshape(-1)[:length], sin.T.reshape(-1)[:length]


def _step(values, slope_sum, m, theta, e, w_m, tol) -> float:
    """The longest proven step δ (in ln β) over the distances that fail beyond doubt (module docstring)."""
    te, te2 = theta * e, theta * e * e
    if w_m is None:
        rate, curve = m * te.sum(), m * te2.sum() + m * m * (te2 * theta).sum()
    else:
        rate, curve = m * (w_m @ te), m * (w_m @ te2) + m * m * (w_m @ (te2 * theta))
    v = -values - tol  # > 0 where B(m) < 0 beyond doubt
    ok = (v > 0) & (rate > 0)
    if not bool(ok.any()):
        return 0.0
    v, rate, curve = v[ok], rate[ok], curve[ok]
    d1 = m[ok] * slope_sum[ok] + rate * 1e-12  # B' = m Σ w sin(mθ) θ e, plus a margin for its float64 error
    second = 2 * v / (d1 + torch.sqrt(d1 * d1 + 2 * curve * v))  # the root of -v + B'δ + Rδ²/2
    return float(torch.maximum(v / rate, second).max())


def least_base(c, e, length: int, decay=None, start: float | None = None, top: float = agg.MIN_BASE_TOP):
    """The least base β in [start, top] with B(m; β) >= 0 for every m < ``length`` (module docstring), or None.

    Args:
        c, e: (K,) the power law θ_i(β) = c_i β^(-e_i) (:func:`power_law`).
        length: L; the distances checked are 0..L-1.
        decay: (K,) xPos rates a_i (weights e^(a_i m), taken relative to the largest), None: RoPE.
        start: the first base tried (default 10^(1/240), the old grid's first); top: the last.
    """
    c, e = torch.as_tensor(c, dtype=torch.float64), torch.as_tensor(e, dtype=torch.float64)
    rates = torch.zeros_like(c) if decay is None else torch.as_tensor(decay, dtype=torch.float64)
    rates = rates - rates.max()  # the largest weight 1, as first_negative decides signs
    m = torch.arange(length, dtype=torch.float64)
    weights = w_m = None
    if bool(rates.any()):
        weights = (torch.exp(torch.arange(_J, dtype=torch.float64)[:, None] * rates),
                   torch.exp(_J * torch.arange(-(-length // _J), dtype=torch.float64)[:, None] * rates))  # fmt: skip
        w_m = torch.exp(m[:, None] * rates[None, :])  # (L, K), for the step bound
    base = 10 ** (1 / agg.STEPS_PER_DECADE) if start is None else float(start)
    with one_thread():
        while base <= top:
            theta = c * base ** (-e)
            values, slope_sum = _sums(theta, theta * e, weights, length)
            tol = agg.tolerance(theta, length)
            low = float(values.min())
            if low >= -tol and (low >= tol or agg.first_negative(theta, length, decay=decay) is None):
                return base
            base *= math.exp(max(_step(values, slope_sum, m, theta, e, w_m, tol), FLOOR))
    return None


__all__ = ["FLOOR", "least_base", "power_law"]
