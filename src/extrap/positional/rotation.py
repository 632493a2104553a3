"""Applying rotary embeddings to tensors: RoPE's rotation and xPos's scaling.

Layout: the NeoX / Hugging Face "rotate-half" convention (see
:mod:`extrap.positional.rotary`).  Angles ``position * θ_i`` are formed in float32
(float64 when the inputs are float64), and cos/sin are cast to the input dtype at
the end, as HF does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extrap.errors import ExtrapError

if TYPE_CHECKING:  # torch is imported where it is used: the registry loads without it
    import torch
    from torch import Tensor


def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1) on the last dimension, split in halves (NeoX/HF layout)."""
    import torch

    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def compute_dtype(x: Tensor) -> torch.dtype:
    """The dtype of the angles for input x: float64 for float64 inputs, else float32 (as HF)."""
    import torch

    return torch.float64 if x.dtype == torch.float64 else torch.float32


def rotary_cos_sin(positions: Tensor, inv_freq: Tensor, attention_factor: float = 1.0) -> tuple[Tensor, Tensor]:
    """cos and sin of the angles m·θ_i, in the rotate-half layout.

    Args:
        positions: (L,) or (B, L), integer or float.
        inv_freq: (D/2,); its dtype is the compute dtype.
        attention_factor: multiplies cos and sin (YaRN), as HF does.

    Returns:
        ``(cos, sin)``, each (L, D) or (B, L, D), in inv_freq's dtype.
    """
    import torch

    freqs = positions.to(device=inv_freq.device, dtype=inv_freq.dtype)[..., None] * inv_freq  # (..., L, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # pair (i, i + D/2) shares θ_i
    return emb.cos() * attention_factor, emb.sin() * attention_factor


def _as_bhld(t: Tensor, x: Tensor) -> Tensor:
    # (L, D) broadcasts against (B, H, L, D) as is; (B, L, D) needs a head axis
    return (t.unsqueeze(1) if t.dim() == 3 else t).to(x.dtype)


def _check_qk(x: Tensor, positions: Tensor, inv_freq: Tensor, what: str = "x") -> None:
    if x.dim() != 4:
        raise ExtrapError(f"rotary: {what} must be (batch, heads, length, head_dim), got shape {tuple(x.shape)}")
    if x.shape[-1] != 2 * inv_freq.shape[-1]:
        raise ExtrapError(f"rotary: head_dim {x.shape[-1]} does not match {inv_freq.shape[-1]} frequencies")
    if positions.shape[-1] != x.shape[2] or positions.dim() not in (1, 2):
        raise ExtrapError(
            f"rotary: positions {tuple(positions.shape)} do not match (L,) or (B, L) "
            f"for {what} of shape {tuple(x.shape)}"
        )


def apply_rotary(x: Tensor, positions: Tensor, inv_freq: Tensor, attention_factor: float = 1.0) -> Tensor:
    """Rotate queries or keys by their positions (Su et al. 2021, Eq. 34, rotate-half layout).

    Args:
        x: (B, H, L, D).
        positions: (L,) or (B, L), integer or float (interpolated positions are fine).
        inv_freq: (D/2,) from :func:`~extrap.positional.rope_scaling.rope_frequencies`.
        attention_factor: multiplies cos and sin (YaRN).

    Returns:
        (B, H, L, D) in x's dtype: ``x·cos(mθ) + rotate_half(x)·sin(mθ)``.
    """
    _check_qk(x, positions, inv_freq)
    cos, sin = rotary_cos_sin(positions, inv_freq.to(compute_dtype(x)), attention_factor)
    cos, sin = _as_bhld(cos, x), _as_bhld(sin, x)
    return x * cos + rotate_half(x) * sin


def xpos_scale(
    positions: Tensor,
    head_dim: int,
    scale_base: float = 512.0,
    gamma: float = 0.4,
    center: Tensor | float = 0.0,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """xPos scaling ζ_i^((m - c)/scale_base) in the rotate-half layout.

    ζ_i = (2i/d + γ)/(1 + γ), i = 0..d/2-1 (Sun et al. 2023, Eq. 11; torchscale:
    ``(arange(0, d, 2) + 0.4 d) / (1.4 d)``).  Returns (L, D) or (B, L, D) for
    positions (L,) or (B, L).  ``dtype`` defaults to float32.
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    zeta = (torch.arange(0, head_dim, 2, dtype=dtype, device=positions.device) / head_dim + gamma) / (1 + gamma)
    power = (positions.to(dtype) - torch.as_tensor(center, dtype=dtype, device=positions.device)) / scale_base
    s = zeta ** power[..., None]  # (..., L, D/2)
    return torch.cat((s, s), dim=-1)


def xpos_center(positions: Tensor) -> Tensor:
    """ceil((max position + 1) / 2): torchscale's centring, so exponents stay in ±L/(2·scale_base).

    A 0-dim tensor (no host sync).  With a KV cache, pass one fixed center for all
    steps instead: scores only stay relative when q and k share the center.
    """
    import torch

    return torch.ceil((positions.max().to(torch.float64) + 1) / 2)


def apply_xpos(
    q: Tensor,
    k: Tensor,
    positions: Tensor,
    inv_freq: Tensor,
    *,
    scale_base: float = 512.0,
    gamma: float = 0.4,
    attention_factor: float = 1.0,
    center: Tensor | float | None = None,
    k_positions: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """xPos (Sun et al. 2023): RoPE plus ζ^(n/scale_base) on queries and ζ^(-n/scale_base) on keys.

    Then q_m·k_n = Σ_i ζ_i^((m-n)/scale_base) (rotated terms): relative, and for
    m > n decaying in m - n because ζ_i < 1 (Sun et al. 2023, Eq. 11-12).

    Args:
        q: (B, H, Lq, D); k: (B, H, Lk, D).
        positions: positions of q, (Lq,) or (B, Lq); k_positions: those of k
            (defaults to ``positions``).
        inv_freq: (D/2,) from :func:`~extrap.positional.rope_scaling.rope_frequencies`.
        center: c in ζ^((n - c)/scale_base).  It cancels in every score, but keeps
            ζ^(±n/scale_base) inside the float range for long sequences; None uses
            :func:`xpos_center` of the key positions (torchscale's choice).

    Returns:
        ``(q', k')`` with the shapes and dtypes of q and k.
    """
    k_positions = positions if k_positions is None else k_positions
    _check_qk(q, positions, inv_freq, "q")
    _check_qk(k, k_positions, inv_freq, "k")
    if center is None:
        center = xpos_center(k_positions)
    cd = compute_dtype(q)
    d = q.shape[-1]
    sq = xpos_scale(positions, d, scale_base, gamma, center, cd)
    sk = 1.0 / xpos_scale(k_positions, d, scale_base, gamma, center, cd)  # keys: ζ^(-n/scale_base)
    q = apply_rotary(q, positions, inv_freq, attention_factor) * _as_bhld(sq, q)
    k = apply_rotary(k, k_positions, inv_freq, attention_factor) * _as_bhld(sk, k)
    return q, k


__all__ = [
    "compute_dtype",
    "rotate_half",
    "rotary_cos_sin",
    "apply_rotary",
    "xpos_scale",
    "xpos_center",
    "apply_xpos",
]
