"""RoPE at inference on HF models: extrap's own scalings, or transformers' ``rope_parameters``."""

from __future__ import annotations

from torch import nn

from extrap.errors import ExtrapError
from extrap.hf.common import HF_ROPE_KINDS, ROPE_FAMILIES, ROPE_KINDS
from extrap.hf.model import HFModel


def _rotary_modules(hf_model) -> list[tuple[nn.Module, str, nn.Module]]:
    """(parent, attribute, module) of every rotary embedding module."""
    out = []
    for parent in hf_model.modules():
        for name, child in parent.named_children():
            if type(child).__name__.endswith("RotaryEmbedding"):
                out.append((parent, name, child))
    return out


def apply_rope(model: HFModel, rope: str, factor: float | None, original: int) -> dict:
    """Re-scale the model's RoPE: extrap's own ``rope`` kind, or ``hf:<type>`` (HF's implementation)."""
    from extrap.positional.rotary import rope_frequencies

    if model.family not in ROPE_FAMILIES:
        raise ExtrapError(f"RoPE re-scaling needs a RoPE model; {model.family} uses {model.shape.pe}")
    rots = _rotary_modules(model.hf)
    if not rots:
        raise ExtrapError(f"RoPE re-scaling: no rotary embedding module found in {type(model.hf).__name__}")
    factor = 1.0 if factor is None else float(factor)
    if not factor > 0:
        raise ExtrapError(f"RoPE factor must be > 0, got {factor}")
    c = model.hf.config
    rp = dict(getattr(c, "rope_parameters", None) or {})
    base = float(rp.get("rope_theta", getattr(c, "rope_theta", 10000.0)))
    info = {"rope": rope, "factor": factor, "original_max_position": original, "base": base}
    if rope.startswith("hf:"):
        kind = rope[3:]
        if kind not in HF_ROPE_KINDS:
            raise ExtrapError(f"RoPE hf:TYPE: TYPE must be one of {', '.join(HF_ROPE_KINDS)}, got {kind!r}")
        new = {**rp, "rope_type": kind, "factor": factor}
        if kind in ("dynamic", "yarn", "longrope", "llama3"):
            new["original_max_position_embeddings"] = original
        c.rope_parameters = new
        for parent, name, rot in rots:
            setattr(parent, name, type(rot)(config=c).to(rot.inv_freq.device))
        return info
    if rope not in ROPE_KINDS:
        raise ExtrapError(f"RoPE re-scaling must be one of {', '.join(ROPE_KINDS)} or hf:TYPE, got {rope!r}")
    for _, _, rot in rots:
        d = 2 * rot.inv_freq.numel()

        def freqs(seq_len=None, d=d):
            return rope_frequencies(rope, d, base=base, factor=factor, original_max_position=original, seq_len=seq_len)

        inv, af = freqs()
        rot.rope_type = "default"  # HF's dynamic/longrope updates must not overwrite ours
        rot.inv_freq.copy_(inv.to(rot.inv_freq.device))
        rot.original_inv_freq = inv.clone().to(rot.inv_freq.device)
        rot.attention_scaling = float(af)
        if rope == "dynamic":  # stateless: frequencies of the current sequence length, every call

            def pre(module, args, kwargs, freqs=freqs):
                pos = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
                seq = int(pos.max()) + 1 if pos is not None else original
                inv_s, af_s = freqs(seq_len=seq)
                module.inv_freq.copy_(inv_s.to(module.inv_freq.device))
                module.attention_scaling = float(af_s)

            rot.register_forward_pre_hook(pre, with_kwargs=True)
    return info
