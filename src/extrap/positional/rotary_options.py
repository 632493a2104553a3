"""The options of the ``rope`` scheme (and of ``xpos``, which adds its own): one table, shown by ``pe list``.

Kept apart from :mod:`extrap.positional.rotary` so the scheme's code stays short.  Every option names its
source in its help text; :data:`ONLY_FOR` guards the options that mean something for some scalings only.
"""

from __future__ import annotations

from extrap.positional.base import Option
from extrap.positional.rope_scaling import SCALINGS, FactorList


def _pos(x) -> bool:
    return x is None or x > 0


def _factors(x) -> bool:
    return x is None or (len(x) > 0 and all(f > 0 for f in x))


# Options that only mean something for some scalings (a typo-guard: setting them
# elsewhere raises instead of being silently ignored).
ONLY_FOR = {
    "factor": ("linear", "ntk", "dynamic", "ntk-by-parts", "yarn", "truncated", "llama3", "longrope"),
    "beta_fast": ("yarn",),
    "beta_slow": ("yarn",),
    "attention_factor": ("yarn", "longrope"),
    "mscale": ("yarn",),
    "mscale_all_dim": ("yarn",),
    "truncate": ("yarn",),
    "alpha": ("ntk-by-parts",),
    "beta": ("ntk-by-parts",),
    "trunc_wavelength": ("truncated",),
    "trunc_a": ("truncated",),
    "trunc_rho": ("truncated",),
    "low_freq_factor": ("llama3",),
    "high_freq_factor": ("llama3",),
    "short_factor": ("longrope",),
    "long_factor": ("longrope",),
}
NEEDS_ORIGINAL = ("dynamic", "ntk-by-parts", "yarn", "llama3", "longrope")


ROPE_OPTIONS = (
    Option("base", float, 10000.0, "RoPE base b (rope_theta)", lambda b: b > 1, "must be > 1"),
    Option(
        "scaling",
        str,
        "none",
        "interpolation: " + " | ".join(SCALINGS),
        lambda s: s in SCALINGS,
        "must be one of " + ", ".join(SCALINGS),
    ),
    Option("factor", float, 1.0, "scale s = target length / original_max_position", lambda s: s > 0, "must be > 0"),
    Option(
        "original_max_position",
        int,
        None,
        "L, the training length (needed by dynamic, ntk-by-parts, yarn, llama3, longrope; default wavelength "
        "of truncated)",
        _pos,
        "must be > 0",
    ),
    Option("beta_fast", float, 32.0, "yarn: ramp starts where dims rotate beta_fast times over L", _pos, "must be > 0"),
    Option("beta_slow", float, 1.0, "yarn: ramp ends where dims rotate beta_slow times over L", _pos, "must be > 0"),
    Option(
        "attention_factor",
        float,
        None,
        "yarn, longrope: cos/sin multiplier (default yarn: 0.1 ln(factor) + 1; longrope: sqrt(1 + ln(factor)/ln L))",
        _pos,
        "must be > 0",
    ),
    Option("mscale", float, None, "yarn: DeepSeek mscale (with mscale_all_dim)", _pos, "must be > 0"),
    Option("mscale_all_dim", float, None, "yarn: DeepSeek mscale_all_dim (with mscale)", _pos, "must be > 0"),
    Option("truncate", bool, True, "yarn: floor/ceil the ramp bounds (HF default)"),
    Option(
        "alpha",
        float,
        1.0,
        "ntk-by-parts: interpolate fully below alpha rotations over L",
        lambda a: a >= 0,
        "must be >= 0",
    ),
    Option("beta", float, 32.0, "ntk-by-parts: keep dims with more than beta rotations over L", _pos, "must be > 0"),
    Option(
        "trunc_wavelength",
        float,
        None,
        "truncated: cutoff b = 2π/trunc_wavelength (default L)",
        _pos,
        "must be > 0",
    ),
    Option(
        "trunc_a",
        float,
        1 / 8,
        "truncated: a = trunc_a · b (θ < a -> 0)",
        lambda a: 0 < a <= 1,
        "must be in (0, 1]",
    ),
    Option(
        "trunc_rho",
        float,
        1 / 16,
        "truncated: ρ = trunc_rho · b (a <= θ < b -> ρ)",
        lambda r: r >= 0,
        "must be >= 0",
    ),
    Option(
        "low_freq_factor",
        float,
        1.0,
        "llama3: wavelengths above L/low_freq_factor are divided by factor (Llama 3.1: 1)",
        _pos,
        "must be > 0",
    ),
    Option(
        "high_freq_factor",
        float,
        4.0,
        "llama3: wavelengths below L/high_freq_factor are kept (Llama 3.1: 4)",
        _pos,
        "must be > 0",
    ),
    Option(
        "short_factor",
        FactorList,
        None,
        "longrope: per-pair divisors of θ for sequences <= L, written a/b/c/... (Ding et al. 2024; HF short_factor)",
        _factors,
        "must be positive numbers a/b/c/...",
    ),
    Option(
        "long_factor",
        FactorList,
        None,
        "longrope: per-pair divisors of θ for sequences > L, written a/b/c/... (Ding et al. 2024; HF long_factor)",
        _factors,
        "must be positive numbers a/b/c/...",
    ),
    Option(
        "partial",
        float,
        1.0,
        "partial rotary: only the first int(partial·D) dims of a head rotate, θ over them (GPT-NeoX rotary_pct, "
        "HF partial_rotary_factor)",
        lambda x: 0 < x <= 1,
        "must be in (0, 1]",
    ),
    Option(
        "p",
        float,
        1.0,
        "p-RoPE: keep the int(p·r/2) highest frequencies, the rest θ = 0 (Barbero et al. 2025, ICLR, §6)",
        lambda x: 0 < x <= 1,
        "must be in (0, 1]",
    ),
    Option(
        "resonance",
        int,
        0,
        "Resonance RoPE: 1 rounds every wavelength, θ = 2π/round(2π/θ) (Wang et al. 2024, Algorithm 1)",
        lambda x: x in (0, 1),
        "must be 0 or 1",
    ),
)
