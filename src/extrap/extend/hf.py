"""An extension method on an hf: Llama-family model (see :mod:`extrap.extend.apply`)."""

from __future__ import annotations

import torch

from extrap.errors import ExtrapError
from extrap.extend.branches import attend
from extrap.extend.methods import Method, scale_queries
from extrap.positional.rotation import apply_rotary

EXTEND_IMPL = "extrap_extend"
HF_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")


def hf_extended_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """An ``AttentionInterface`` function: query (B, H, Lq, D) and key/value (B, H_kv, Lk, D), unrotated
    (the rotary module is the identity while an extension is on); the Lq queries are the last Lq keys
    of a cache that keeps every key.  Returns (B, Lq, H, D) and no weights."""
    method, rot = module._extrap_extend, module._extrap_rotary
    Lq, Lk = query.shape[2], key.shape[2]
    j = torch.arange(Lk, device=query.device)
    i = j[Lk - Lq :]
    pos = kwargs.get("position_ids")
    if pos is not None and not torch.equal(pos[0].to(i.device), i):
        raise ExtrapError(f"{method.name}: hf: models run an extension on positions 0, 1, ... only")
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    af = float(rot.attention_scaling)

    def rotate(qb, kb, qpos, kpos):
        inv = rot.inv_freq
        return apply_rotary(qb, qpos, inv, af), apply_rotary(kb, kpos, inv, af)

    query = scale_queries(method, query, i, Lk)  # the authors' log-length scalings (ReRoPE log=1, ...)
    out = attend(method, rotate, query, key, value, i, j, float(scaling))  # grouped-query keys as they are
    return out.transpose(1, 2).contiguous(), None


def _identity(module, args, out):
    cos, sin = out
    return torch.ones_like(cos), torch.zeros_like(sin)


def extend_hf(model, method: Method) -> None:
    """Run the hf: model with ``method``: unrotated q and k, :func:`hf_extended_attention` for every layer.

    On a model already extended, ``method`` takes the previous one's place (there is no way back to plain).
    """
    from extrap.hf.common import require_transformers
    from extrap.hf.rope_length import rotary_modules

    if model.family not in HF_FAMILIES:
        raise ExtrapError(
            f"{method.name} extends Llama-family RoPE models ({', '.join(HF_FAMILIES)}); got {model.family}"
        )
    if model.extension is not None:  # already unrotated, with this attention: another method takes its place
        for m in model.attn_modules:
            m._extrap_extend = method
        model.extension = method
        return
    rots = rotary_modules(model.hf)
    if len(rots) != 1:
        raise ExtrapError(f"{method.name}: expected one rotary embedding module, found {len(rots)}")
    rot = rots[0][2]
    head_dim = getattr(model.attn_modules[0], "head_dim", None)
    if head_dim is None or 2 * rot.inv_freq.numel() != head_dim:
        raise ExtrapError(f"{method.name}: partial rotary dimensions are not supported")
    if getattr(model.hf.config, "sliding_window", None):
        raise ExtrapError(f"{method.name}: the model's own sliding window is not combined with an extension")
    require_transformers().AttentionInterface.register(EXTEND_IMPL, hf_extended_attention)
    rot.register_forward_hook(_identity)
    for m in model.attn_modules:
        m._extrap_extend = method
        object.__setattr__(m, "_extrap_rotary", rot)  # a reference, not a child module: the model's tree stays its own
    for m in model.hf.modules():
        if hasattr(getattr(m, "config", None), "_attn_implementation"):
            m.config._attn_implementation = EXTEND_IMPL
    model.extension = method
