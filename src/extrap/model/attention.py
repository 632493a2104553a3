"""Causal attention with any bias RPE, computed block by block.

The (H, L, L) bias is never built.  For each block of queries we gather the bias
of the distances it needs from the scheme's own function, add the causal (and
optional window) mask, and call ``scaled_dot_product_attention`` on the block.
A Toeplitz scheme is evaluated once per forward on the 1-D distances
0..max_t and gathered; FIRE, which also depends on the query position, is
evaluated on the block itself.

Shapes (torchtune style): q, k, v are (B, H, L, Dh); positions are (L,) or (B, L).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from extrap.errors import ExtrapError
from extrap.positional.base import BiasRPE

# A learned mask runs explicit softmax, which is memory-bound: smaller query blocks waste less
# of the causal triangle (measured: 128 beats 256 at L = 512 for KERPLE and T5).
GRAD_BLOCK = 128
# The fused kernel runs each block in parallel over its rows: at long L fewer, larger blocks (up to
# L/8, which costs 1/8 more of the causal triangle) keep the cores busy (measured: 8k, 2 threads,
# 256 -> 1024 takes the ratio to causal SDPA from 1.13-1.27 to 1.08-1.10).
MAX_FUSED_BLOCK = 2048
MASKED = -1e30  # finite "minus infinity": a row with every key masked gives no NaN


@dataclass
class BiasContext:
    """What the attention needs to build bias blocks for one forward pass."""

    scheme: BiasRPE | None  # None: no additive bias (NoPE, APE, RoPE)
    values: dict[str, torch.Tensor]  # the scheme's parameter values for this layer, (H, ...) each
    positions: torch.Tensor  # (L,) or (B, L) integer or float positions
    window: int | None = None  # attend only to keys with t < window (None: all)
    table: torch.Tensor | None = None  # cached r(t) for t = 0..max_t, (H or 1, max_t + 1)
    contiguous: bool = False  # positions == arange(L): bias blocks are Toeplitz views of the table
    toeplitz_rows: int | None = None  # only queries [0, this) follow the table (FIRE); None: all

    @property
    def batched(self) -> bool:
        return self.positions.dim() == 2


def toeplitz_table(scheme: BiasRPE, values: dict[str, torch.Tensor], max_t: int, dtype, device) -> torch.Tensor:
    """r(t) for t = 0..max_t from the scheme's function: (H or 1, max_t + 1).

    A scheme that is Toeplitz only up to a query position (FIRE) is evaluated at i = 0, which
    stands for every query i <= ``scheme.toeplitz_until``.
    """
    t = torch.arange(max_t + 1, device=device, dtype=torch.float64)
    vals = {k: v.to(device=device, dtype=torch.float64) for k, v in values.items()}
    return scheme.bias(t, vals, i=None if scheme.toeplitz else torch.zeros_like(t)).to(dtype)


def toeplitz_block(table: torch.Tensor, q0: int, q1: int, k0: int, k1: int, window: int | None) -> torch.Tensor:
    """(Hb, Lq, Lk) block of r(i - j) with the causal/window mask, for contiguous positions.

    The block is a Toeplitz matrix, so it is a strided view of one short vector w
    holding r(t) for the Lq + Lk - 1 distances it contains: no (Lq, Lk) index tensor
    and no gather, just one copy (the flip that makes the view contiguous).
    """
    Lq, Lk = q1 - q0, k1 - k0
    t_min = (q0 - k0) - (Lk - 1)
    w = toeplitz_vector(table, t_min, Lq + Lk - 1, window)
    # w[c] = r(t_min + c); entry (a, b') of the view is w[a + b'] = r(q0 + a - (k1 - 1 - b')); flip b'.
    return w.as_strided((w.shape[0], Lq, Lk), (w.stride(0), 1, 1)).flip(-1)


def toeplitz_vector(table: torch.Tensor, first_t: int, length: int, window: int | None) -> torch.Tensor:
    """w[c] = r(first_t + c) for c < length, with MASKED where t < 0, t >= window or t is past the table.

    table: (Hb, T).  Returns (Hb, length), contiguous.  Every bias block of a contiguous sequence is a
    strided view of it.
    """
    tt = torch.arange(first_t, first_t + length, device=table.device)
    valid = (tt >= 0) & (tt < table.shape[-1])
    if window is not None:
        valid &= tt < window
    picked = table[:, tt.clamp(0, table.shape[-1] - 1)].clamp_min(MASKED)
    return torch.where(valid, picked, torch.full((), MASKED, dtype=table.dtype, device=table.device))


def bias_block(ctx: BiasContext, q0: int, q1: int, k0: int, k1: int, dtype) -> torch.Tensor:
    """Bias plus causal/window mask for queries [q0, q1) and keys [k0, k1).

    Returns (H or 1, Lq, Lk) for shared positions, or (B, H or 1, Lq, Lk) for per-sequence ones.
    """
    table_rows = ctx.toeplitz_rows is None or q1 <= ctx.toeplitz_rows
    if ctx.contiguous and ctx.table is not None and table_rows:
        return toeplitz_block(ctx.table.to(dtype), q0, q1, k0, k1, ctx.window)
    pos = ctx.positions
    pi, pj = pos[..., q0:q1], pos[..., k0:k1]
    t = pi.unsqueeze(-1) - pj.unsqueeze(-2)  # (…, Lq, Lk): t = i - j, conventions.py
    visible = t >= 0
    if ctx.window is not None:
        visible = visible & (t < ctx.window)
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


BACKENDS = ("auto", "blocked", "flex")


def choose_backend(requested: str, ctx: BiasContext, q: torch.Tensor, return_probs: bool) -> str:
    """``auto``: FlexAttention on a GPU, the blocked path on CPU (where flex needs a compile
    and has no backward).  ``flex`` is honoured wherever the bias is a Toeplitz table."""
    if requested not in BACKENDS:
        raise ExtrapError(f"attention backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    flex_ok = (
        (ctx.table is not None or ctx.scheme is None)
        and ctx.toeplitz_rows is None
        and not ctx.batched
        and not return_probs
        and _flex_available()
    )
    if requested == "flex" and flex_ok and (q.is_cuda or not torch.is_grad_enabled()):
        return "flex"
    if requested == "auto" and flex_ok and q.is_cuda:
        return "flex"
    return "blocked"


def _flex_available() -> bool:
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


_FLEX_FN = {}
_BLOCK_MASKS: dict = {}


def flex_attend(q, k, v, ctx: BiasContext, temperature: float, scale: float) -> torch.Tensor:
    """FlexAttention with a score_mod that reads the scheme's own r(t) table (compiled once per shape)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    L = q.shape[2]
    window = ctx.window
    if ctx.table is not None:
        table = (ctx.table.clamp_min(MASKED) / temperature).to(q.dtype)
        per_head, t_max = table.shape[0] > 1, table.shape[1] - 1

        def score_mod(score, b, h, qi, kj):
            return score + table[h if per_head else 0, (qi - kj).clamp(0, t_max)]
    else:
        score_mod = None

    def causal(b, h, qi, kj):
        keep = qi >= kj
        return keep & (qi - kj < window) if window is not None else keep

    key = (L, window, str(q.device))
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS.clear()  # one length at a time is the common case; do not hoard masks
        _BLOCK_MASKS[key] = create_block_mask(causal, None, None, L, L, device=q.device)
    if q.device.type not in _FLEX_FN:
        _FLEX_FN[q.device.type] = torch.compile(flex_attention, dynamic=False)
    return _FLEX_FN[q.device.type](q, k, v, score_mod=score_mod, block_mask=_BLOCK_MASKS[key], scale=scale)


def _attend_toeplitz(
    q, k, v, table: torch.Tensor, window: int | None, tau: float, scale: float, block: int, record: str | None
):
    """Blocked attention for contiguous positions, with every bias block a zero-copy view.

    With the keys in reverse order (j = L-1-c), the block of queries [q0, q1) against keys [k0, q1)
    reads r(i - j) = w[a + c'] for row a and reversed key column c': strides (1, 1) over one short
    vector w per head.  SDPA takes that overlapping view as its mask, so no (H, Lq, Lk) bias is
    ever written and the mask it reads stays in cache; flipping K and V once costs O(L Dh).
    """
    B, H, L, Dh = q.shape
    bs = min(block, L)
    if table.requires_grad and torch.is_grad_enabled():
        bs = min(bs, GRAD_BLOCK)
    elif record is None:
        bs = min(L, max(bs, min(L // 8, MAX_FUSED_BLOCK)))
    # w[c] = r(c - (bs - 1)) / τ, c = 0 .. L + bs - 2: the distances of every block, -(bs-1) .. L-1.
    w = toeplitz_vector(table.to(q.dtype), -(bs - 1), L + bs - 1, window)
    if tau != 1.0:
        w = w / tau
    kf, vf = k.flip(2), v.flip(2)
    outs, kept = [], []
    for q0 in range(0, L, bs):
        q1 = min(L, q0 + bs)
        Lq = q1 - q0
        k0 = 0 if window is None else max(0, q0 - window + 1)
        Lk = q1 - k0
        qb, kb, vb = q[:, :, q0:q1], kf[:, :, L - q1 : L - k0], vf[:, :, L - q1 : L - k0]
        out, p = _sdpa(qb, kb, vb, _toeplitz_view(w, bs - Lq, Lq, Lk), scale, record)
        outs.append(out)
        if record:
            kept.append((k0, p.flip(-1)))  # back to ascending key order
    return torch.cat(outs, dim=2), (kept if record else None)


def _toeplitz_view(w: torch.Tensor, offset: int, Lq: int, Lk: int) -> torch.Tensor:
    """(1, Hb, Lq, Lk) view with view[0, h, a, c'] = w[h, offset + a + c'], sharing w's memory."""
    return w.as_strided((1, w.shape[0], Lq, Lk), (0, w.stride(0), 1, 1), w.storage_offset() + offset)


def _sdpa(qb, kb, vb, mask, scale: float, record: str | None):
    """One block: the fused kernel, or explicit softmax when probabilities, logits or a bias gradient are needed.

    ``record``: None, "probs" or "logits" (the softmax input, masked entries still finite).
    A mask that needs a gradient (learned KERPLE, T5, FIRE) sends SDPA to its math path anyway;
    doing the same three ops here skips that path's masked-row checks.
    """
    if record is None and not (mask.requires_grad and torch.is_grad_enabled()):
        return F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale), None
    s = torch.add(mask, qb @ kb.transpose(-1, -2), alpha=scale)
    p = torch.softmax(s, dim=-1)
    return p @ vb, (s if record == "logits" else p)


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

    q, k, v: (B, H, L, Dh).  Returns out (B, H, L, Dh) and, when asked, the probabilities
    (``return_probs``) or the softmax input (``return_logits``, -inf where masked) as a list of
    (key offset, (B, H, Lq_block, Lk_block)) blocks.
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
    L = q.shape[2]
    plain = ctx.scheme is None and ctx.window is None and not ctx.batched
    if plain and record is None:
        # no bias: the fused causal kernel.  Positions only matter through the mask here.
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale), None
    if choose_backend(backend, ctx, q, record is not None) == "flex":
        return flex_attend(q, k, v, ctx, tau, scale), None
    if not (ctx.contiguous and not ctx.batched and (ctx.table is not None or ctx.scheme is None)):
        return _attend_blocks(q, k, v, ctx, tau, scale, block, record, 0)
    table = ctx.table if ctx.table is not None else q.new_zeros(1, L)  # no bias: the window mask only
    P = L if ctx.toeplitz_rows is None else min(L, ctx.toeplitz_rows)
    out, kept = None, None
    if P > 0:  # causal: the first P queries see only the first P keys
        out, kept = _attend_toeplitz(
            q[:, :, :P], k[:, :, :P], v[:, :, :P], table, ctx.window, tau, scale, block, record
        )
    if P == L:
        return out, kept
    rest = BiasContext(ctx.scheme, ctx.values, ctx.positions, ctx.window)  # rows past the table: per entry
    out2, kept2 = _attend_blocks(q, k, v, rest, tau, scale, block, record, P)
    out = out2 if out is None else torch.cat([out, out2], dim=2)
    return out, ((kept or []) + kept2 if record else None)


def _attend_blocks(q, k, v, ctx: BiasContext, tau: float, scale: float, block: int, record: str | None, start: int):
    """Queries [start, L) in blocks, each with its bias block built by :func:`bias_block`."""
    L = q.shape[2]
    outs, kept = [], []
    for q0 in range(start, L, block):
        q1 = min(L, q0 + block)
        k0 = 0 if ctx.window is None or ctx.batched else max(0, q0 - ctx.window + 1)
        mask = bias_block(ctx, q0, q1, k0, q1, q.dtype) / tau
        if mask.dim() == 3:
            mask = mask.unsqueeze(0)  # (1, H, Lq, Lk)
        out, p = _sdpa(q[:, :, q0:q1], k[:, :, k0:q1], v[:, :, k0:q1], mask, scale, record)
        outs.append(out)
        if record:
            kept.append((k0, p))
    return torch.cat(outs, dim=2), (kept if record else None)


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
