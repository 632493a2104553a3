"""RoPE frequencies θ_i for plain RoPE and each of its interpolation methods.

:func:`rope_frequencies` returns ``(inv_freq, attention_factor)`` for one method
(``kind``), with d the rotary head dimension, b the base, s the factor and L the
original training length:

* ``none``: θ_i = b^(-2i/d) (Su et al. 2021).
* ``linear``: θ_i / s -- position interpolation, m -> m/s (Chen et al. 2023, Eq. 4).
* ``ntk``: base b·s^(d/(d-2)) (bloc97 2023, NTK-aware; survey Eq. 22).
* ``dynamic``: NTK with s' = s·n/L - (s-1), n = max(seq_len, L) (emozilla 2023);
  exactly HF's ``_compute_dynamic_ntk_parameters`` (unchanged for n <= L).
* ``ntk-by-parts``: h(θ_i) = (1-γ(r_i)) θ_i/s + γ(r_i) θ_i with r_i = L/λ_i,
  λ_i = 2π/θ_i, γ(r) = clamp((r-α)/(β-α), 0, 1) (bloc97; YaRN paper Eq. 17-18).
  The ramp is linear in r, as the paper defines it.
* ``yarn``: HF's ``_compute_yarn_parameters`` exactly: the NTK-by-parts blend
  with the ramp linear in the dimension index between the dimensions where
  the number of rotations over L is beta_fast and beta_slow, plus the
  attention factor 0.1 ln(s) + 1 (Peng et al. 2023, Eq. 20-22).
* ``truncated``: truncated basis (Pal et al. 2023, Giraffe §4.3; survey Eq. 24):
  θ_i kept where θ_i >= b, set to ρ where a <= θ_i < b, and 0 where θ_i < a.
  So rotations with wavelength < trunc_wavelength are untouched, slower ones
  become one fixed slow rotation ρ or none at all.  A factor != 1 first
  divides θ by s, as Giraffe's code does.
* ``llama3``: Llama 3.1's frequency scaling (Meta's Llama 3.1 release; the rule of
  transformers' ``_compute_llama3_parameters``), in wavelengths λ_i = 2π/θ_i:
  λ_i > L/low_freq_factor -> θ_i/s, λ_i < L/high_freq_factor -> θ_i unchanged, and in
  between the blend (1-γ) θ_i/s + γ θ_i with γ = (L/λ_i - low)/(high - low).
  Llama 3.1 used s = 8, low = 1, high = 4, L = 8192.
* ``longrope``: LongRoPE (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million
  Tokens", Eq. 3; Phi-3's rope_scaling): θ_i / λ_i with searched per-pair factors λ, ``short_factor``
  for sequences of at most L tokens and ``long_factor`` beyond (so θ depends on the sequence length),
  and cos/sin multiplied by sqrt(1 + ln(s)/ln(L)) unless an attention factor is given; exactly
  transformers' ``_compute_longrope_parameters``.

inv_freq is computed in float32 with HF's own expressions, so linear / dynamic /
YaRN / llama3 agree with ``transformers.modeling_rope_utils`` bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError
from extrap.positional.longrope import FactorList, longrope_inv_freq

if TYPE_CHECKING:  # torch is imported where it is used: the registry loads without it
    import torch
    from torch import Tensor

SCALINGS = ("none", "linear", "ntk", "dynamic", "ntk-by-parts", "yarn", "truncated", "llama3", "longrope")
"""Values of the ``scaling`` option, i.e. the ``kind`` of :func:`rope_frequencies`."""

LENGTH_DEPENDENT = ("dynamic", "longrope")
"""Scalings whose θ depends on the length of the sequence (``seq_len``): a property of the whole sequence,
fixed once for it, so that a stream through a KV cache rotates every query and key as one pass does."""


@dataclass(frozen=True)
class RopeRequest:
    """A RoPE re-scaling asked for at inference (``--rope TEXT --factor F``).

    ``TEXT`` is ``KIND[:key=value,...]``, one of extrap's scalings with that scaling's
    options (``llama3:low_freq_factor=1,high_freq_factor=4``), or ``hf:TYPE[:key=value,...]``,
    transformers' own implementation with its ``rope_parameters`` keys (hf: models only).
    The factor is given on its own (default 1; ``factor_given`` False when it was not given, so that an
    hf: type can take the model's own factor).  Option values stay strings here: the registry (extrap's
    kinds) or the HF adapter (hf: types) converts and checks them.
    """

    kind: str
    factor: float = 1.0
    options: dict[str, str] = field(default_factory=dict)
    hf: bool = False
    factor_given: bool = True

    @property
    def name(self) -> str:
        return ("hf:" if self.hf else "") + self.kind

    @classmethod
    def parse(cls, text: str, factor: float | None = None) -> RopeRequest:
        """``KIND[:key=value,...]`` or ``hf:TYPE[:key=value,...]`` with its factor; ExtrapError in one line."""
        text = str(text).strip()
        hf = text.startswith("hf:")
        kind, _, rest = (text[3:] if hf else text).partition(":")
        kind = kind.strip()
        if not kind:
            raise ExtrapError(
                f"RoPE scaling {text!r} names no kind: give KIND[:key=value,...] or hf:TYPE[:key=value,...]"
            )
        options: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = (s.strip() for s in part.partition("="))
            if not eq or not key.isidentifier() or not value:
                raise ExtrapError(f"RoPE scaling {text!r}: option {part!r} must be written key=value")
            if key in options:
                raise ExtrapError(f"RoPE scaling {text!r}: option {key} is given twice")
            options[key] = value
        if "factor" in options:
            raise ExtrapError(f"RoPE scaling {text!r}: the factor is given on its own (--factor F), not as an option")
        given = factor is not None
        factor = float(factor) if given else 1.0
        if not (factor > 0 and math.isfinite(factor)):
            raise ExtrapError(f"RoPE factor must be a positive number, got {factor}")
        return cls(kind=kind, factor=factor, options=options, hf=hf, factor_given=given)


def _check(kind: str, head_dim: int, factor: float, original_max_position: int) -> None:
    if kind not in SCALINGS:
        raise ExtrapError(f"unknown RoPE scaling '{kind}' (choose from {', '.join(SCALINGS)})")
    if not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2:
        raise ExtrapError(f"rotary embeddings need an even head dimension >= 2, got {head_dim}")
    if kind in ("ntk", "dynamic") and head_dim == 2:
        raise ExtrapError(f"scaling={kind} needs head dimension > 2 (its exponent is d/(d-2))")
    if not factor > 0:
        raise ExtrapError(f"RoPE scaling factor must be > 0, got {factor}")
    if not original_max_position or original_max_position <= 0:
        raise ExtrapError(f"original_max_position must be a positive length, got {original_max_position}")


def check_llama3(low_freq_factor: float, high_freq_factor: float) -> None:
    """Llama 3.1's bounds: 0 < low_freq_factor < high_freq_factor (else the blend divides by zero)."""
    if not 0 < low_freq_factor < high_freq_factor:
        raise ExtrapError(
            f"llama3 needs 0 < low_freq_factor < high_freq_factor, got {low_freq_factor} and {high_freq_factor}"
        )


def default_inv_freq(head_dim: int, base: float = 10000.0, *, device=None, dtype: torch.dtype | None = None) -> Tensor:
    """Plain RoPE frequencies θ_i = base^(-2i/d), i = 0..d/2-1.  Returns (head_dim // 2,).

    Su et al. 2021, Eq. 15 (θ_i = 10000^(-2(i-1)/d), 1-based); written as HF writes
    it so the float32 values are identical.  ``dtype`` defaults to float32.
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    exponent = torch.arange(0, head_dim, 2, dtype=torch.int64).to(device=device, dtype=dtype) / head_dim
    return 1.0 / (base**exponent)


def rope_frequencies(
    kind: str,
    head_dim: int,
    base: float = 10000.0,
    factor: float = 1.0,
    original_max_position: int = 2048,
    seq_len: int | float | None = None,
    *,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    attention_factor: float | None = None,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
    truncate: bool = True,
    alpha: float = 1.0,
    beta: float = 32.0,
    trunc_wavelength: float | None = None,
    trunc_a: float = 1 / 8,
    trunc_rho: float = 1 / 16,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    short_factor: tuple[float, ...] | None = None,
    long_factor: tuple[float, ...] | None = None,
    device=None,
    dtype: torch.dtype | None = None,
) -> tuple[Tensor, float]:
    """RoPE frequencies for one interpolation method (the methods: see the module docstring).

    Args:
        kind: one of :data:`SCALINGS`; head_dim: d, the (even) rotary dimension of one head.
        base: RoPE base b (rope_theta); factor: s = target length / original length (ignored by ``none``).
        original_max_position: L, the training length; seq_len: the sequence's (dynamic, longrope; None: L).
        beta_fast, beta_slow: YaRN's ramp bounds, in rotations over L (HF defaults 32, 1).
        attention_factor: YaRN's or LongRoPE's cos/sin multiplier; None derives it from ``factor``
            (and ``mscale``/``mscale_all_dim`` when both are given), as HF does.
        truncate: YaRN: floor/ceil the ramp's bounds (HF: True); alpha, beta: NTK-by-parts ramp on r = L/λ_i (1, 32).
        trunc_wavelength, trunc_a, trunc_rho: truncated basis: b = 2π / trunc_wavelength (None: L), a = trunc_a·b,
            ρ = trunc_rho·b (Giraffe's code: b/8, b/16).
        low_freq_factor, high_freq_factor: llama3: λ above L/low divided by s, below L/high kept (1 and 4).
        short_factor, long_factor: longrope: per-pair divisors for sequences <= L and > L.
        dtype: float32 (HF-identical; the default, None) or float64.

    Returns:
        ``(inv_freq (head_dim // 2,), attention_factor)``; cos and sin are multiplied by the
        attention factor (1.0 except for YaRN and LongRoPE).
    """
    _check(kind, head_dim, factor, original_max_position)
    d, L = head_dim, original_max_position
    if kind == "yarn":
        return _yarn(
            d, base, factor, L, beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim, truncate, device, dtype
        )
    if kind == "longrope":
        return longrope_inv_freq(
            d, base, factor, L, seq_len, short_factor, long_factor, attention_factor, device, dtype
        )
    theta = default_inv_freq(d, _ntk_base(kind, d, base, factor, L, seq_len), device=device, dtype=dtype)
    if kind == "llama3":
        return llama3_inv_freq(theta, factor, L, low_freq_factor, high_freq_factor), 1.0
    return _interpolate(kind, theta, factor, L, alpha, beta, trunc_wavelength, trunc_a, trunc_rho), 1.0


def _ntk_base(kind: str, d: int, base: float, factor: float, L: int, seq_len: int | float | None) -> float:
    """The base of θ_i: raised by the NTK-aware methods, b itself for the others."""
    if kind == "ntk":
        # bloc97 2023b; survey Eq. 22: θ*_i = (b · s^(d/(d-2)))^(-2i/d)
        return base * factor ** (d / (d - 2))
    if kind == "dynamic":
        # emozilla 2023; survey Eq. 23.  Written exactly as HF: n = max(seq_len, L)
        n = L if seq_len is None else max(seq_len, L)
        return base * ((factor * n / L) - (factor - 1)) ** (d / (d - 2))
    return base


def _interpolate(
    kind: str,
    theta: Tensor,
    factor: float,
    L: int,
    alpha: float,
    beta: float,
    trunc_wavelength: float | None,
    trunc_a: float,
    trunc_rho: float,
) -> Tensor:
    """θ_i rescaled by linear, ntk-by-parts or truncated; the other methods keep θ_i as given."""
    if kind == "linear":
        # Chen et al. 2023 Eq. 4: f'(x, m) = f(x, m L / L'); scaling θ by 1/s is the same
        return theta / factor
    if kind == "ntk-by-parts":
        return _ntk_by_parts(theta, factor, L, alpha, beta)
    if kind == "truncated":
        return _truncated(theta, factor, L, trunc_wavelength, trunc_a, trunc_rho)
    return theta


def _ntk_by_parts(theta: Tensor, factor: float, L: int, alpha: float, beta: float) -> Tensor:
    if not alpha < beta:
        raise ExtrapError(f"ntk-by-parts needs alpha < beta, got alpha={alpha}, beta={beta}")
    r = L * theta / (2 * math.pi)  # r_i = L / λ_i: rotations of dimension i over L (YaRN Eq. 16)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0, 1)  # YaRN Eq. 17
    return (1 - gamma) * theta / factor + gamma * theta  # YaRN Eq. 18


def _truncated(
    theta: Tensor, factor: float, L: int, trunc_wavelength: float | None, trunc_a: float, trunc_rho: float
) -> Tensor:
    """Truncated basis (Pal et al. 2023)."""
    import torch

    if factor != 1:
        theta = theta / factor
    b = 2 * math.pi / (L if trunc_wavelength is None else trunc_wavelength)
    a, rho = trunc_a * b, trunc_rho * b
    out = torch.where(theta < b, torch.full_like(theta, rho), theta)  # survey Eq. 24, middle case
    return torch.where(theta < a, torch.zeros_like(theta), out)  # ... and the bottom case


def llama3_inv_freq(
    theta: Tensor, factor: float, original_max_position: int, low_freq_factor: float, high_freq_factor: float
) -> Tensor:
    """Llama 3.1's frequency scaling of θ (any shape): by wavelength, divided by s, kept, or blended.

    Meta's Llama 3.1 release, the rule of transformers' ``_compute_llama3_parameters``
    (module docstring); written here from that definition.
    """
    check_llama3(low_freq_factor, high_freq_factor)
    import torch

    L = original_max_position
    wavelength = 2 * math.pi / theta  # λ_i = 2π/θ_i
    gamma = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)  # L/λ_i: rotations over L
    blended = (1 - gamma) * theta / factor + gamma * theta  # between L/high and L/low: smooth blend
    out = torch.where(wavelength > L / low_freq_factor, theta / factor, blended)  # long wavelengths: θ_i/s
    return torch.where(wavelength < L / high_freq_factor, theta, out)  # short wavelengths: θ_i unchanged


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    # Peng et al. 2023 (YaRN) Eq. 22: sqrt(1/t) = 0.1 ln(s) + 1; 1 for s <= 1 (as HF)
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _yarn(d, base, factor, L, beta_fast, beta_slow, attention_factor, mscale, mscale_all_dim, truncate, device, dtype):
    """YaRN, step for step as HF ``_compute_yarn_parameters`` (so float32 results are identical)."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    if attention_factor is None:
        if mscale and mscale_all_dim:  # DeepSeek-style ratio of two mscales
            attention_factor = float(_yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim))
        else:
            attention_factor = _yarn_mscale(factor)  # YaRN Eq. 22
    beta_fast = beta_fast or 32  # HF: 0/None fall back to the paper's defaults
    beta_slow = beta_slow or 1

    def correction_dim(num_rotations):
        # the dimension index whose wavelength fits num_rotations times into L (YaRN Eq. 16 inverted)
        return (d * math.log(L / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001  # HF: prevent a division by zero

    pos_freqs = base ** (torch.arange(0, d, 2).to(device=device, dtype=dtype) / d)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    ramp = ((torch.arange(d // 2, dtype=dtype) - low) / (high - low)).clamp(0, 1).to(device=device)
    extrapolation_factor = 1 - ramp  # 1: keep θ_i (fast dims), 0: interpolate θ_i/s (slow dims)
    inv_freq = inv_freq_interpolation * (1 - extrapolation_factor) + inv_freq_extrapolation * extrapolation_factor
    return inv_freq, attention_factor


__all__ = [
    "FactorList",
    "SCALINGS",
    "LENGTH_DEPENDENT",
    "RopeRequest",
    "check_llama3",
    "default_inv_freq",
    "llama3_inv_freq",
    "rope_frequencies",
]
