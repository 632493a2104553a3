"""Rotary position embeddings (RoPE, xPos) and RoPE's interpolation methods.

One definition each, used by the model, the plots and the analysis:

* :func:`rope_frequencies` (defined in :mod:`extrap.positional.rope_scaling`) -- the
  rotary frequencies ``inv_freq`` (θ_i) for plain RoPE and every interpolation (PI,
  NTK-aware, dynamic NTK, NTK-by-parts, YaRN, truncated basis, Llama 3.1), plus the
  attention factor that multiplies cos and sin.
* :func:`apply_rotary` -- rotate a query or key tensor by its positions, and
  :func:`apply_xpos` -- xPos: RoPE plus the per-dimension exponential scaling
  (both defined in :mod:`extrap.positional.rotation`).
* the registry schemes ``rope`` and ``xpos``, whose :meth:`Rotary.rotate` the
  model calls with ``(q, k, positions)``; :meth:`Rotary.rescaled` is the same scheme
  with an interpolation chosen at inference (``--rope KIND --factor F``).

Layout: the NeoX / Hugging Face "rotate-half" convention.  Dimension ``i`` of the
first half of a head is paired with dimension ``i + D/2`` and both rotate with
frequency θ_i = inv_freq[i].  The paper's interleaved pairs (2i, 2i+1) give the same
attention scores up to a fixed permutation of the head dimensions, which the
learned projections absorb; rotate-half makes HF parity exact (tests/test_rotary.py).

Numerics follow HF: inv_freq is computed in float32 with HF's own expressions (so
linear / dynamic / YaRN / llama3 agree with ``transformers.modeling_rope_utils`` bit
for bit), angles ``position * θ_i`` are formed in float32 (float64 when the inputs are
float64), and cos/sin are cast to the input dtype at the end.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from extrap.errors import ExtrapError
from extrap.positional.base import EmbeddingScheme, Option
from extrap.positional.registry import register
from extrap.positional.rope_scaling import (
    LENGTH_DEPENDENT,
    SCALINGS,
    check_llama3,
    default_inv_freq,
    rope_frequencies,
)
from extrap.positional.rope_variants import p_rope, resonance, rotary_dim, with_identity_pairs
from extrap.positional.rotary_options import NEEDS_ORIGINAL, ONLY_FOR, ROPE_OPTIONS
from extrap.positional.rotation import (
    apply_rotary,
    apply_xpos,
    compute_dtype,
    rotary_cos_sin,
    rotate_half,
    xpos_center,
    xpos_scale,
)

if TYPE_CHECKING:  # torch is imported where it is used: the registry loads without it
    import torch
    from torch import Tensor

# The options passed on to rope_frequencies as they are (partial, p and resonance act on its result).
_SCALING_OPTIONS = (
    "base", "factor", "beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate", "alpha",
    "beta", "trunc_wavelength", "trunc_a", "trunc_rho", "low_freq_factor", "high_freq_factor", "short_factor",
    "long_factor",
)  # fmt: skip


# ---------------------------------------------------------------------------
# Registry schemes
# ---------------------------------------------------------------------------
def _pos(x) -> bool:
    return x is None or x > 0


@register
class Rotary(EmbeddingScheme):
    """RoPE, optionally with an interpolation method (``scaling=...``) and the variants ``partial=``
    (partial rotary), ``p=`` (p-RoPE) and ``resonance=1`` (:mod:`extrap.positional.rope_variants`).

    The model calls :meth:`rotate` on each layer's queries and keys.  Frequencies come from
    :func:`rope_frequencies`, cached per (head_dim, length, device, dtype); the length only matters
    for a length-dependent scaling (``dynamic``) and is the whole sequence's: ``seq_len`` (a KV
    cache's), else the call's largest position + 1, the same for one pass over the sequence.
    """

    name = "rope"
    kind = "rotary"
    summary = (
        "rotary position embedding; scaling= PI, NTK, dynamic NTK, NTK-by-parts, YaRN, truncated basis, Llama 3.1, "
        "LongRoPE; partial rotary, p-RoPE, Resonance RoPE"
    )
    reference = (
        "Su et al. 2021 (RoFormer); PI: Chen et al. 2023; NTK/NTK-by-parts: bloc97 2023; dynamic: "
        "emozilla 2023; YaRN: Peng et al. 2023; truncated basis: Pal et al. 2023 (survey 002 §3.2.1, §4.1); "
        "llama3: Meta's Llama 3.1 frequency scaling; longrope: Ding et al. 2024 (LongRoPE); partial: GPT-NeoX "
        "rotary_pct (Black et al. 2022); p: Barbero et al. 2025 (p-RoPE); resonance: Wang et al. 2024 (Resonance RoPE)"
    )
    OPTIONS = ROPE_OPTIONS
    _CACHE_SIZE = 64

    def validate(self) -> None:
        o = self.opts
        defaults = {opt.name: opt.default for opt in self.OPTIONS}
        for key, allowed in ONLY_FOR.items():
            if o[key] != defaults[key] and o["scaling"] not in allowed:
                raise ExtrapError(
                    f"{self.name}: option {key} only applies to scaling="
                    f"{'|'.join(allowed)} (got scaling={o['scaling']})"
                )
        if o["scaling"] in NEEDS_ORIGINAL and o["original_max_position"] is None:
            raise ExtrapError(f"{self.name}: scaling={o['scaling']} needs original_max_position=<training length>")
        if o["scaling"] == "truncated" and o["original_max_position"] is None and o["trunc_wavelength"] is None:
            raise ExtrapError(
                f"{self.name}: scaling=truncated needs original_max_position=<training length> or trunc_wavelength=..."
            )
        if o["scaling"] == "ntk-by-parts" and not o["alpha"] < o["beta"]:
            raise ExtrapError(f"{self.name}: ntk-by-parts needs alpha < beta")
        if o["scaling"] == "llama3":
            check_llama3(o["low_freq_factor"], o["high_freq_factor"])
        if o["scaling"] == "longrope" and (o["short_factor"] is None or o["long_factor"] is None):
            raise ExtrapError(f"{self.name}: scaling=longrope needs short_factor=a/b/... and long_factor=a/b/...")
        self._cache: dict[tuple, tuple[Tensor, float]] = {}

    def with_train_length(self, length: int) -> Rotary:
        """This scheme with original_max_position = length unless the spec already set it."""
        if self.opts["original_max_position"] is not None:
            return self
        opts = {k: v for k, v in self.opts.items() if v is not None}
        opts["original_max_position"] = int(length)
        return type(self)(**opts)

    def rescaled(self, scaling: str, factor: float, original_max_position: int, options: dict | None = None) -> Rotary:
        """This scheme read with an interpolation at inference: its base (and xPos decay) kept, θ from ``scaling``.

        ``original_max_position`` is L (a run's training length); ``options`` are the
        scaling's own options (``beta_fast``, ``low_freq_factor``, ..., or
        ``original_max_position`` to override L), as values or spec strings.
        """
        if scaling not in SCALINGS or scaling == "none":
            kinds = ", ".join(s for s in SCALINGS if s != "none")
            raise ExtrapError(f"RoPE scaling must be one of {kinds}, got {scaling!r}")
        if self.opts["scaling"] != "none":
            raise ExtrapError(
                f"{self.spec} already interpolates (scaling={self.opts['scaling']}); it is not rescaled twice"
            )
        allowed = sorted(k for k, kinds in ONLY_FOR.items() if scaling in kinds and k != "factor")
        unknown = sorted(set(options or {}) - {*allowed, "original_max_position"})
        if unknown:
            raise ExtrapError(
                f"RoPE scaling {scaling}: {', '.join(unknown)} is not one of its options "
                f"({', '.join([*allowed, 'original_max_position'])}; the factor is given apart)"
            )
        opts = {k: v for k, v in self.opts.items() if v is not None}
        opts.update(scaling=scaling, factor=factor, original_max_position=original_max_position)
        opts.update(options or {})  # original_max_position among them overrides L
        return type(self)(**opts)

    @property
    def length_dependent(self) -> bool:
        """θ depends on the sequence length (dynamic NTK): it must be fixed once per sequence."""
        return self.opts["scaling"] in LENGTH_DEPENDENT

    # ---- frequencies -----------------------------------------------------------
    def frequencies(
        self, head_dim: int, seq_len: int | None = None, device=None, dtype: torch.dtype | None = None
    ) -> tuple[Tensor, float]:
        """``(inv_freq (head_dim // 2,), attention_factor)``: the effective θ of every pair (cached; float32 default).

        The scaling over the rotary dimension r = int(partial·head_dim), then p-RoPE, then Resonance;
        the (head_dim - r)/2 pairs that do not rotate come last with θ = 0 (:mod:`~extrap.positional.rope_variants`).
        """
        import torch

        dtype = torch.float32 if dtype is None else dtype
        o = self.opts
        original = o["original_max_position"] or 2048  # unused by the scalings that may omit it
        if self.length_dependent:
            seq_len = max(int(seq_len), original) if seq_len is not None else original  # <= L: same θ
        else:
            seq_len = None
        key = (head_dim, seq_len, str(torch.device(device)) if device is not None else "cpu", dtype)
        hit = self._cache.get(key)
        if hit is None:
            r = rotary_dim(head_dim, o["partial"]) if head_dim % 2 == 0 else head_dim  # odd: rope_frequencies says
            inv, af = rope_frequencies(
                o["scaling"], r, original_max_position=original, seq_len=seq_len, device=device, dtype=dtype,
                **{k: o[k] for k in _SCALING_OPTIONS},
            )  # fmt: skip
            if o["p"] < 1:
                inv = p_rope(inv, o["p"])
            if o["resonance"]:
                inv = resonance(inv)
            hit = (with_identity_pairs(inv, head_dim), af)
            if len(self._cache) >= self._CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = hit
        return hit

    def _on_rotary_part(self, q: Tensor, k: Tensor, inv_freq: Tensor, rotate) -> tuple[Tensor, Tensor]:
        """``rotate(q, k, θ)`` on the first r dimensions of q and k; the other D - r pass through (HF's partial)."""
        if self.opts["partial"] == 1:
            return rotate(q, k, inv_freq)
        import torch

        r = rotary_dim(q.shape[-1], self.opts["partial"])
        q_rot, k_rot = rotate(q[..., :r], k[..., :r], inv_freq[: r // 2])
        return torch.cat([q_rot, q[..., r:]], dim=-1), torch.cat([k_rot, k[..., r:]], dim=-1)

    def _freqs_for(
        self, q: Tensor, positions: Tensor, k_positions: Tensor | None, seq_len: int | None
    ) -> tuple[Tensor, float]:
        if self.length_dependent and seq_len is None:
            import torch

            # emozilla: the sequence length is max position + 1 (as HF); one host sync
            top = positions.max() if k_positions is None else torch.maximum(positions.max(), k_positions.max())
            seq_len = int(math.ceil(float(top))) + 1
        return self.frequencies(q.shape[-1], seq_len, q.device, compute_dtype(q))

    # ---- what the model calls -----------------------------------------------------
    def rotate(
        self,
        q: Tensor,
        k: Tensor,
        positions: Tensor,
        k_positions: Tensor | None = None,
        seq_len: int | None = None,
        **kw: Any,
    ) -> tuple[Tensor, Tensor]:
        """Rotate queries and keys.

        Args:
            q: (B, H, Lq, D); k: (B, H, Lk, D).
            positions: (Lq,) or (B, Lq), long or float; k_positions: the keys'
                positions when they differ (KV cache), else ``positions``.
            seq_len: the length of the whole sequence these positions belong to, which
                fixes a length-dependent θ (a stream gives it for every chunk); None:
                the largest position + 1 here.

        Returns:
            ``(q', k')``, same shapes and dtypes.
        """
        if kw:
            raise TypeError(f"{self.name}.rotate got unexpected arguments {sorted(kw)}")
        inv_freq, af = self._freqs_for(q, positions, k_positions, seq_len)
        kpos = positions if k_positions is None else k_positions
        return self._on_rotary_part(
            q, k, inv_freq, lambda q, k, inv: (apply_rotary(q, positions, inv, af), apply_rotary(k, kpos, inv, af))
        )


@register
class XPos(Rotary):
    """xPos: RoPE with exponential decay ζ_i^((m-n)/scale_base) (Sun et al. 2023).

    Accepts every ``rope`` option (the interpolation, p-RoPE and Resonance only change θ; the decay
    uses the raw positions).  With ``partial`` < 1, xPos (rotation and ζ over r dimensions) acts on the
    rotary part only.
    """

    name = "xpos"
    kind = "rotary"
    summary = "RoPE times ζ_i^((m-n)/scale_base), ζ_i = (2i/d + γ)/(1 + γ): relative and decaying"
    reference = "Sun et al. 2023 (A Length-Extrapolatable Transformer, xPos); survey 002 Eq. 15"
    OPTIONS = Rotary.OPTIONS + (
        Option("scale_base", float, 512.0, "distance over which ζ_i is applied once", _pos, "must be > 0"),
        Option("gamma", float, 0.4, "γ in ζ_i = (2i/d + γ)/(1 + γ)", lambda g: g >= 0, "must be >= 0"),
    )

    def rotate(
        self,
        q: Tensor,
        k: Tensor,
        positions: Tensor,
        k_positions: Tensor | None = None,
        seq_len: int | None = None,
        center: Tensor | float | None = None,
    ) -> tuple[Tensor, Tensor]:
        """As :meth:`Rotary.rotate`, plus the xPos scaling; ``center``: see :func:`apply_xpos`.

        With ``seq_len`` and no ``center`` the center is ceil(seq_len / 2), the one a single pass
        over positions 0..seq_len-1 takes: every chunk of a stream then shares it, so the cached
        keys and the later queries stay relative.
        """
        if center is None and seq_len is not None:
            center = float(math.ceil(seq_len / 2))
        inv_freq, af = self._freqs_for(q, positions, k_positions, seq_len)
        o = self.opts

        def rotate(q, k, inv):  # ζ over the rotary part: the passed-through dimensions are neither rotated nor scaled
            return apply_xpos(
                q, k, positions, inv, scale_base=o["scale_base"], gamma=o["gamma"], attention_factor=af,
                center=center, k_positions=k_positions,
            )  # fmt: skip

        return self._on_rotary_part(q, k, inv_freq, rotate)


__all__ = [
    "SCALINGS",
    "default_inv_freq",
    "rope_frequencies",
    "rotate_half",
    "rotary_cos_sin",
    "apply_rotary",
    "xpos_scale",
    "xpos_center",
    "apply_xpos",
    "Rotary",
    "XPos",
]
