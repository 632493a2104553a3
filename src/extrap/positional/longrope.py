"""LongRoPE's frequencies (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens").

θ_i = 1 / (λ_i · b^(2i/d)) with one searched rescale factor λ_i per pair (their Eq. 3): ``short_factor``
for sequences of at most L = original_max_position tokens, ``long_factor`` for longer ones, so θ is a
property of the whole sequence, chosen once per sequence as for dynamic NTK.  cos and sin are multiplied
by sqrt(1 + ln(s)/ln(L)) for s = factor > 1 (1 otherwise) unless an attention factor is given.  Written
step for step as transformers' ``_compute_longrope_parameters`` (Phi-3's ``rope_scaling``), so float32
values agree bit for bit.

A factor list is written in a spec with ``/`` between the numbers (commas separate options):
``rope:scaling=longrope,factor=32,original_max_position=4096,short_factor=1/1.02/...,long_factor=...``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError

if TYPE_CHECKING:
    import torch
    from torch import Tensor


class FactorList(tuple):
    """A tuple of floats written ``a/b/c`` in a spec (``str`` gives that form back, so specs round-trip)."""

    def __new__(cls, value: str | Iterable[float]) -> FactorList:
        parts = value.split("/") if isinstance(value, str) else list(value)
        try:
            numbers = [float(x) for x in parts]
        except (TypeError, ValueError):
            raise ValueError(f"not a list of numbers a/b/c: {value!r}") from None
        if not all(math.isfinite(x) for x in numbers):
            raise ValueError(f"not a list of finite numbers: {value!r}")
        return super().__new__(cls, numbers)

    def __str__(self) -> str:
        return "/".join(repr(x) for x in self)


def longrope_attention_factor(factor: float, original_max_position: int) -> float:
    """sqrt(1 + ln(s)/ln(L)) for s > 1, else 1 (LongRoPE / Phi-3's scaling of cos and sin, as HF)."""
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(original_max_position))


def longrope_inv_freq(
    head_dim: int,
    base: float,
    factor: float,
    original_max_position: int,
    seq_len: int | float | None,
    short_factor: Iterable[float] | None,
    long_factor: Iterable[float] | None,
    attention_factor: float | None = None,
    device=None,
    dtype: torch.dtype | None = None,
) -> tuple[Tensor, float]:
    """``(inv_freq (head_dim // 2,), attention_factor)``: LongRoPE over ``head_dim`` (module docstring)."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    pairs = head_dim // 2
    for name, factors in (("short_factor", short_factor), ("long_factor", long_factor)):
        if factors is None:
            raise ExtrapError(f"scaling=longrope needs {name}=a/b/c/... ({pairs} numbers, one per rotary pair)")
        if len(tuple(factors)) != pairs:
            raise ExtrapError(
                f"longrope: {name} has {len(tuple(factors))} numbers; "
                f"a rotary dimension of {head_dim} has {pairs} pairs"
            )
    if attention_factor is None:
        attention_factor = longrope_attention_factor(factor, original_max_position)
    long = seq_len is not None and seq_len > original_max_position  # HF: `if seq_len and seq_len > original`
    ext = torch.tensor(tuple(long_factor if long else short_factor), dtype=dtype, device=device)
    shape = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).to(dtype) / head_dim
    return 1.0 / (ext * base**shape), float(attention_factor)  # Ding et al. 2024, Eq. 3: θ_i / λ_i


__all__ = ["FactorList", "longrope_attention_factor", "longrope_inv_freq"]
