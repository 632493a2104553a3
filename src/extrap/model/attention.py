"""Causal attention with any bias RPE: the bias blocks, block by block of queries, and the probes.

The (H, L, L) bias is never built.  For each block of queries we gather the bias
of the distances it needs from the scheme's own function, add the causal (and
optional window) mask, and hand the block to the kernel (:mod:`extrap.model.kernel`,
which computes every softmax(q·k·s + bias)).  A Toeplitz scheme is evaluated once
per forward on the 1-D distances 0..max_t; on consecutive positions each of its
blocks is then a strided view of that table, elsewhere it is gathered.  FIRE, which
also depends on the query position, is evaluated on the block itself.

This module owns :class:`BiasContext` (what one layer adds, for these positions), the bias blocks
(:func:`toeplitz_table`, :func:`bias_block`), the choice of path and backend (:func:`attend`, with a
KV cache too: queries are then the last of the keys) and the probes (recorded probability or logit
blocks, :func:`attend_rows`, :func:`dense_probs`).

Shapes (torchtune style): q (B, H, Lq, Dh), k and v (B, H, Lk, Dh); positions are the keys' (Lk,) or (B, Lk).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from extrap.errors import ExtrapError
from extrap.model.content import content_attention, content_rows
from extrap.model.flex import FORMULA, TABLE, flex_attention, formula_ok, table_ok
from extrap.model.kernel import (
    MASKED,
    consecutive,
    flex_available,
    softmax_attention,
    toeplitz_attention,
    toeplitz_vector,
    toeplitz_view,
)
from extrap.positional.base import BiasRPE
from extrap.positional.content import ContentBias

# A learned mask runs explicit softmax, which is memory-bound: smaller query blocks waste less
# of the causal triangle (measured: 128 beats 256 at L = 512 for KERPLE and T5).
GRAD_BLOCK = 128
# The fused kernel runs each block in parallel over its rows: at long L fewer, larger blocks (up to
# L/8, which costs 1/8 more of the causal triangle) keep the cores busy (measured: 8k, 2 threads,
# 256 -> 1024 takes the ratio to causal SDPA from 1.13-1.27 to 1.08-1.10).
MAX_FUSED_BLOCK = 2048


@dataclass
class BiasContext:
    """What the attention needs to build bias blocks for one forward pass."""

    scheme: BiasRPE | None  # None: no additive bias (NoPE, APE, RoPE)
    values: dict[str, torch.Tensor]  # the scheme's parameter values for this layer, (H, ...) each
    positions: torch.Tensor  # (L,) or (B, L) integer or float positions of the keys
    window: int | None = None  # attend only to keys with t < window (None: all)
    table: torch.Tensor | None = None  # cached r(t) for t = 0..max_t, (H or 1, max_t + 1)
    contiguous: bool = False  # positions == arange(L): bias blocks are Toeplitz views of the table
    toeplitz_rows: int | None = None  # only queries [0, this) follow the table (FIRE); None: all
    segments: torch.Tensor | None = None  # (B, L) BiPE: r is read at segment distances, the mask at positions'

    @property
    def batched(self) -> bool:
        return self.positions.dim() == 2 or self.segments is not None


def toeplitz_table(scheme: BiasRPE, values: dict[str, torch.Tensor], max_t: int, dtype, device) -> torch.Tensor:
    """r(t) for t = 0..max_t from the scheme's function: (H or 1, max_t + 1).

    A scheme that is Toeplitz only up to a query position (FIRE) is evaluated at i = 0, which
    stands for every query i <= ``scheme.toeplitz_until``.
    """
    t = torch.arange(max_t + 1, device=device, dtype=torch.float64)
    vals = {k: v.to(device=device, dtype=torch.float64) for k, v in values.items()}
    return scheme.bias(t, vals, i=None if scheme.toeplitz else torch.zeros_like(t)).to(dtype)


def bias_block(ctx: BiasContext, q0: int, q1: int, k0: int, k1: int, dtype) -> torch.Tensor:
    """Bias plus causal/window mask for queries [q0, q1) and keys [k0, k1) (indices into ``ctx.positions``).

    Returns (H or 1, Lq, Lk) for shared positions, or (B, H or 1, Lq, Lk) for per-sequence ones.
    """
    table_rows = ctx.toeplitz_rows is None or q1 <= ctx.toeplitz_rows
    if ctx.contiguous and ctx.table is not None and table_rows:
        # w[c] = r(t_min + c): one vector per head; its view, keys flipped back, is the block
        Lq, Lk = q1 - q0, k1 - k0
        w = toeplitz_vector(ctx.table.to(dtype), (q0 - k0) - (Lk - 1), Lq + Lk - 1, ctx.window)
        return toeplitz_view(w, 0, Lq, Lk)[0].flip(-1)
    pos = ctx.positions
    pi, pj = pos[..., q0:q1], pos[..., k0:k1]
    t = pi.unsqueeze(-1) - pj.unsqueeze(-2)  # (…, Lq, Lk): t = i - j, conventions.py
    visible = t >= 0
    if ctx.window is not None:
        visible = visible & (t < ctx.window)
    if ctx.segments is not None:  # BiPE (He et al. 2024): the bias reads segment distances
        s = ctx.segments
        t = s[..., q0:q1].unsqueeze(-1) - s[..., k0:k1].unsqueeze(-2)  # (B, Lq, Lk)
        visible = visible.expand_as(t)
    if ctx.scheme is None:
        bias = torch.zeros((1,) + tuple(t.shape[-2:]), dtype=dtype, device=t.device)
        if ctx.batched:
            bias = bias.unsqueeze(0)
    elif ctx.table is not None and table_rows:
        idx = t.clamp(0, ctx.table.shape[-1] - 1).long()
        bias = ctx.table[:, idx]  # (H, …, Lq, Lk)
        if ctx.batched:
            bias = bias.movedim(0, 1)  # (B, H, Lq, Lk)
    else:  # a scheme that also depends on the query position (FIRE)
        tt = t.clamp_min(0).to(torch.float32)
        ii = pi.unsqueeze(-1).to(torch.float32).expand_as(tt)
        bias = ctx.scheme.bias(tt, {k: v.float() for k, v in ctx.values.items()}, i=ii).to(dtype)
        if ctx.batched:
            bias = bias.movedim(0, 1)
    if ctx.batched:
        visible = visible.unsqueeze(1)
    return torch.where(visible, bias.to(dtype).clamp_min(MASKED), torch.full((), MASKED, dtype=dtype, device=t.device))


# flex: FlexAttention with each scheme's default mode (extrap.model.flex); flex-formula / flex-table force
# r(t) computed in the kernel / read from the r(t) table
BACKENDS = ("auto", "blocked", "flex", "flex-formula", "flex-table")
FLEX_MODES = {"flex": None, "flex-formula": FORMULA, "flex-table": TABLE}


def choose_backend(requested: str, ctx: BiasContext, q: torch.Tensor, return_probs: bool) -> str:
    """``auto``: FlexAttention on a GPU (FIRE: the blocked path, until measured), the blocked path on CPU
    (where flex needs a compile and has no backward).  ``flex`` (and its forced modes) is honoured wherever
    the bias is a function of t = i - j on consecutive positions, or of t and the query position (FIRE,
    formula mode: ``flex-table`` is refused for it)."""
    if requested not in BACKENDS:
        raise ExtrapError(f"attention backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    if requested == "flex-table" and not table_ok(ctx.scheme):
        raise ExtrapError(f"attention: {ctx.scheme.spec} depends on the query position: no r(t) table for flex-table")
    flex_ok = (  # flex computes r(qi - kj) (FIRE: and qi) with qi = q_idx: the positions must be consecutive
        ctx.contiguous
        and (ctx.table is not None or ctx.scheme is None or not table_ok(ctx.scheme))
        and formula_ok(ctx.scheme)
        and not ctx.batched
        and not return_probs
        and flex_available()
    )
    if requested in FLEX_MODES and flex_ok and (q.is_cuda or not torch.is_grad_enabled()):
        return "flex"
    # auto leaves FIRE on the blocked kernel until a GPU has timed its fused backward, which writes a gradient
    # for each of its 99 parameter reads per (query, key) pair; flex / flex-formula still run it in the kernel
    if requested == "auto" and flex_ok and q.is_cuda and not getattr(ctx.scheme, "flex_query", False):
        return "flex"
    return "blocked"


def attend(
    q,
    k,
    v,
    ctx: BiasContext,
    temperature: float | torch.Tensor = 1.0,
    block: int = 256,
    return_probs: bool = False,
    backend: str = "auto",
    return_logits: bool = False,
):
    """Softmax(q k^T / (sqrt(Dh) τ) + r / τ) v, causal, block by block (or with FlexAttention).

    q (B, H, Lq, Dh) are the queries of the last Lq of the keys k, v (B, H, Lk, Dh): Lq = Lk for a
    whole sequence, Lq < Lk for new tokens against a KV cache.  Returns out (B, H, Lq, Dh) and, when
    asked, the probabilities (``return_probs``) or the softmax input (``return_logits``, -inf where
    masked) as a list of (key offset, (B, H, Lq_block, Lk_block)) blocks.
    """
    if return_probs and return_logits:
        raise ExtrapError("attention: ask for probabilities or logits, not both")
    record = "probs" if return_probs else ("logits" if return_logits else None)
    tau = float(temperature)
    out, blocks = _attend(q, k, v, ctx, tau, 1.0 / (math.sqrt(q.shape[-1]) * tau), block, record, backend)
    if record == "logits":  # masked entries hold MASKED / τ (plus a finite q·k): the softmax gives them 0
        blocks = [(k0, s.masked_fill(s < MASKED / (2 * tau), -math.inf)) for k0, s in blocks]
    return out, blocks


def _attend(q, k, v, ctx: BiasContext, tau: float, scale: float, block: int, record: str | None, backend: str):
    if isinstance(ctx.scheme, ContentBias):  # Shaw, CAPE: the scheme reads q or q·k, block by block
        return content_attention(q, k, v, ctx, tau, block, record)
    if q.shape[2] < k.shape[2]:
        return _attend_cached(q, k, v, ctx, tau, scale, record)
    if ctx.scheme is None and ctx.window is None and not ctx.batched and record is None:
        # no bias: the fused causal kernel.  Positions only matter through the mask here.
        return softmax_attention(q, k, v, None, scale)
    if choose_backend(backend, ctx, q, record is not None) == "flex":  # r(t) from the scheme's formula
        mode = FLEX_MODES.get(backend)
        out = flex_attention(q, k, v, ctx.scheme, ctx.values, table=ctx.table, window=ctx.window, tau=tau, mode=mode)
        return out, None
    if not (ctx.contiguous and not ctx.batched and (ctx.table is not None or ctx.scheme is None)):
        return _attend_blocks(q, k, v, ctx, tau, scale, block, record, 0)
    L = q.shape[2]
    P = L if ctx.toeplitz_rows is None else min(L, ctx.toeplitz_rows)
    out, kept = None, None
    if P > 0:  # causal: the first P queries see only the first P keys
        bs = _toeplitz_block(block, P, ctx.table, record)
        qkv = (t[:, :, :P] for t in (q, k, v))
        out, kept = toeplitz_attention(*qkv, ctx.table, ctx.window, scale, bs, tau=tau, record=record)
    if P == L:
        return out, kept
    rest = BiasContext(ctx.scheme, ctx.values, ctx.positions, ctx.window)  # rows past the table: per entry
    out2, kept2 = _attend_blocks(q, k, v, rest, tau, scale, block, record, P)
    out = out2 if out is None else torch.cat([out, out2], dim=2)
    return out, ((kept or []) + kept2 if record else None)


def _attend_cached(q, k, v, ctx: BiasContext, tau: float, scale: float, record: str | None):
    """New queries, the last Lq of the Lk keys of a KV cache: one block against every cached key (a
    rolling cache holds just the window).  Consecutive key positions with a Toeplitz table (or no
    bias) read a strided view, from any first position; other keys their gathered bias block."""
    Lq, Lk = q.shape[2], k.shape[2]
    if ctx.toeplitz_rows is None and (ctx.table is not None or ctx.scheme is None) and consecutive(ctx.positions, None):
        return toeplitz_attention(q, k, v, ctx.table, ctx.window, scale, Lq, tau=tau, record=record, trim=False)
    out, p = softmax_attention(q, k, v, _mask(ctx, Lk - Lq, Lk, 0, tau, q.dtype), scale, record)
    return out, ([(0, p)] if record else None)


def _toeplitz_block(block: int, L: int, table: torch.Tensor | None, record: str | None) -> int:
    """Queries per block of the Toeplitz path: smaller where a learned bias runs explicit softmax, larger
    (up to L/8) where the fused kernel runs alone."""
    bs = min(block, L)
    if table is not None and table.requires_grad and torch.is_grad_enabled():
        return min(bs, GRAD_BLOCK)
    if record is None:
        return min(L, max(bs, min(L // 8, MAX_FUSED_BLOCK)))
    return bs


def _attend_blocks(q, k, v, ctx: BiasContext, tau: float, scale: float, block: int, record: str | None, start: int):
    """Queries [start, L) in blocks, each with its bias block built by :func:`bias_block`."""
    L = q.shape[2]
    outs, kept = [], []
    for q0 in range(start, L, block):
        q1 = min(L, q0 + block)
        k0 = 0 if ctx.window is None or ctx.batched else max(0, q0 - ctx.window + 1)
        mask = _mask(ctx, q0, q1, k0, tau, q.dtype)
        out, p = softmax_attention(q[:, :, q0:q1], k[:, :, k0:q1], v[:, :, k0:q1], mask, scale, record)
        outs.append(out)
        if record:
            kept.append((k0, p))
    return torch.cat(outs, dim=2), (kept if record else None)


def _mask(ctx: BiasContext, q0: int, q1: int, k0: int, tau: float, dtype) -> torch.Tensor:
    """(B or 1, H or 1, Lq, Lk) bias block of keys [k0, q1) for the queries at keys [q0, q1), divided by τ."""
    mask = bias_block(ctx, q0, q1, k0, q1, dtype) / tau
    return mask.unsqueeze(0) if mask.dim() == 3 else mask


def attend_rows(q, k, ctx: BiasContext, temperature: float | torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
    """Exact attention probabilities of the query rows ``rows`` over all keys: (B, H, R, L), 0 = masked.

    q, k: (B, H, L, Dh).  Only these R rows are computed, each from its own bias row, so a long
    sequence is fine.
    """
    tau = float(temperature)
    if isinstance(ctx.scheme, ContentBias):
        return content_rows(q, k, ctx, tau, rows)
    scale = 1.0 / (math.sqrt(q.shape[-1]) * tau)
    B, H, L, _ = q.shape
    out = q.new_zeros(B, H, len(rows), L)
    for a, r in enumerate(rows):
        mask = _mask(ctx, r, r + 1, 0, tau, q.dtype)
        _, p = softmax_attention(q[:, :, r : r + 1], k[:, :, : r + 1], None, mask, scale, "probs")
        out[:, :, a : a + 1, : r + 1] = p
    return out


def dense_probs(blocks: list, length: int) -> torch.Tensor:
    """Assemble ``attend(..., return_probs=True)`` blocks into (B, H, L, L) (short L only)."""
    first = blocks[0][1]
    out = first.new_zeros(first.shape[0], first.shape[1], length, length)
    q0 = 0
    for k0, p in blocks:
        lq, lk = p.shape[-2], p.shape[-1]
        out[:, :, q0 : q0 + lq, k0 : k0 + lk] = p
        q0 += lq
    return out
