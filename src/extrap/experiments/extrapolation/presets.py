"""The presets of experiments ``extrapolation`` and ``alibi-slopes``: the PEs, the lengths, the measurements."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlopeVariants:
    """003 Table 1's variants: ALiBi slopes shifted by Δ, one slope 2^-h for all heads, windows of w tokens.

    Window sizes are the paper's, for L_tr = 512; the study scales them to its own L_tr.
    """

    shift: tuple[int, ...]
    same_h: tuple[int, ...]
    window: tuple[int, ...]


@dataclass(frozen=True)
class StudySettings:
    """Experiments ``extrapolation`` and ``alibi-slopes``."""

    train_preset: str  # model size and optimiser of extrap.config.PRESETS
    multiples: tuple[int, ...]  # evaluation lengths as multiples of L_tr
    eval_tokens: int  # tokens per length for nonoverlapping / sliding
    targets: int  # last-token targets
    erf_multiple: int  # ERF at L_ex = erf_multiple * L_tr
    erf_segments: int
    timing_windows: tuple[int, ...]
    timing_tokens: int
    slope_variants: SlopeVariants


PAPER_SLOPES = SlopeVariants(shift=(-3, 0, 2, 4, 6, 8), same_h=(0, 2, 4, 6, 8), window=(40, 80, 100, 120, 160, 320))

PRESETS: dict[str, StudySettings] = {
    "smoke": StudySettings(
        "smoke",
        (1, 2, 4, 8, 16),
        2048,
        16,
        4,
        2,
        (8, 16, 32),
        256,
        SlopeVariants(shift=(0, 6), same_h=(2,), window=(40, 320)),
    ),
    "cpu": StudySettings("cpu", (1, 2, 4, 8, 16), 16384, 64, 4, 8, (16, 32, 64, 128), 1024, PAPER_SLOPES),
    "paper": StudySettings(
        "paper", (1, 2, 4, 8, 16, 18), 65536, 256, 4, 16, (16, 32, 64, 128, 256, 512), 4096, PAPER_SLOPES
    ),
}
