"""Reaching into HF attention: implementation switch, windowed attention, BLOOM/MPT pre-hook, softmax tap."""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from extrap.errors import ExtrapError
from extrap.hf.common import WINDOW_CHUNK
from extrap.model.kernel import toeplitz_attention


class StopForward(Exception):
    """Ends a forward pass once what was wanted has been recorded."""


@contextmanager
def attn_implementation(hf_model, name: str | None):
    """Run every config of ``hf_model`` with attention implementation ``name`` in the block (None: as is)."""
    configs = {
        id(m.config): m.config
        for m in hf_model.modules()
        if hasattr(getattr(m, "config", None), "_attn_implementation")
    }
    saved = [(c, c._attn_implementation) for c in configs.values()]
    try:
        if name is not None:
            for c, _ in saved:
                c._attn_implementation = name
        yield
    finally:
        for c, impl in saved:
            c._attn_implementation = impl


def window_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, sliding_window=None, **kwargs
):
    """Causal attention over the ``module._extrap_window`` most recent keys, block by block of queries.

    An ``AttentionInterface`` function: query (B, H, Lq, D), key/value (B, H_kv, Lk, D) with the Lq
    queries the last Lq keys (Lk > Lq when a KV cache holds earlier tokens); returns (B, Lq, H, D)
    and no weights, like HF's eager attention.  transformers builds no mask for an implementation it
    does not know (``attention_mask`` is None): the kernel makes the causal band itself, one strided
    view per block (:func:`extrap.model.kernel.toeplitz_attention` with no bias), so memory is
    O(B·H·WINDOW_CHUNK·(W + WINDOW_CHUNK)).  A config's own ``sliding_window`` (Mistral, Qwen) still applies.
    """
    W = module._extrap_window
    if sliding_window:
        W = min(W, int(sliding_window))
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    rep = query.shape[1] // key.shape[1]  # grouped-query attention: each key/value head serves `rep` heads
    if rep > 1:
        key, value = key.repeat_interleave(rep, 1), value.repeat_interleave(rep, 1)
    dropout = dropout if module.training else 0.0
    out, _ = toeplitz_attention(query, key, value, None, W, scaling, WINDOW_CHUNK, dropout=dropout)
    return out.transpose(1, 2).contiguous(), None


def _band(mask: torch.Tensor, W: int) -> torch.Tensor:
    """``mask`` with every key W or more positions back masked too (BLOOM: additive; MPT: bool, True = masked)."""
    Lq, Lk = mask.shape[-2:]
    q = torch.arange(Lk - Lq, Lk, device=mask.device)[:, None]
    far = torch.arange(Lk, device=mask.device)[None] <= q - W
    return mask | far if mask.dtype == torch.bool else mask.masked_fill(far, torch.finfo(mask.dtype).min)


def eager_attention_pre_hook(module, args, kwargs):
    """BLOOM / MPT attention: MPT's ALiBi ``position_bias`` divided by τ, and the window's band in the mask."""
    tau, W = module._extrap_tau, module._extrap_window
    if tau == 1.0 and W is None:
        return None
    kwargs = dict(kwargs)
    if tau != 1.0 and kwargs.get("position_bias") is not None:  # BLOOM's bias is scaled by `beta` instead
        kwargs["position_bias"] = kwargs["position_bias"] / tau
    if W is not None:
        kwargs["attention_mask"] = _band(kwargs["attention_mask"], W)
    return args, kwargs


_SOFTMAX = (torch.softmax, torch.Tensor.softmax, nn.functional.softmax)


class SoftmaxTap(TorchFunctionMode):
    """Once ``active``, records the input of the next softmax and ends the forward pass (:class:`StopForward`)."""

    def __init__(self):
        super().__init__()
        self.active, self.logits = False, None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.active and func in _SOFTMAX:
            self.logits = args[0].detach()
            raise StopForward
        return func(*args, **(kwargs or {}))


def tap_softmax_input(hf_model, module: nn.Module, forward, L: int, where: str) -> torch.Tensor:
    """The input of the first softmax inside ``module`` while ``forward()`` runs eagerly: (B, H, L, L) float.

    The forward pass stops there (later layers are not run); entries eager attention masked are -inf.
    """
    tap = SoftmaxTap()
    hook = module.register_forward_pre_hook(lambda *_: setattr(tap, "active", True))
    try:
        with attn_implementation(hf_model, "eager"), tap:
            forward()
    except StopForward:
        pass
    finally:
        hook.remove()
    s = tap.logits
    if s is None or s.dim() != 4 or s.shape[-2:] != (L, L):
        raise ExtrapError(f"not supported: no (L, L) attention logits found in {where}")
    return s.float().masked_fill(s <= torch.finfo(s.dtype).min / 2, -math.inf)
