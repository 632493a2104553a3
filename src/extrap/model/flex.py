"""FlexAttention with a score_mod generated from each bias scheme's own formula.

The score_mod of scheme S is ``s + S.fn(FLEX, t, {name: value[h]})``, then divided by τ, with
t = max(q_idx - kv_idx, 0) as float32: the one definition of r(t) that the model, the theory engine
and the plots evaluate (:data:`extrap.positional.ops.FLEX` is its backend for one (head, query, key)
entry).  FlexAttention fuses it into its kernel, forward and backward, so no L × L bias and no r(t)
table is read; T5's buckets are computed in the kernel and index its (H, 32) table.  FIRE also reads the
query position: i = q_idx (positions are 0..L-1 here), its MLP unrolled over the hidden units in the
kernel (formula mode only: an r(t) table cannot hold a bias that depends on i).

Two modes per scheme (``mode``): ``formula`` evaluates r(t) in the kernel; ``table`` reads r(t) from the
(H, L) table the blocked kernel uses.  A scheme whose r(t) costs O(d) per (query, key) pair (Sandwich:
d̄/2 cosines) reads its table by default (``BiasRPE.flex_table``), every other one its formula; either
can be forced (``attn_backend`` flex-formula / flex-table) so both can be timed on a GPU.

Compiling: one compiled callable per (scheme spec, mode, dtype, device type, window), cached, each with
its own code object, because torch._dynamo keeps its compiled entries, and its recompile limit (8), per
code object: one model's layers, new parameter values (slopes while training) and new lengths then reuse
it, and several schemes in one process do not share one limit.  The parameters and 1/τ are tensor
arguments, never Python numbers in a fresh closure (each would recompile).
"""

from __future__ import annotations

import functools
import itertools
import types

import torch

from extrap.errors import ExtrapError
from extrap.model.kernel import MASKED
from extrap.positional import ops
from extrap.positional.base import BiasRPE

FORMULA, TABLE = "formula", "table"
MODES = (FORMULA, TABLE)
BLOCK = 128  # FlexAttention's default block size: queries and keys per sparse block

_COMPILED: dict = {}
_BLOCK_MASKS: dict = {}
_CODE_IDS = itertools.count()


def default_mode(scheme: BiasRPE | None) -> str:
    """The documented per-scheme default: the table where r(t) costs O(d) per pair, else the formula."""
    return TABLE if scheme is not None and scheme.flex_table else FORMULA


def formula_ok(scheme: BiasRPE | None) -> bool:
    """Whether flex can compute r: a function of t alone, or one that also reads the query position i
    (FIRE), which FlexAttention's q_idx gives on consecutive positions."""
    return scheme is None or scheme.toeplitz or scheme.flex_query


def table_ok(scheme: BiasRPE | None) -> bool:
    """Whether an r(t) table holds r: not where r also depends on the query position (FIRE)."""
    return scheme is None or scheme.toeplitz


def score_mod(scheme: BiasRPE | None, names: tuple[str, ...], mode: str, params, inv_tau: torch.Tensor):
    """The score_mod (score, b, h, q_idx, kv_idx) -> (score + r(q_idx - kv_idx)) / τ (FIRE: r(t, i = q_idx)).

    ``params``: the tensors named ``names`` ((H, ...) each: the scheme's values in formula mode, the
    (H, T) r(t) table in table mode); ``inv_tau``: 1/τ as a 0-d float32 tensor.  r is computed in
    float32 and clamped at MASKED, as the blocked kernel does (a window's -inf stays finite).
    """

    def mod(s, b, h, q_idx, kv_idx):
        t = (q_idx - kv_idx).clamp_min(0)
        if scheme is None:
            return s * inv_tau
        if mode == TABLE:
            table = params[0]
            r = table[h, t.clamp_max(table.shape[-1] - 1)]
        else:
            p = {n: head_value(x, h) for n, x in zip(names, params)}
            r = scheme.fn(ops.FLEX, t.to(torch.float32), p, q_idx.to(torch.float32))  # i: the blocked path's too
        r = r.clamp_min(MASKED) if torch.is_tensor(r) else max(float(r), MASKED)  # a constant formula: a number
        return (s + r) * inv_tau

    return mod


class HeadRow:
    """Row h of a (H, K) parameter (T5's buckets, TISA's kernels), indexed as one: ``row[i]`` is
    ``param[h, i]``.  FlexAttention's autograd rewrites every index into a score_mod buffer as one op that
    must name all of the buffer's dimensions, so ``param[h]`` then ``[i]`` would not differentiate."""

    def __init__(self, param: torch.Tensor, h):
        self.param, self.h = param, h

    def __getitem__(self, i):
        return self.param[self.h, i]


def head_value(param: torch.Tensor, h):
    """One head's value of a parameter: param[h] for (H,), a :class:`HeadRow` for (H, K)."""
    return param[h] if param.dim() == 1 else HeadRow(param, h)


def compiled_attention(scheme: BiasRPE | None, mode: str, dtype, device_type: str, window: int | None):
    """The cached compiled callable (q, k, v, block_mask, inv_tau, *params) -> out for this key."""
    key = (None if scheme is None else scheme.spec, mode, str(dtype), device_type, window)
    if key not in _COMPILED:
        names = _names(scheme, mode)

        def call(q, k, v, block_mask, inv_tau, *params):
            from torch.nn.attention.flex_attention import flex_attention as flex

            return flex(q, k, v, score_mod=score_mod(scheme, names, mode, params, inv_tau), block_mask=block_mask)

        _COMPILED[key] = torch.compile(own_code(call))
    return _COMPILED[key]


def own_code(fn):
    """A copy of ``fn`` with a code object of its own: torch._dynamo caches compiled entries on the code
    object, so each copy has its own cache and its own recompile limit."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{next(_CODE_IDS)}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


def flex_attention(q, k, v, scheme, values, *, table=None, window=None, tau=1.0, mode=None, compiled=True):
    """softmax(q·kᵀ/(√Dh τ) + r(i - j)/τ) v, causal (and t < window), with FlexAttention (Lq = Lk).

    q, k, v (B, H, L, Dh); ``scheme`` a Toeplitz BiasRPE or None (no bias: the mask only); ``values`` its
    parameter values for this layer ((H, ...) tensors, with grad while training); ``table`` the (H or 1,
    T) r(t) table, needed in table mode only; ``mode`` formula | table | None (the scheme's default);
    ``compiled`` False runs FlexAttention eagerly (its vmap reference, CPU tests).
    """
    mode = default_mode(scheme) if mode is None else mode
    if mode not in MODES:
        raise ExtrapError(f"flex: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not (formula_ok(scheme) and (mode == FORMULA or table_ok(scheme))):
        raise ExtrapError(f"flex: {scheme.spec} depends on the query position, not on t alone: no r(t) table")
    params = _params(scheme, mode, values, table, q)
    inv_tau = _inv_tau(float(tau), q.device)
    block_mask = _block_mask(q.shape[2], window, q.device)
    if compiled:
        fn = compiled_attention(scheme, mode, q.dtype, q.device.type, window)
        return fn(q, k, v, block_mask, inv_tau, *params)
    from torch.nn.attention.flex_attention import flex_attention as flex

    mod = score_mod(scheme, _names(scheme, mode), mode, params, inv_tau)
    return flex(q, k, v, score_mod=mod, block_mask=block_mask)


def _names(scheme, mode) -> tuple[str, ...]:
    if scheme is None:
        return ()
    return ("table",) if mode == TABLE else tuple(p.name for p in scheme.params(1))


def _params(scheme, mode, values, table, q) -> tuple[torch.Tensor, ...]:
    """The score_mod's tensors, float32 on q's device: the table expanded to H rows, or the values."""
    if scheme is None:
        return ()
    if mode == TABLE:
        if table is None:
            raise ExtrapError(f"flex: table mode needs the r(t) table of {scheme.spec}")
        return (table.to(device=q.device, dtype=torch.float32).expand(q.shape[1], -1),)
    return formula_params(scheme, values, q.shape[1], q.device)


def formula_params(scheme: BiasRPE, values, num_heads: int, device) -> tuple[torch.Tensor, ...]:
    """The scheme's values in formula mode, float32, each with ``num_heads`` rows: a parameter shared by the
    heads ((1, ...): FIRE's w1, b1, c, L) is copied to every row, so the score_mod reads row h of each, and
    the fused backward spreads its gradient's atomic adds over the heads as it does a per-head one's."""
    out = []
    for n in _names(scheme, FORMULA):
        x = values[n].to(device=device, dtype=torch.float32)
        out.append(x.expand(num_heads, *x.shape[1:]).contiguous() if x.shape[0] == 1 else x)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _inv_tau(tau: float, device) -> torch.Tensor:
    """1/τ as a 0-d float32 tensor on ``device``, made once (no host-to-device copy per layer and step)."""
    return torch.tensor(1.0 / tau, dtype=torch.float32, device=device)


@functools.cache
def _mask_mod(window: int | None):
    """One mask function per window (a new function object would recompile)."""
    if window is None:
        return lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
    return lambda b, h, q_idx, kv_idx: (q_idx >= kv_idx) & (q_idx - kv_idx < window)


def _block_mask(L: int, window: int | None, device):
    key = (L, window, str(device))
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS.clear()  # one length at a time is the common case; do not hoard masks
        _BLOCK_MASKS[key] = band_block_mask(L, window, device)
    return _BLOCK_MASKS[key]


def band_block_mask(L: int, window: int | None, device, block: int = BLOCK):
    """The BlockMask of the causal band 0 <= q_idx - kv_idx < window (None: no upper end), from block indices.

    create_block_mask evaluates the mask_mod on every (query, key) pair (an L × L bool: 16 GiB at 128k).
    The band's blocks follow from t's range in each (query block m, key block n) instead: t runs over
    [(m - n - 1)·block + 1, (m - n + 1)·block - 1], so a block is full where that range lies inside the band,
    empty where it misses it and partial (the mask_mod decides per entry) otherwise: O((L / block)²) integers.
    """
    from torch.nn.attention.flex_attention import BlockMask

    nb = -(-L // block)
    d = torch.arange(nb, device=device)[:, None] - torch.arange(nb, device=device)[None, :]  # m - n
    t_lo, t_hi = (d - 1) * block + 1, (d + 1) * block - 1
    w = L if window is None else window
    full = (t_lo >= 0) & (t_hi < w)
    seen = (t_hi >= 0) & (t_lo < w) & ~full
    # a block cut by the end of the sequence also holds padded keys: the mask_mod must see it
    ragged = torch.zeros(nb, dtype=torch.bool, device=device)
    ragged[-1] = L % block != 0
    seen |= full & (ragged[:, None] | ragged[None, :])
    full &= ~seen
    return BlockMask.from_kv_blocks(
        *kv_lists(seen), *kv_lists(full), BLOCK_SIZE=block, mask_mod=_mask_mod(window), seq_lengths=(L, L)
    )


def kv_lists(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(num_blocks (1, 1, nq), indices (1, 1, nq, nk)) int32 of an (nq query blocks, nk key blocks) bool grid:
    each row's set key blocks first, in ascending order, as BlockMask.from_kv_blocks takes them."""
    order = torch.argsort((~blocks).to(torch.int8), dim=1, stable=True)
    return blocks.sum(1, dtype=torch.int32)[None, None], order.to(torch.int32)[None, None].contiguous()
