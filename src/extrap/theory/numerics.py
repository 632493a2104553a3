"""Vectorised numerics of a scheme's weights b_t = exp(r(t)) (torch, float64).

Partial sums S(L) = sum_{t<L} b_t, each head's largest weight, the weight the far
tail keeps (bounded r), the attention dilution S(L)/S(L_train), and the partial
sums reported as evidence when no convergence test decides.  All of it comes from
one pass of the scheme's own torch ``bias``; the verdicts never depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch

from extrap.errors import ExtrapError
from extrap.positional import get as get_scheme
from extrap.positional.base import Scheme
from extrap.theory.convergence import fmt
from extrap.theory.results import HeadResult

EVIDENCE_LENGTHS = (10**3, 10**4, 10**5, 10**6)  # partial sums reported when no test decides
SCAN = 8192  # distances scanned (torch) for the largest weight of a head


def partial_sums(
    scheme: Scheme | str, lengths: Iterable[int], num_heads: int = 8, values: Mapping[str, torch.Tensor] | None = None
) -> torch.Tensor:
    """S(L) = sum_{t<L} exp(r(t)) for each head and L: a (H, len(lengths)) float64 tensor.

    Computed by summation with the scheme's torch ``bias`` in float64, in chunks,
    after subtracting each head's largest bias so that the sum never overflows.
    (H is 1 for head-independent schemes.)
    """
    scheme = get_scheme(scheme)
    values = scheme.init_values(num_heads) if values is None else values
    values = {k: v.detach().double() for k, v in values.items()}
    return scan(scheme, values, [int(x) for x in lengths])[0]


def scan(scheme, values, lengths: list[int], min_scan: int = 0, chunk: int = 1 << 16):
    """(S(L) for L in lengths, max_t r(t) over the first chunk): one pass of ``bias``."""
    top = max(lengths + [min_scan])
    out, running, shift = None, None, None
    for start in range(0, top, chunk):
        stop = min(start + chunk, top)
        r = scheme.bias(torch.arange(start, stop, dtype=torch.float64), values)
        if shift is None:  # the largest bias (in practice at small t) sets the scale
            shift = torch.nan_to_num(r, nan=-math.inf).max(dim=1).values.clamp_min(-1e300)
            out = torch.zeros(r.shape[0], len(lengths), dtype=torch.float64)
            running = torch.zeros(r.shape[0], dtype=torch.float64)
        csum = torch.cumsum(torch.exp(r - shift[:, None]), dim=1) + running[:, None]
        for i, L in enumerate(lengths):
            if start < L <= stop:
                out[:, i] = csum[:, L - start - 1]
        running = csum[:, -1]
    return out * torch.exp(shift)[:, None], shift


def add_numerics(scheme, values, results: list[HeadResult], lengths, train_length: int, heads: list[int]) -> None:
    """Attach tail weights, dilution and (inconclusive heads) numeric evidence to ``results``."""
    need_tail = any(r.detail is not None and r.detail.bounded for r in results)
    inconclusive = any(r.verdict == "inconclusive" for r in results)
    if not (lengths or need_tail or inconclusive):
        return
    H = max(heads) + 1
    values64 = {k: v.detach().double() for k, v in values.items()}
    cut = max([(r.detail.cutoff or 0) for r in results if r.detail is not None] + [0])
    lengths = sorted({int(x) for x in lengths}) if lengths else []
    if train_length <= 0 or any(L <= 0 for L in lengths):
        raise ExtrapError("lengths must be positive integers")
    grid = sorted(set(lengths) | {train_length, max(lengths) // 2}) if lengths else [1]
    # one pass of the bias gives the partial sums and each head's largest weight
    sums, rmax = scan(scheme, values64, grid, min_scan=max(SCAN, 4 * cut) if need_tail else 0)
    sums = sums.expand(H, -1) if sums.shape[0] == 1 else sums
    rmax = rmax.expand(H) if rmax.shape[0] == 1 else rmax
    evidence = scan(scheme, values64, list(EVIDENCE_LENGTHS))[0] if inconclusive else None
    if evidence is not None and evidence.shape[0] == 1:
        evidence = evidence.expand(H, -1)
    for h, r in zip(heads, results):
        _tail_weight(r, float(rmax[h]))
        if lengths:
            _dilution(r, {L: float(sums[h, i]) for i, L in enumerate(grid)}, lengths, train_length)
        if evidence is not None and r.verdict == "inconclusive":
            _evidence(r, [float(x) for x in evidence[h]])


def _tail_weight(r: HeadResult, rmax: float) -> None:
    """A bounded r keeps far tokens at weight ~exp(tail level): relative to the head's largest weight."""
    v = r.detail
    if v is None or not v.bounded or v.tail_level is None:
        return
    level = float(v.tail_level)
    r.tail_term = math.exp(level - rmax)
    how = "settles at" if v.expr is not None and v.expr.is_number else "oscillates around"
    r.explanation += (
        f"; r(t) {how} {fmt(v.tail_level)}, so far-away tokens keep weight "
        f"~exp({fmt(v.tail_level)}) = {math.exp(level):.3g} "
        f"({r.tail_term:.3g} of the head's largest weight)"
    )


def _dilution(r: HeadResult, col: dict[int, float], lengths: list[int], train_length: int) -> None:
    """S(L)/S(L_train) for every L, and the slope c of a linearly growing S(j) ~ c*j."""
    base = col[train_length]
    r.dilution = {str(L): (col[L] / base if base > 0 else math.inf) for L in lengths}
    r.train_length = train_length
    if r.growth and "c*j" in r.growth:
        top = max(lengths)
        mean = (col[top] - col[top // 2]) / (top - top // 2)
        r.growth = f"S(j) ~ c*j with c ~ {mean:.3g} (mean of b_t over [{top // 2}, {top}))"


def _evidence(r: HeadResult, e: list[float]) -> None:
    """Partial sums at L = 1e3..1e6 and their growth per decade: evidence, not a verdict."""
    r.evidence = {f"S({L:.0e})": x for L, x in zip(EVIDENCE_LENGTHS, e)}
    slopes = [math.log(e[i + 1] / e[i]) / math.log(10) if e[i] > 0 else math.nan for i in range(len(e) - 1)]
    r.explanation += (
        "; numeric evidence only (not a verdict): S(L) at L = 1e3..1e6 is "
        + ", ".join(f"{x:.6g}" for x in e)
        + "; log10 growth per decade "
        + ", ".join(f"{s:.3f}" for s in slopes)
    )
