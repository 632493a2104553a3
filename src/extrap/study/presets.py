"""The study presets: what each experiment trains and measures at smoke, cpu and paper scale.

An experiment that has its package keeps its presets there (``extrap.experiments.<name>.presets``); what
several share stays here: :data:`CPU_MODEL`, the small model their cpu presets train.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_PES = (
    "alibi",
    "kerple-log",
    "sandwich",
    "type1",
    "type2",
    "example1",
    "example2",
    "sinusoidal",
    "rope",
    "nope",
)
ALIGNMENT_DEFAULT_PES = ("t5", "alibi")

# The cpu presets' model (alignment, rope-base, effective-length, extension): 3 layers, d = 64, 4 heads, lr 3e-3.
CPU_MODEL = {"n_layer": 3, "d_model": 64, "n_head": 4, "lr": 3e-3}


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

STUDY_PRESETS: dict[str, StudySettings] = {
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


@dataclass(frozen=True)
class AlignmentSettings:
    """Experiment ``alignment`` (004 §5.2)."""

    train_preset: str  # model size and optimiser of extrap.config.PRESETS
    tasks: tuple[str, ...]  # tasks run by default (``tasks=`` picks others)
    train_lengths: Mapping[str, int]  # L_tr per task
    steps: int
    multiples: tuple[int, ...]  # evaluation lengths as multiples of L_tr (1 first)
    n: int  # scored examples per length (stratified over the depth buckets)
    buckets: int
    probe_prompts: int  # unlabeled prompts per length for Algorithm 1 and the closed forms (at least) ...
    probe_tokens: int = 0  # ... and at least this many tokens in all: more (cheap) prompts at short lengths
    rank: bool = False  # also score by ranking the candidates (one shared pass over each prompt)
    task_mix: float = 0.0
    max_probe_length: int | None = None  # None: extrap.align.MAX_PROBE_LENGTH
    train_overrides: Mapping[str, object] = field(default_factory=dict)


# byte tokens an example needs with its answer: passkey 81, line 175, topic 213
ALIGNMENT_PRESETS: dict[str, AlignmentSettings] = {
    "smoke": AlignmentSettings(
        "smoke",
        ("passkey",),
        {"passkey": 96, "line": 224, "topic": 224},
        40,
        (1, 2, 4),
        n=5,
        buckets=5,
        probe_prompts=2,
        probe_tokens=512,
        rank=True,
        train_overrides={"save_every": 40, "log_every": 10},
    ),
    # cpu: a 3-layer d=64 model (the 4-layer d=128 cpu preset is 4x slower per step, and the zero-initialised T5
    # table moves ~lr per step, so T5 needs lr 3e-3 and ~1800 steps before it retrieves at all); half the batches
    # are language modelling, which teaches the position table faster than the 6 scored answer tokens alone.
    "cpu": AlignmentSettings(
        "cpu",
        ("passkey", "line", "topic"),
        {"passkey": 128, "line": 256, "topic": 256},
        3000,
        (1, 2, 4, 8, 16),
        n=40,
        buckets=5,
        probe_prompts=1,
        probe_tokens=2048,
        rank=True,
        task_mix=0.5,
        train_overrides={**CPU_MODEL, "save_every": 500, "log_every": 50},
    ),
    "paper": AlignmentSettings(
        "paper",
        ("passkey", "line", "topic"),
        {"passkey": 512, "line": 512, "topic": 512},
        20000,
        (1, 2, 4, 8, 16),
        n=100,
        buckets=5,
        probe_prompts=4,
        probe_tokens=16384,
        rank=True,
        task_mix=0.25,
    ),
}
