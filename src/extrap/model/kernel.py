"""The attention kernel: softmax(q·k·scale + bias) v, computed here and nowhere else.

Every caller comes through this module: the GPT's attention (:mod:`extrap.model.attention` builds its
bias blocks), its KV cache, its probes (probabilities, logits, single rows) and the ``hf:`` adapter's
windowed attention (:func:`extrap.hf.attention.window_attention`).  It owns

* :func:`softmax_attention`: one block, with SDPA where it can (the fused kernel) and an explicit
  softmax where a learned bias needs its gradient or the probabilities or logits are recorded;
* :func:`toeplitz_attention`: consecutive positions, block by block, each bias block a (1, 1)-strided
  view (:func:`toeplitz_view`) of one vector r(t) per head (:func:`toeplitz_vector`), K and V reversed;
* :func:`flex_available`: whether this torch has FlexAttention (:mod:`extrap.model.flex`, a backend option);
* :func:`consecutive`: whether positions are p0, p0 + 1, ... (what a Toeplitz view needs).

Shapes: q (B, H, Lq, Dh) are the queries of the last Lq of the Lk keys k, v (B, H, Lk, Dh); Lq = Lk
without a KV cache.  A mask is additive, (B or 1, H or 1, Lq, Lk), MASKED where a key is hidden.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from extrap.precision import at_least_float32

MASKED = -1e30  # finite "minus infinity": a row with every key masked gives no NaN


def consecutive(positions: torch.Tensor, start: int | None = 0) -> bool:
    """Whether ``positions`` (L,) are the integers start, start + 1, ..., start + L - 1 (any start: None).

    Empty, float and per-sequence (B, L) positions are not: the callers then take the general path.
    """
    if positions.dim() != 1 or positions.is_floating_point() or positions.numel() == 0:
        return False
    p0 = int(positions[0]) if start is None else start
    return torch.equal(positions, torch.arange(p0, p0 + positions.numel(), device=positions.device))


def toeplitz_vector(table: torch.Tensor, first_t: int, length: int, window: int | None) -> torch.Tensor:
    """w[c] = r(first_t + c) for c < length, with MASKED where t < 0, t >= window or t is past the table.

    table: (Hb, T) holding r(0..T-1).  Returns (Hb, length), contiguous: every bias block of
    consecutive positions is a :func:`toeplitz_view` of it.
    """
    tt = torch.arange(first_t, first_t + length, device=table.device)
    valid = (tt >= 0) & (tt < table.shape[-1])
    if window is not None:
        valid &= tt < window
    picked = table[:, tt.clamp(0, table.shape[-1] - 1)].clamp_min(MASKED)
    return torch.where(valid, picked, torch.full((), MASKED, dtype=table.dtype, device=table.device))


def toeplitz_view(w: torch.Tensor, offset: int, Lq: int, Lk: int) -> torch.Tensor:
    """(1, Hb, Lq, Lk) view with view[0, h, a, c'] = w[h, offset + a + c'], sharing w's memory.

    A Toeplitz block r(i - j) with its keys reversed (c' = Lk - 1 - c) reads w at a + c': strides
    (1, 1) over one short vector, so no (Lq, Lk) index tensor, no gather and no copy.
    """
    return w.as_strided((1, w.shape[0], Lq, Lk), (0, w.stride(0), 1, 1), w.storage_offset() + offset)


def softmax_attention(q, k, v, mask, scale: float, record: str | None = None, dropout: float = 0.0):
    """softmax(q·k·scale + mask) v for one block: (out (B, H, Lq, Dh), the record or None).

    ``mask`` None: the causal mask (Lq = Lk) in the fused kernel.  ``record``: None, "probs" or
    "logits" (the softmax input, masked entries still finite); ``v`` None: the record only.  A mask
    that needs a gradient (learned KERPLE, T5, FIRE) sends SDPA to its math path anyway; doing the
    same three ops here skips that path's masked-row checks.
    """
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, dropout_p=dropout), None
    if record is None and v is not None and not (mask.requires_grad and torch.is_grad_enabled()):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, dropout_p=dropout), None
    s = torch.add(mask, q @ k.transpose(-1, -2), alpha=scale)
    p = torch.softmax(s, dim=-1, dtype=at_least_float32(s.dtype))  # float32 also under bf16 autocast (extrap.precision)
    out = None if v is None else (F.dropout(p, dropout) if dropout else p).to(v.dtype) @ v
    return out, {"probs": p, "logits": s}.get(record)


def toeplitz_attention(
    q, k, v, table, window: int | None, scale: float, block: int, *, tau=1.0, record=None, dropout=0.0, trim=True
):
    """softmax(q·k·scale + r(i - j) / τ) v for consecutive positions, ``block`` queries at a time.

    table: (Hb, T) with r(t) for t < T (MASKED from T on), or None for no bias (the causal and window
    mask only).  Query a is key Lk - Lq + a.  With the keys reversed (c' = Lk - 1 - c), the block of
    queries [q0, q1) against keys [k0, Lk - Lq + q1) reads r(a + c' - (Lq_block - 1)): one (1, 1)-strided
    view of w, so no (H, Lq, Lk) bias is ever written and the mask SDPA reads stays in cache; flipping
    K and V once costs O(Lk Dh).  ``trim``: each block reads only the keys its window reaches (False:
    every key, as a KV-cache step does).  Returns out (B, H, Lq, Dh) and, with ``record``, the list of
    (first key, (B, H, Lq_block, Lk_block)) blocks in ascending key order.
    """
    Lq, Lk = q.shape[2], k.shape[2]
    offset, bs = Lk - Lq, min(block, Lq)
    if table is None:
        table = q.new_zeros(1, Lk)
    # w[c] = r(c - (bs - 1)) / τ, c = 0 .. Lk + bs - 2: the distances of every block, -(bs-1) .. Lk-1.
    w = toeplitz_vector(table.to(q.dtype), -(bs - 1), Lk + bs - 1, window)
    if tau != 1.0:
        w = w / tau
    kf, vf = k.flip(2), v.flip(2)
    outs, kept = [], []
    for q0 in range(0, Lq, bs):
        q1 = min(Lq, q0 + bs)
        k0, k1 = max(0, offset + q0 - window + 1) if trim and window is not None else 0, offset + q1
        mask = toeplitz_view(w, bs - (q1 - q0), q1 - q0, k1 - k0)
        kb, vb = kf[:, :, Lk - k1 : Lk - k0], vf[:, :, Lk - k1 : Lk - k0]
        out, p = softmax_attention(q[:, :, q0:q1], kb, vb, mask, scale, record, dropout)
        outs.append(out)
        if record:
            kept.append((k0, p.flip(-1)))  # back to ascending key order
    return (outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)), (kept if record else None)


def flex_available() -> bool:
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True
