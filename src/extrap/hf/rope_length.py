"""θ of a length-dependent RoPE on hf: models, fixed once per sequence.

transformers recomputes the frequencies of ``dynamic`` (NTK, emozilla 2023) and ``longrope``
(Ding et al. 2024: the long factors past the original length) in every call of the rotary module,
from that call's largest position, and dynamic keeps the largest length it has seen.  Streamed
through a KV cache, keys cached by one chunk and the queries of a later chunk would be rotated
with different θ.  Here every such module takes θ for one sequence length instead: the one its
model holds (:class:`SequenceLength`, a KV cache's ``seq_len`` while it steps), else the call's
largest position + 1, which is what one pass over the sequence uses.  That makes a pass stateless:
its result does not depend on the calls before it, where transformers' dynamic would keep the θ of
an earlier, longer sequence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

Frequencies = Callable[[int], tuple[torch.Tensor, float]]
"""θ for a sequence length n: ``(inv_freq (D/2,), attention_factor)``."""


class SequenceLength:
    """The length of the sequence a model is running, when a KV cache fixes it (else None)."""

    def __init__(self) -> None:
        self.value: int | None = None

    @contextmanager
    def fixed(self, n: int) -> Iterator[None]:
        """Every rotary call in the block takes θ for length ``n``."""
        previous, self.value = self.value, int(n)
        try:
            yield
        finally:
            self.value = previous


def rotary_modules(hf_model) -> list[tuple[nn.Module, str, nn.Module]]:
    """(parent, attribute, module) of every rotary embedding module."""
    out = []
    for parent in hf_model.modules():
        for name, child in parent.named_children():
            if type(child).__name__.endswith("RotaryEmbedding"):
                out.append((parent, name, child))
    return out


def release(rot: nn.Module) -> None:
    """Remove the hook of :func:`hold_length` from ``rot``, if it has one."""
    handle = getattr(rot, "_extrap_length_hook", None)
    if handle is not None:
        handle.remove()
        rot._extrap_length_hook = None


def hold_length(rot: nn.Module, freqs: Frequencies, length: SequenceLength) -> None:
    """``rot`` takes θ = ``freqs(n)`` for the held sequence length n at every call; transformers' own
    per-call update is switched off (``rope_type`` "default": its wrapper then changes nothing)."""
    release(rot)
    rot.rope_type = "default"

    def pre(module, args, kwargs):
        n = length.value
        if n is None:
            pos = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
            n = int(pos.max()) + 1 if pos is not None and pos.numel() else None
        if n is None:
            return
        inv, af = freqs(n)
        module.inv_freq.copy_(inv.to(module.inv_freq.device))
        module.attention_scaling = float(af)

    rot._extrap_length_hook = rot.register_forward_pre_hook(pre, with_kwargs=True)


def native_type(rot: nn.Module) -> str | None:
    """The transformers rope type that ``rot`` updates per call (dynamic, longrope), else None."""
    kind = getattr(rot, "_extrap_rope_type", getattr(rot, "rope_type", None))
    if not isinstance(kind, str) or not ("dynamic" in kind or kind == "longrope"):
        return None
    return kind


def _original_length(config) -> int:
    """transformers' original length of longrope: rope_parameters', else the config's own field."""
    rp = getattr(config, "rope_parameters", None) or {}
    return int(
        rp.get("original_max_position_embeddings")
        or getattr(config, "original_max_position_embeddings", None)
        or config.max_position_embeddings
    )


def native_frequencies(rot: nn.Module, kind: str) -> Frequencies:
    """transformers' rule for ``kind`` at one sequence length n, without its state.

    dynamic: θ of its init function at n past ``max_position_embeddings``, else the original θ.
    longrope: its long factors when n > the original length, else the short ones (the attention
    factor is the same for both).  Values are transformers' own (its init functions, seq_len a tensor
    as in its update), so a single pass is bit for bit what transformers computes.
    """
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    init = ROPE_INIT_FUNCTIONS[kind]
    short = (rot.original_inv_freq.detach().clone(), float(rot.attention_scaling))
    limit = _original_length(rot.config) if kind == "longrope" else int(rot.original_max_seq_len)
    memo: dict[int, tuple[torch.Tensor, float]] = {}

    def freqs(n: int) -> tuple[torch.Tensor, float]:
        if n <= limit:
            return short
        key = limit + 1 if kind == "longrope" else n  # longrope: one long set for every n past the limit
        if key not in memo:
            device = rot.inv_freq.device
            inv, af = init(rot.config, device, seq_len=torch.tensor(key, device=device))
            memo[key] = (inv, short[1] if kind == "longrope" else float(af))
        return memo[key]

    return freqs


def hold_native(hf_model, length: SequenceLength) -> None:
    """Every rotary module that transformers updates per call takes its θ from ``length`` instead."""
    for _, _, rot in rotary_modules(hf_model):
        kind = native_type(rot)
        if kind is not None:
            rot._extrap_rope_type = kind
            hold_length(rot, native_frequencies(rot, kind), length)


__all__ = [
    "Frequencies",
    "SequenceLength",
    "hold_length",
    "hold_native",
    "native_frequencies",
    "native_type",
    "release",
    "rotary_modules",
]
