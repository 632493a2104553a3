"""Blockwise attention under an extension method: no (L, L) tensor, the run's own rotation.

For a block of queries and a block of keys, each branch of the method that the block needs rotates
the queries by q_b(i) and the keys by k_b(j) with the model's own rotary function, scores them, and
the method's selection picks one score per pair (ReRoPE: two score blocks, merged by t < w).  Blocks
are merged with the online softmax (running max and sum), so memory is O(block²) beyond q, k and v.

Shapes: q (B, H, Lq, D) and k, v (B, H, Lk, D), unrotated; i (Lq,) and j (Lk,) absolute positions,
j ascending.  ``rotate(q, k, qpos, kpos) -> (q', k')`` is the run's rotation (rope, xpos, an hf:
model's rotary module).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from extrap.extend.methods import MASKED, Method

Rotate = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
BLOCK = 256  # queries (and keys) per block


def _score_block(method: Method, rotate: Rotate, qb, kb, i, j, origin: int, scale: float):
    """(B, H, Lq, Lk) float32 scores of one block, -inf where masked; None when every pair is masked."""
    sel = method.select(i, j)
    lo, hi = int(sel.min()), int(sel.max())
    if hi == MASKED:
        return None
    branches = method.branches()
    s = None
    for b in range(max(lo, 0), hi + 1):
        br = branches[b]
        pick = None if lo == hi else sel == b  # None: the whole block is this branch's
        cols = None if pick is None else pick.any(0).nonzero().squeeze(1)  # rotate only the keys it scores
        if cols is not None and cols.numel() == 0:
            continue
        whole = cols is None or cols.numel() == kb.shape[2]
        kc, jc = (kb, j) if whole else (kb[:, :, cols], j[cols])
        shift = origin if br.relative else 0  # a relative branch may run on in-cache positions
        qr, kr = rotate(qb, kc, br.q(i - shift), br.k(jc - shift))
        sc = (qr @ kr.transpose(-1, -2)).float().mul_(scale)
        if pick is None:
            return sc
        if not whole:
            sc = sc.new_full(sc.shape[:-1] + (kb.shape[2],), -torch.inf).index_copy_(-1, cols, sc)
        s = sc.masked_fill_(~pick, -torch.inf) if s is None else torch.where(pick, sc, s)
    return s  # pairs that no branch scores stay at -inf (the first branch's masked_fill)


def extended_attention(
    method: Method,
    rotate: Rotate,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    j: torch.Tensor,
    scale: float,
    *,
    origin: int = 0,
    spans: bool = True,
    block: int = BLOCK,
) -> torch.Tensor:
    """softmax over the method's scores, times v: (B, H, Lq, D) in q's dtype.

    ``origin``: relative branches rotate by positions minus origin (the same distances, smaller angles:
    a stream's in-cache positions).  ``spans``: k holds the whole sequence 0..Lk-1, so the method's
    key spans skip the blocks it masks (bounded methods); False for a cache's gathered keys.
    """
    B, H, Lq, D = q.shape
    outs = []
    for q0 in range(0, Lq, block):
        q1 = min(Lq, q0 + block)
        qb, iq = q[:, :, q0:q1], i[q0:q1]
        top = int(iq[-1])
        m = torch.full((B, H, q1 - q0, 1), -torch.inf, device=q.device)
        den = torch.zeros((B, H, q1 - q0, 1), device=q.device)
        acc = torch.zeros((B, H, q1 - q0, v.shape[-1]), device=q.device)
        ranges = method.key_spans(int(iq[0]), top + 1) if spans else [(0, k.shape[2])]
        for r0, r1 in ranges:
            for k0 in range(r0, r1, block):
                k1 = min(r1, k0 + block)
                if int(j[k0]) > top:
                    break  # keys ascend: the rest are in the future of every query here
                s = _score_block(method, rotate, qb, k[:, :, k0:k1], iq, j[k0:k1], origin, scale)
                if s is None:
                    continue
                m_new = torch.maximum(m, s.amax(-1, keepdim=True))
                m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # rows with no key yet
                fix = torch.exp(m - m_safe)
                p = s.sub_(m_safe).exp_()  # -inf (masked) -> 0
                den = den * fix + p.sum(-1, keepdim=True)
                acc = acc * fix + p @ v[:, :, k0:k1].float()
                m = m_new
        outs.append((acc / den.clamp_min(1e-30)).to(q.dtype))
    return torch.cat(outs, dim=2)


def _cache_columns(method: Method, j: torch.Tensor, q0: int, q1: int) -> torch.Tensor:
    """Indices into the cached key positions j (ascending) of the keys that queries q0..q1-1 can see."""
    spans = torch.tensor(method.key_spans(q0, q1), device=j.device)  # (S, 2) position ranges
    ends = torch.searchsorted(j, spans.flatten()).tolist()  # the same ranges as indices into j
    return torch.cat([torch.arange(c0, c1, device=j.device) for c0, c1 in zip(ends[::2], ends[1::2])])


def streamed_attention(method: Method, rotate: Rotate, q, k, v, i, j, scale: float, *, origin: int = 0, band: int = 0):
    """:func:`extended_attention` of a bounded method's new queries against its rolling cache, in bands.

    Each band of queries (``band``, default max(128, W)) scores only the keys the method's key spans
    give it (its sinks and its window: O(band + W + n), however long the chunk or the stream), in one
    block with one softmax.  k, v hold the cached keys then the new ones at positions j, ascending.
    """
    step = band or max(128, method.bounded or 0)
    outs = []
    for a in range(0, q.shape[2], step):
        e = min(q.shape[2], a + step)
        cols = _cache_columns(method, j, int(i[a]), int(i[e - 1]) + 1)
        s = _score_block(method, rotate, q[:, :, a:e], k[:, :, cols], i[a:e], j[cols], origin, scale)
        p = torch.softmax(s, dim=-1)  # every query sees itself: t = 0 is in a bounded method's window
        outs.append((p @ v[:, :, cols].float()).to(q.dtype))
    return torch.cat(outs, dim=2)


def extended_probe(method: Method, rotate: Rotate, q, k, v, i, j, scale: float, record: str, block: int = BLOCK):
    """:func:`extended_attention` of a whole sequence that also records, per block of queries, the
    probabilities (``record`` "probs") or the logits ("logits", -inf where masked) over every key up to
    the block: ``(out, [(0, (B, H, Lq_block, Lk_block))])``, as the model's probes return them (short L)."""
    B, H, Lq, _ = q.shape
    outs, kept = [], []
    for q0 in range(0, Lq, block):
        q1 = min(Lq, q0 + block)
        iq, top = i[q0:q1], int(i[q1 - 1])
        end = int((j <= top).sum())
        parts = []
        for k0 in range(0, end, block):
            k1 = min(end, k0 + block)
            s = _score_block(method, rotate, q[:, :, q0:q1], k[:, :, k0:k1], iq, j[k0:k1], 0, scale)
            parts.append(s if s is not None else q.new_full((B, H, q1 - q0, k1 - k0), -torch.inf, dtype=torch.float32))
        s = torch.cat(parts, dim=-1)
        p = torch.softmax(s, dim=-1)
        outs.append((p @ v[:, :, :end].float()).to(q.dtype))
        kept.append((0, p if record == "probs" else s))
    return torch.cat(outs, dim=2), kept


__all__ = ["BLOCK", "MASKED", "Rotate", "extended_attention", "extended_probe", "streamed_attention"]
