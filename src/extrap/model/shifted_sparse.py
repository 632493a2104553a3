"""LongLoRA's shifted sparse attention, S²-Attn (Chen et al., ICLR 2024, §3.2 and Fig. 2): a training-only attention.

During training the sequence of N tokens is cut into groups of G = ratio × N tokens (the authors' default ratio
1/4) and every token attends causally only within its group.  Half of the heads (the second half) see the groups
shifted by G/2 tokens: their q, k and v are rolled by −G/2 along the sequence before grouping (after RoPE, so each
token keeps its own rotation) and their output is rolled back by +G/2, so information flows between neighbouring
groups.  As in the authors' code the roll wraps: the first G/2 tokens of the shifted half form the last group
together with the last G/2 tokens.  At inference the model runs full attention (``model.eval()``): the weights
are those of an ordinary model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from extrap.errors import ExtrapError

FULL = "full"
DEFAULT_RATIO = 0.25  # LongLoRA: group size = 1/4 of the training length


def s2_ratio(spec: str) -> float | None:
    """The group ratio of an attention spec: ``full`` -> None, ``s2`` -> 1/4, ``s2:ratio=R`` -> R in (0, 1]."""
    name, _, opts = str(spec).partition(":")
    if name == FULL and not opts:
        return None
    if name != "s2":
        raise ExtrapError(f"model: attention must be full or s2[:ratio=R] (LongLoRA's S²-Attn), got {spec!r}")
    if not opts:
        return DEFAULT_RATIO
    key, _, value = opts.partition("=")
    try:
        ratio = float(value) if key == "ratio" else None
    except ValueError:
        ratio = None
    if ratio is None or not 0 < ratio <= 1:
        raise ExtrapError(f"model: attention s2 takes ratio=R with 0 < R <= 1 (the group's share of L), got {spec!r}")
    return ratio


def group_size(length: int, ratio: float) -> int:
    """G = ratio × L; G must be even (the shift is G/2) and divide L, as LongLoRA asserts."""
    G = int(round(length * ratio))
    if G < 2 or G % 2 or length % G:
        raise ExtrapError(f"S²-Attn: group size {G} (ratio {ratio} of L = {length}) must be even and divide L")
    return G


Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def shifted_sparse_attention(q, k, v, group: int, attend: Attend) -> torch.Tensor:
    """q, k, v (B, H, N, Dh) -> out (B, H, N, Dh): causal attention within groups of ``group`` tokens, heads
    H/2.. shifted by group/2.  ``attend(q, k, v)`` is the model's causal attention on (B', H, group, Dh)."""
    B, H, N, D = q.shape
    half, shift = H // 2, group // 2

    def grouped(t):  # (B, H, N, D) -> (B * N/G, H, G, D), the second half of the heads rolled by -G/2
        t = torch.cat([t[:, :half], t[:, half:].roll(-shift, dims=2)], dim=1)
        return t.reshape(B, H, N // group, group, D).transpose(1, 2).reshape(-1, H, group, D)

    out = attend(grouped(q), grouped(k), grouped(v))
    out = out.reshape(B, N // group, H, group, D).transpose(1, 2).reshape(B, H, N, D)
    return torch.cat([out[:, :half], out[:, half:].roll(shift, dims=2)], dim=1)
