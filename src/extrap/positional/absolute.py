"""Absolute positional embeddings (APE): sinusoidal, learned, and SHAPE / CAPE augmentation.

* :func:`sinusoidal_embedding` -- the one definition of the sinusoidal embedding
  (Vaswani et al. 2017), on integer *or continuous* positions, so CAPE's shifted
  and scaled positions go through the same function.
* :func:`shape_positions`, :func:`cape_positions` -- training-time position
  augmentations (pure functions of a seeded generator).
* registry schemes ``sinusoidal`` (options ``shape=K`` or ``cape=1,...``) and
  ``learned`` (``max_positions``; the model owns the ``nn.Embedding``).

Layout: the paper's interleaved layout, PE[m, 2i] = sin(m·ω_i), PE[m, 2i+1] = cos(m·ω_i),
ω_i = base^(-2i/d).  Position 0 is therefore [0, 1, 0, 1, ...].
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError
from extrap.positional.base import EmbeddingScheme, Option
from extrap.positional.registry import register

if TYPE_CHECKING:  # torch is imported where it is used: the registry loads without it
    import torch
    from torch import Tensor


# ---------------------------------------------------------------------------
# The embedding
# ---------------------------------------------------------------------------
def sinusoidal_embedding(
    positions: Tensor, dim: int, base: float = 10000.0, dtype: torch.dtype | None = None
) -> Tensor:
    """Sinusoidal position embedding (Vaswani et al. 2017, §3.5).

    Args:
        positions: (..., L), integer or float (continuous positions are allowed).
        dim: d, the (even) embedding dimension.
        base: 10000 in the paper.
        dtype: output dtype; default float64 for float64 positions, else float32.
            Angles are computed in float32 (float64 for float64 positions).

    Returns:
        (..., L, dim) with PE[..., m, 2i] = sin(m ω_i), PE[..., m, 2i+1] = cos(m ω_i),
        ω_i = base^(-2i/d) (Vaswani et al. 2017, Eq. in §3.5).
    """
    if not isinstance(dim, int) or dim < 2 or dim % 2:
        raise ExtrapError(f"sinusoidal embedding needs an even dimension >= 2, got {dim}")
    import torch

    cd = torch.float64 if positions.dtype == torch.float64 else torch.float32
    omega = base ** (-torch.arange(0, dim, 2, dtype=cd, device=positions.device) / dim)  # (d/2,)
    angle = positions.to(cd)[..., None] * omega  # (..., L, d/2)
    # interleave: stack on a new last axis then flatten -> sin, cos, sin, cos, ...
    out = torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(-2)
    return out.to(dtype or cd)


# ---------------------------------------------------------------------------
# Training-time augmentations
# ---------------------------------------------------------------------------
def _base_positions(batch: int, length: int, positions: Tensor | None, device) -> Tensor:
    import torch

    if batch <= 0 or length <= 0:
        raise ExtrapError(f"batch and length must be positive, got batch={batch}, length={length}")
    if positions is None:
        return torch.arange(length, device=device).expand(batch, length)
    if positions.shape[-1] != length:
        raise ExtrapError(f"positions of shape {tuple(positions.shape)} do not have length {length}")
    return positions.to(device).expand(batch, length)


def shape_positions(
    batch: int,
    length: int,
    generator: torch.Generator | None = None,
    *,
    max_shift: int,
    positions: Tensor | None = None,
    device=None,
) -> Tensor:
    """SHAPE (Kiyono et al. 2021, §3): shift every position of a sequence by one k ~ U{0, ..., K}.

    Args:
        batch, length: B and L.
        generator: random source (its device is used unless ``device`` is given).
        max_shift: K >= 0.
        positions: (L,) or (B, L) positions to shift (default arange(L)).

    Returns:
        (B, L) positions + k, one k per sequence; long when the input is integer.
        Evaluation uses k = 0 (the plain positions).
    """
    if max_shift < 0:
        raise ExtrapError(f"SHAPE max shift K must be >= 0, got {max_shift}")
    import torch

    from extrap.devices import sampling_device

    dev = sampling_device(generator, device)
    pos = _base_positions(batch, length, positions, dev)
    k = torch.randint(0, max_shift + 1, (batch, 1), generator=generator, device=dev)  # Kiyono et al. 2021 Eq. 3
    return pos + k.to(pos.dtype)


def cape_positions(
    batch: int,
    length: int,
    generator: torch.Generator | None = None,
    *,
    max_global_shift: float = 0.0,
    max_local_shift: float = 0.0,
    max_global_scale: float = 1.0,
    positions: Tensor | None = None,
    device=None,
) -> Tensor:
    """CAPE (Likhomanenko et al. 2021, §3): x'_m = λ (x_m + Δ + ε_m), as their reference code.

    Per sequence: global shift Δ ~ U[-Δmax, Δmax] and global scaling λ with
    log λ ~ U[-log s, log s]; per token: local shift ε_m ~ U[-εmax, εmax]
    (εmax <= 0.5 keeps the token order).

    Args:
        batch, length: B and L.
        generator: random source (its device is used unless ``device`` is given).
        max_global_shift: Δmax >= 0.  max_local_shift: εmax >= 0.
        max_global_scale: s >= 1 (1 disables scaling).
        positions: (L,) or (B, L) positions to augment (default arange(L)).

    Returns:
        (B, L) float32 positions (float64 if the given positions are float64).
        Evaluation uses the plain positions.
    """
    if max_global_shift < 0 or max_local_shift < 0 or max_global_scale < 1:
        raise ExtrapError("CAPE needs global shift >= 0, local shift >= 0 and global scale >= 1")
    import torch

    from extrap.devices import sampling_device

    dev = sampling_device(generator, device)
    pos = _base_positions(batch, length, positions, dev)
    fd = torch.float64 if pos.dtype == torch.float64 else torch.float32

    def sym_uniform(shape, half_width):  # U[-w, w]
        return (torch.rand(shape, generator=generator, device=dev, dtype=fd) * 2 - 1) * half_width

    delta = sym_uniform((batch, 1), max_global_shift)  # global shift, one per sequence
    eps = sym_uniform((batch, length), max_local_shift)  # local shift, one per token
    log_lambda = sym_uniform((batch, 1), math.log(max_global_scale))  # global scaling
    return (pos.to(fd) + delta + eps) * torch.exp(log_lambda)


# ---------------------------------------------------------------------------
# Learned APE: the model owns the table; this checks its range
# ---------------------------------------------------------------------------
def check_learned_positions(positions: Tensor | int, max_positions: int) -> None:
    """Raise ExtrapError if a learned APE table of ``max_positions`` rows cannot index ``positions``.

    ``positions`` is a tensor of position ids or a sequence length (ids 0..length-1).
    """
    if isinstance(positions, int):
        top, low = positions - 1, 0
    else:
        if positions.numel() == 0:
            return
        if positions.is_floating_point() and not bool((positions == positions.round()).all()):
            raise ExtrapError("learned: absolute embeddings need integer positions (got fractional ones)")
        top, low = int(positions.max()), int(positions.min())
    if low < 0:
        raise ExtrapError(f"learned: position {low} is negative; learned absolute embeddings start at 0")
    if top >= max_positions:
        raise ExtrapError(
            f"learned: position {top} is beyond max_positions={max_positions}; a learned APE cannot "
            "extrapolate (use sinusoidal, rope or a bias scheme, or raise learned:max_positions)"
        )


# ---------------------------------------------------------------------------
# Registry schemes
# ---------------------------------------------------------------------------
class _APE(EmbeddingScheme):
    kind = "ape"

    def eval_positions(self, length: int, device=None) -> Tensor:
        """(L,) long: 0..L-1 (no augmentation at evaluation)."""
        import torch

        return torch.arange(length, device=device)

    def train_positions(
        self,
        batch: int,
        length: int,
        generator: torch.Generator | None = None,
        positions: Tensor | None = None,
        device=None,
    ) -> Tensor:
        """(B, L) training positions: ``positions`` (default 0..L-1, or a sampler's) plus any augmentation."""
        from extrap.devices import sampling_device

        dev = sampling_device(generator, device)
        return _base_positions(batch, length, positions, dev).clone()


@register
class Sinusoidal(_APE):
    """Sinusoidal APE, optionally with SHAPE (``shape=K``) or CAPE (``cape=1``) at training time."""

    name = "sinusoidal"
    summary = "fixed sin/cos absolute embedding added to token embeddings; shape=K or cape=1 augment training"
    reference = "Vaswani et al. 2017; SHAPE: Kiyono et al. 2021; CAPE: Likhomanenko et al. 2021 (survey 002 §3.1)"
    OPTIONS = (
        Option("base", float, 10000.0, "ω_i = base^(-2i/d)", lambda b: b > 1, "must be > 1"),
        Option(
            "shape",
            int,
            0,
            "SHAPE: max shift K, k ~ U{0..K} per training sequence (0: off)",
            lambda k: k >= 0,
            "must be >= 0",
        ),
        Option("cape", bool, False, "CAPE augmentation at training time"),
        Option(
            "cape_global", float, 5.0, "CAPE: max global shift Δmax (extrap default)", lambda x: x >= 0, "must be >= 0"
        ),
        Option(
            "cape_local",
            float,
            0.5,
            "CAPE: max local shift εmax (<= 0.5 keeps token order)",
            lambda x: 0 <= x <= 0.5,
            "must be in [0, 0.5]",
        ),
        Option(
            "cape_scale",
            float,
            1.03,
            "CAPE: max global scaling s, log λ ~ U[-log s, log s] (1: off)",
            lambda x: x >= 1,
            "must be >= 1",
        ),
    )

    def validate(self) -> None:
        o = self.opts
        if o["shape"] and o["cape"]:
            raise ExtrapError("sinusoidal: use either shape=K or cape=1, not both")
        for key in ("cape_global", "cape_local", "cape_scale"):
            if not o["cape"] and o[key] != next(p.default for p in self.OPTIONS if p.name == key):
                raise ExtrapError(f"sinusoidal: option {key} only applies with cape=1")

    def embedding(self, positions: Tensor, dim: int, dtype: torch.dtype | None = None) -> Tensor:
        """(..., L) positions -> (..., L, dim) embedding (:func:`sinusoidal_embedding`)."""
        return sinusoidal_embedding(positions, dim, self.opts["base"], dtype)

    def train_positions(
        self,
        batch: int,
        length: int,
        generator: torch.Generator | None = None,
        positions: Tensor | None = None,
        device=None,
    ) -> Tensor:
        """(B, L) augmented training positions: SHAPE (long), CAPE (float) or plain (long)."""
        o = self.opts
        if o["shape"]:
            return shape_positions(batch, length, generator, max_shift=o["shape"], positions=positions, device=device)
        if o["cape"]:
            return cape_positions(
                batch,
                length,
                generator,
                max_global_shift=o["cape_global"],
                max_local_shift=o["cape_local"],
                max_global_scale=o["cape_scale"],
                positions=positions,
                device=device,
            )
        return super().train_positions(batch, length, generator, positions, device)


@register
class Learned(_APE):
    """Learned APE: the model owns an ``nn.Embedding(max_positions, d_model)``.

    Positions at or beyond ``max_positions`` have no row; the model calls
    :meth:`check_positions` (or :func:`check_learned_positions`) before the lookup
    so that evaluating longer sequences fails with a one-line error.
    """

    name = "learned"
    learned = True  # the model owns the table: training changes it
    summary = "trainable absolute embedding table of max_positions rows; cannot go beyond it"
    reference = "Gehring et al. 2017; Devlin et al. 2019 / Radford et al. 2019 (survey 002 §3.1)"
    OPTIONS = (Option("max_positions", int, 1024, "rows of the embedding table", lambda n: n > 0, "must be > 0"),)

    @property
    def max_positions(self) -> int:
        return self.opts["max_positions"]

    def check_positions(self, positions: Tensor | int) -> None:
        """Raise ExtrapError if ``positions`` (ids or a length) do not fit the table."""
        check_learned_positions(positions, self.max_positions)


__all__ = [
    "sinusoidal_embedding",
    "shape_positions",
    "cape_positions",
    "check_learned_positions",
    "Sinusoidal",
    "Learned",
]
