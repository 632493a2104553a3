"""Attention for a bias RPE that reads the content (:class:`extrap.positional.content.ContentBias`).

Shaw et al.'s q·a_r and CAPE's f(q·k, b) depend on the queries or the logits, so there is no r(t) table
and no fused kernel: each block of ``block`` queries builds its logits s = q·kᵀ/√Dh (B, H, Lq_b, Lk),
hands them to the scheme, masks, takes the softmax and adds the scheme's value term.  Memory per block
is the scheme's: (B, H, Lq_b, Lk) logits, plus (B, Lq_b, Lk, hidden) for CAPE's MLP, never (L, L, ·)
at once; a block holds at most ``BLOCK_ENTRIES`` (batch, query, key) entries (in training, autograd
keeps every block's activations for the backward pass).

Shapes as in :mod:`extrap.model.attention`: q (B, H, Lq, Dh) are the last Lq of the keys k, v (B, H, Lk, Dh);
``positions`` are the keys', (Lk,) or (B, Lk).
"""

from __future__ import annotations

import math

import torch

from extrap.model.kernel import MASKED, consecutive
from extrap.precision import at_least_float32

# Query blocks hold at most this many (batch, query, key) entries, whatever L: CAPE's f keeps
# 2H + 2·hidden + H floats per entry, so a block's memory stays bounded at long lengths.
BLOCK_ENTRIES = 2**20


def content_block(q, k, v, ctx, tau: float, qpos, kpos, record: str | None = None, first: int | None = None):
    """One block: queries at positions ``qpos`` (Lq_b,) or (B, Lq_b) against keys at ``kpos``.

    ``first``: given when positions are consecutive and there is no window, t of the block's first query
    and first key (t[a, j] = first + a - j, the keys ending with the block's last query): the scheme may
    then read t as that int, and the mask is the upper triangle of the last Lq_b keys alone.
    Returns (out (B, H, Lq_b, Dh) or None without v, the record (probs, or logits with MASKED/τ where hidden)).
    """
    scheme, values = ctx.scheme, ctx.values
    fast = first is not None and ctx.window is None
    t = first if fast else qpos.unsqueeze(-1) - kpos.unsqueeze(-2)  # (…, Lq_b, Lk): t = i - j, conventions.py
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = scheme.logits(q, s, t, values, i=qpos) / tau
    if fast:  # the future keys: the strict upper triangle of the last Lq_b columns
        Lq = s.shape[-2]
        future = torch.ones(Lq, Lq, dtype=torch.bool, device=s.device).triu(1)
        s[..., s.shape[-1] - Lq :].masked_fill_(future, MASKED / tau)
    else:
        visible = t >= 0
        if ctx.window is not None:
            visible = visible & (t < ctx.window)
        visible = visible.unsqueeze(1) if visible.dim() == 3 else visible
        s = torch.where(visible, s, torch.full((), MASKED / tau, dtype=s.dtype, device=s.device))
    p = torch.softmax(s, dim=-1, dtype=at_least_float32(s.dtype))  # float32 under autocast too
    out = None
    if v is not None:
        out = p @ v
        extra = scheme.mix(p, t, values)
        if extra is not None:
            out = out + extra
    return out, {"probs": p, "logits": s}.get(record)


def content_attention(q, k, v, ctx, tau: float, block: int, record: str | None = None):
    """Causal attention of the last Lq keys as queries, ``block`` queries at a time: (out, record blocks)."""
    Lq, Lk = q.shape[2], k.shape[2]
    off, pos = Lk - Lq, ctx.positions
    block = max(1, min(block, BLOCK_ENTRIES // (q.shape[0] * Lk)))
    steps = consecutive(pos, None)  # positions p0, p0 + 1, ...: every block's t is first + a - j
    outs, kept = [], []
    for q0 in range(0, Lq, block):
        q1 = min(Lq, q0 + block)
        k1 = off + q1  # causal: later keys are masked anyway
        qb, kb, vb = q[:, :, q0:q1], k[:, :, :k1], v[:, :, :k1]
        first = off + q0 if steps else None
        out, rec = content_block(qb, kb, vb, ctx, tau, pos[..., off + q0 : off + q1], pos[..., :k1], record, first)
        outs.append(out)
        if record:
            kept.append((0, rec))
    return torch.cat(outs, dim=2), (kept if record else None)


def content_rows(q, k, ctx, tau: float, rows) -> torch.Tensor:
    """Exact probabilities of the query ``rows`` over all keys: (B, H, R, L), 0 where masked."""
    B, H, L, _ = q.shape
    out = q.new_zeros(B, H, len(rows), L)
    pos = ctx.positions
    for a, r in enumerate(rows):
        _, p = content_block(
            q[:, :, r : r + 1], k[:, :, : r + 1], None, ctx, tau, pos[..., r : r + 1], pos[..., : r + 1], "probs"
        )
        out[:, :, a : a + 1, : r + 1] = p
    return out
