"""Extension methods as branches merged by log-sum-exp: one FlexAttention call per branch.

Branch b of a method rotates every query by q_b(i) and every key by k_b(j) with the run's own ``rotate``,
attends over the pairs the method gives to b (mask_mod ``rule(i, j) == b``, the rule that ``select``
reads; a sparse block mask, so a window branch touches only its band) and returns (out_b, lse_b).  The
softmax over all of a row's keys is then the split softmax of FlashAttention (Dao et al. 2022, §3.1):

    out = Σ_b exp(lse_b - lse) · out_b,    lse = logsumexp_b lse_b,

as Self-Extend's and DCA's flash implementations merge their branches.  A row a branch does not see has
lse_b = -inf and weight 0.  A plain causal band would suit SDPA, but SDPA's public call returns no lse
and no branch of the catalog is a plain causal mask (the windows are bands), so every branch is flex.

On CUDA flex is compiled by inductor (fused and sparse); elsewhere it runs through the same call with
dynamo's eager backend (the dense scores FlexAttention's reference computes: tests at short lengths).
The blockwise kernel (:mod:`.attention`) stays the CPU path: :func:`attend` chooses.
"""

from __future__ import annotations

import weakref

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from extrap.errors import ExtrapError
from extrap.extend.attention import BLOCK as BLOCK_KEYS
from extrap.extend.attention import Rotate, extended_attention
from extrap.extend.methods import Method
from extrap.model.flex import kv_lists, own_code
from extrap.model.kernel import consecutive

try:  # torch >= 2.9 asks for the lse through AuxRequest (return_lse is deprecated there)
    from torch.nn.attention.flex_attention import AuxRequest
except ImportError:  # pragma: no cover - older torch
    AuxRequest = None

BLOCK = 128  # FlexAttention's sparse block (queries and keys)
DECODE_SCORES = 2**24  # float32 scores of one decoding step's single key block: 64 MB
MASK_PAIRS = 1 << 24  # (query, key) pairs whose rule is evaluated at once while a block mask is built


def merge_lse(outs: list[torch.Tensor], lses: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(Σ_b exp(lse_b - lse) out_b, lse) from outs (B, H, L, D) and lses (B, H, L), lse = logsumexp_b lse_b,
    in float32 (float64 inputs stay float64).  Rows with lse_b = -inf (branch b sees none of their keys)
    weigh 0 whatever out_b holds there."""
    dt = torch.promote_types(outs[0].dtype, torch.float32)
    lse = torch.logsumexp(torch.stack([x.to(dt) for x in lses]), dim=0)
    top = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    out = None
    for o, x in zip(outs, lses):
        w = torch.exp(x.to(dt) - top)[..., None]
        part = torch.where(w > 0, w * o.to(dt), torch.zeros((), dtype=dt, device=o.device))
        out = part if out is None else out.add_(part)
    return out, lse


def _mask_mod(method: Method, branch: torch.Tensor, i0: torch.Tensor, j0: torch.Tensor):
    """FlexAttention's mask_mod of one branch: the method's rule at absolute positions (i0 + q_idx, j0 + kv_idx).

    Offsets and the branch are 0-d tensors, so their values never enter a compiled graph's guards."""

    def mask_mod(b, h, q_idx, kv_idx):
        return method.rule(q_idx + i0, kv_idx + j0) == branch

    return mask_mod


def block_masks(method: Method, i0: int, j0: int, Lq: int, Lk: int, device) -> list[BlockMask | None]:
    """One sparse BlockMask per branch for queries i0..i0+Lq-1 against keys j0..j0+Lk-1 (None: no pair).

    The rule runs over MASK_PAIRS pairs at a time (O(Lq·Lk) work, O(MASK_PAIRS) memory, no L × L tensor);
    a block is full when every pair in it is the branch's (flex then skips the mask_mod there)."""
    n = len(method.branches())
    nq, nk = -(-Lq // BLOCK), -(-Lk // BLOCK)
    some = torch.zeros(n, nq, nk, dtype=torch.bool, device=device)
    every = torch.zeros_like(some)
    j = torch.arange(j0, j0 + nk * BLOCK, device=device)
    step = max(1, MASK_PAIRS // (nk * BLOCK * BLOCK))  # query blocks per pass
    for a in range(0, nq, step):
        e = min(nq, a + step)
        i = torch.arange(i0 + a * BLOCK, i0 + e * BLOCK, device=device)
        sel = method.rule(i[:, None], j[None, :])
        sel = sel.masked_fill(~((i < i0 + Lq)[:, None] & (j < j0 + Lk)[None, :]), -2)  # padding: no branch's
        sel = sel.view(e - a, BLOCK, nk, BLOCK)
        for b in range(n):
            hit = sel == b
            some[b, a:e], every[b, a:e] = hit.any(3).any(1), hit.all(3).all(1)
    offsets = torch.tensor(i0, device=device), torch.tensor(j0, device=device)
    masks = []
    for b in range(n):
        if not bool(some[b].any()):
            masks.append(None)
            continue
        mod = _mask_mod(method, torch.tensor(b, dtype=torch.int8, device=device), *offsets)
        partial, full = kv_lists(some[b] & ~every[b]), kv_lists(every[b])
        masks.append(BlockMask.from_kv_blocks(*partial, *full, BLOCK_SIZE=BLOCK, mask_mod=mod, seq_lengths=(Lq, Lk)))
    return masks


def _flex_lse(q, k, v, block_mask, scale, gqa):
    """One branch: (out, lse) of FlexAttention over its block mask (lse in natural log, float32)."""
    if AuxRequest is None:  # pragma: no cover - older torch
        return flex_attention(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=gqa, return_lse=True)
    out, aux = flex_attention(
        q, k, v, block_mask=block_mask, scale=scale, enable_gqa=gqa, return_aux=AuxRequest(lse=True)
    )
    return out, aux.lse


_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # method -> {shape key: compiled flex}
_MASKS: dict = {}  # the last block masks: every layer of one forward shares them


def _compiled(method: Method, key: tuple):
    """The compiled flex call of one method and shape, with a code object of its own.

    Dynamo keeps compiled graphs on the code object and stops compiling (falling back to the unfused
    path, which builds every L × L score) after 8 per code object; a private copy per method and shape
    keeps each cache at one graph however many methods and lengths a process runs."""
    per_method = _COMPILED.setdefault(method, {})
    if key not in per_method:
        fn = own_code(_flex_lse)
        backend = "inductor" if key[0] == "cuda" else "eager"
        per_method[key] = torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)
    return per_method[key]


def _masks_for(method: Method, i0: int, j0: int, Lq: int, Lk: int, device) -> list[BlockMask | None]:
    key = (id(method), method.spec, i0, j0, Lq, Lk, str(device))
    if key not in _MASKS:
        _MASKS.clear()  # one sequence at a time: do not hoard masks
        _MASKS[key] = block_masks(method, i0, j0, Lq, Lk, device)
    return _MASKS[key]


def branch_attention(
    method: Method, rotate: Rotate, q, k, v, i: torch.Tensor, j: torch.Tensor, scale: float, *, origin: int = 0
) -> torch.Tensor:
    """softmax over the method's scores, times v, as branches merged by their lse: (B, H, Lq, D) in q's dtype.

    q (B, H, Lq, D) unrotated (query scalings already applied); k, v (B, H_kv, Lk, D) with H_kv dividing H
    (grouped-query attention without copies); i and j consecutive absolute positions.  ``origin`` as in
    :func:`~extrap.extend.attention.extended_attention` (relative branches rotate by positions minus it)."""
    Lq, Lk = q.shape[2], k.shape[2]
    i0, j0 = int(i[0]), int(j[0])
    if i.numel() != Lq or j.numel() != Lk or not (consecutive(i, None) and consecutive(j, None)):
        raise ExtrapError(f"{method.name}: the branch path needs consecutive integer positions, one per query and key")
    if q.shape[1] % k.shape[1]:
        raise ExtrapError(f"{method.name}: {q.shape[1]} query heads are not a multiple of {k.shape[1]} key heads")
    masks = _masks_for(method, i0, j0, Lq, Lk, q.device)
    flex = _compiled(method, (q.device.type, str(q.dtype), tuple(q.shape), tuple(k.shape), tuple(v.shape)))
    outs, lses = [], []
    for br, mask in zip(method.branches(), masks):
        if mask is None:
            continue
        shift = origin if br.relative else 0
        qr, kr = rotate(q, k, br.q(i - shift), br.k(j - shift))
        out, lse = flex(qr, kr, v, mask, float(scale), q.shape[1] != k.shape[1])
        outs.append(out)
        lses.append(lse)
    return merge_lse(outs, lses)[0].to(q.dtype)


def attend(method: Method, rotate: Rotate, q, k, v, i, j, scale: float, *, origin: int = 0, spans: bool = True):
    """The method's attention on the path for q's device: branches merged by lse on CUDA for at least
    BLOCK consecutive queries (a prefill), the blockwise kernel otherwise (the CPU; decoding steps, whose
    growing key count would compile a flex kernel per step).  k, v may have fewer heads than q."""
    if q.is_cuda and q.shape[2] >= BLOCK and consecutive(i, None) and consecutive(j, None):
        return branch_attention(method, rotate, q, k, v, i, j, scale, origin=origin)
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    block = decode_block(q.shape[0] * q.shape[1], q.shape[2], k.shape[2])
    return extended_attention(method, rotate, q, k, v, i, j, scale, origin=origin, spans=spans, block=block)


def decode_block(heads: int, queries: int, keys: int) -> int:
    """The blockwise kernel's block: its default, or for fewer queries than that (a decoding step) every key in
    one block while the scores of all ``heads`` (batch x heads) stay within DECODE_SCORES.  The online softmax's
    Python loop over key blocks would otherwise run keys / 256 small steps per layer and token (512 at 128k),
    launch-bound on a GPU; the queries still form one block, as before."""
    if queries >= BLOCK_KEYS:
        return BLOCK_KEYS
    return max(BLOCK_KEYS, min(keys, DECODE_SCORES // max(1, heads * queries)))


__all__ = ["BLOCK", "attend", "block_masks", "branch_attention", "merge_lse"]
