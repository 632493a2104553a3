"""Men et al. 2024 ("Base of RoPE Bounds Context Length", arXiv 2405.14591): RoPE's aggregation sum.

With θ_i the rotary frequencies of one head, B(m) = Σ_{i<d/2} cos(m θ_i) is, up to the factor 2σ²,
how much more attention a similar key gets than a random one at distance m (their Theorem 1).
Long-range aggregation needs B(m) >= 0 at every distance m < L, which bounds the base from below.

* :func:`first_negative`: the first distance where B(m) < 0, searched exactly over [start, stop).
* :func:`min_base_for_length`: the smallest base on a stated log grid whose B(m) >= 0 for every
  m < L.  It can miss passing islands narrower than the grid step; :mod:`extrap.theory.least_base` finds
  the least base exactly where θ is a power law in the base, and the RoPE analysis uses it there.
  The condition is not monotone in the base (a larger base can fail where a smaller one passes), so
  every grid base is checked, in increasing order, until the first that passes: no bisection.

Exactness.  B is evaluated in float64 blockwise as one matrix product: with m = m0 + j,
cos((m0 + j)θ) = cos(m0 θ)cos(jθ) - sin(m0 θ)sin(jθ), so J x nb distances cost a (J, 2K) @ (2K, nb)
product and no cosine each.  The float64 angle m·θ carries an error of about m·θ·2^-53, so a value
within :func:`tolerance` of zero is recomputed with mpmath at 40 digits from the same float64 θ_i:
the sign reported is that of the exact sum for those frequencies.

xPos (Sun et al. 2023, Eq. 11-12) scales pair i of a score at distance m by ζ_i^(m/scale_base), so its
sum is B(m) = Σ_i ζ_i^(m/scale_base) cos(m θ_i) by the same derivation.  Every function takes those
weights as ``decay``, the rates a_i = ln(ζ_i)/scale_base (B(m) = Σ_i e^(a_i m) cos(m θ_i)); the sign
is decided on B(m)/e^(max a · m), whose largest weight is 1, so the float64 tolerance above still holds
and no weight underflows before the largest has.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

AGGREGATION_CAP = 2**24  # distances searched for the first negative B(m)
MIN_BASE_MAX_LENGTH = 2**17  # longest L whose minimal base is searched (each grid base checks every m < L)
STEPS_PER_DECADE = 240  # grid of bases 10^(k/240): consecutive bases 0.96% apart
MIN_BASE_TOP = 1e12  # the grid's last base
_BLOCK = 256  # distances per row of the block table
_DIRECT = 64  # distances summed directly before the first block
_WINDOW = 128  # grid bases whose frequencies are built at once


def _f64(x) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.float64)


def tolerance(theta: torch.Tensor, stop: int) -> float:
    """Bound on the float64 error of B(m) for m < stop: K angles of size <= stop·max θ, 2^-53 relative each."""
    top = float(theta.max()) if theta.numel() else 0.0
    return 8 * theta.shape[-1] * max(top, 1.0) * stop * 2.0**-53 + 1e-12


def _rates(decay, theta: torch.Tensor) -> torch.Tensor:
    """The decay rates relative to the slowest, a_i - max a (all 0 without decay): (K,) <= 0."""
    if decay is None:
        return torch.zeros_like(theta)
    a = _f64(decay)
    return a - a.max()


def _weighted(distances: torch.Tensor, theta: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
    m = distances[:, None]
    terms = torch.cos(m * theta[None, :])
    return (terms * torch.exp(m * rates[None, :]) if rates.any() else terms).sum(dim=-1)


def aggregation_sum(theta, distances, decay=None) -> torch.Tensor:
    """B(m) = Σ_i e^(a_i m) cos(m θ_i) for each distance, summed directly (Men et al. 2024, Theorem 1).

    Args:
        theta: (K,) frequencies θ_i; distances: (N,) integers; decay: (K,) rates a_i (xPos: ln ζ_i / scale_base),
            None: RoPE's unweighted sum.

    Returns:
        (N,) float64.
    """
    theta = _f64(theta)
    rates = torch.zeros_like(theta) if decay is None else _f64(decay)
    return _weighted(_f64(distances), theta, rates)


def exact_sum(theta, m: int, decay=None) -> float:
    """B(m)/e^(max a · m) at 40 significant digits from the float64 θ_i and rates (mpmath), as a float64."""
    import mpmath

    rates = _rates(decay, _f64(theta)).tolist()
    with mpmath.workdps(40):
        m = mpmath.mpf(int(m))
        terms = (
            mpmath.exp(m * mpmath.mpf(r)) * mpmath.cos(m * mpmath.mpf(t)) for t, r in zip(_f64(theta).tolist(), rates)
        )
        return float(mpmath.fsum(terms))


def _first_below(values: torch.Tensor, offset: int, theta: torch.Tensor, tol: float, decay) -> int | None:
    """offset + the first index whose B < 0; values within tol of zero are decided by :func:`exact_sum`."""
    for i in torch.nonzero(values < tol).flatten().tolist():
        if values[i] < -tol or exact_sum(theta, offset + i, decay) < 0:
            return offset + i
    return None


def _block_table(theta: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
    """[w cos(jθ), -w sin(jθ)], w = e^(a j), for j < _BLOCK: (_BLOCK, 2K), the rotations by doubling."""
    c, s = torch.ones(1, len(theta), dtype=torch.float64), torch.zeros(1, len(theta), dtype=torch.float64)
    while len(c) < _BLOCK:  # rows n..2n-1 from rows 0..n-1 rotated by nθ
        ca, sa = torch.cos(len(c) * theta), torch.sin(len(c) * theta)
        c, s = torch.cat([c, c * ca - s * sa]), torch.cat([s, s * ca + c * sa])
    if rates.any():
        w = torch.exp(torch.arange(_BLOCK, dtype=torch.float64)[:, None] * rates[None, :])
        c, s = c * w, s * w
    return torch.cat([c, -s], dim=1)


def first_negative(theta, stop: int, start: int = 0, decay=None) -> int | None:
    """The first distance m in [start, stop) with B(m) < 0 (Men et al. 2024, Theorem 1), or None.

    Exact for the float64 frequencies given (module docstring); blocks grow as the search goes on,
    so an early sign change costs little.

    Args:
        theta: (K,) frequencies θ_i.
        stop: the end of the search (exclusive); start: its first distance.
        decay: (K,) rates a_i of xPos's weights e^(a_i m) (module docstring); None: RoPE.
    """
    theta = _f64(theta)
    rates = _rates(decay, theta)
    if int(((theta == 0) & (rates == 0)).sum()) >= int((theta != 0).sum()):
        return None  # n0 unit terms (θ = 0, the largest weight) against at most n0 others in [-1, 1]: B >= 0
    tol = tolerance(theta, stop)
    m, head = start, min(stop, start + _DIRECT)
    if m < head:
        hit = _first_below(_weighted(torch.arange(m, head, dtype=torch.float64), theta, rates), m, theta, tol, decay)
        if hit is not None:
            return hit
        m = head
    table, blocks = None, 4
    while m < stop:
        table = _block_table(theta, rates) if table is None else table
        blocks = min(blocks, -(-(stop - m) // _BLOCK))
        m0 = (m + _BLOCK * torch.arange(blocks, dtype=torch.float64))[None, :]  # (1, blocks)
        ang = theta[:, None] * m0  # (K, blocks)
        block = torch.cat([torch.cos(ang), torch.sin(ang)])
        if decay is not None:  # the weights e^(a m0) of each block's first distance
            block = block * torch.exp(rates[:, None] * m0).repeat(2, 1)
        values = (table @ block).T.reshape(-1)[: stop - m]
        hit = _first_below(values, m, theta, tol, decay)
        if hit is not None:
            return hit
        m += _BLOCK * blocks
        blocks = min(2 * blocks, 4096)
    return None


def base_grid(steps_per_decade: int = STEPS_PER_DECADE, top: float = MIN_BASE_TOP) -> list[float]:
    """The bases searched: 10^(k/steps_per_decade), k = 1, 2, ... up to ``top``."""
    return [10.0 ** (k / steps_per_decade) for k in range(1, int(round(math.log10(top) * steps_per_decade)) + 1)]


def min_base_for_length(
    frequencies: Callable[[list[float]], torch.Tensor],
    length: int,
    steps_per_decade: int = STEPS_PER_DECADE,
    top: float = MIN_BASE_TOP,
    decay=None,
) -> float | None:
    """The smallest grid base β with B(m) >= 0 for every m < length (Men et al. 2024, Theorem 1), or None.

    Every base of :func:`base_grid` is checked in increasing order and the first that passes is
    returned: correct however often the condition switches between bases (a passing base that lies
    strictly between two grid points is not seen; the grid's relative step is the resolution).

    Args:
        frequencies: bases (G,) -> their frequencies (G, K).
        length: L; the distances checked are 0..L-1.
        decay: (K,) xPos rates (as :func:`first_negative`), the same for every base.
    """
    grid = base_grid(steps_per_decade, top)
    for lo in range(0, len(grid), _WINDOW):
        bases = grid[lo : lo + _WINDOW]
        thetas = _f64(frequencies(bases))
        alive = _survive_short(thetas, length, decay)
        for w in torch.nonzero(alive).flatten().tolist():
            if first_negative(thetas[w], length, start=min(length, _DIRECT), decay=decay) is None:
                return float(bases[w])
    return None


def _survive_short(thetas: torch.Tensor, length: int, decay) -> torch.Tensor:
    """(G,) True for the bases whose B(m) >= 0 at every m < min(length, _DIRECT), all bases at once."""
    m = torch.arange(min(length, _DIRECT), dtype=torch.float64)
    values = torch.cos(thetas[:, None, :] * m[None, :, None])  # (G, M, K)
    if decay is not None:
        values = values * torch.exp(m[:, None] * _rates(decay, thetas[0])[None, :])[None]
    values = values.sum(dim=-1)  # (G, M)
    tol = tolerance(thetas, _DIRECT)
    alive = ~(values < -tol).any(dim=1)
    for w in torch.nonzero(alive & (values < tol).any(dim=1)).flatten().tolist():  # near zero: decide exactly
        alive[w] = first_negative(thetas[w], len(m), decay=decay) is None
    return alive


def search_bytes(pairs: int) -> int:
    """Peak memory of the least-base search over ``pairs`` frequencies: :func:`_survive_short`'s angles and
    their cosines, (_WINDOW bases, _DIRECT distances, pairs) float64 each."""
    return 2 * 8 * _WINDOW * _DIRECT * pairs


__all__ = [
    "AGGREGATION_CAP",
    "MIN_BASE_MAX_LENGTH",
    "MIN_BASE_TOP",
    "STEPS_PER_DECADE",
    "aggregation_sum",
    "base_grid",
    "exact_sum",
    "first_negative",
    "min_base_for_length",
    "search_bytes",
    "tolerance",
]
