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


# Experiment effective-length: three bias PEs with a finite TRF (ALiBi, KERPLE-log, 000's Type 1) beside the two
# whose TRF is not applicable (RoPE, NoPE): five models, so the cpu preset fits ~12 minutes on two cores.
EFFECTIVE_LENGTH_DEFAULT_PES = ("alibi", "kerple-log", "type1", "rope", "nope")


@dataclass(frozen=True)
class EffectiveLengthSettings:
    """Experiment ``effective-length``: models trained on a mix of RULER-style tasks and language modelling,
    scored on each task up to 16 × L_tr (rank scoring), with perplexity and LongPPL at the same lengths."""

    train_preset: str  # model size and optimiser of extrap.config.PRESETS
    train_length: int  # L_tr: every task must fit it with its answer (extrap.tasks.ruler.ruler_min_length)
    steps: int
    tasks: tuple[str, ...]  # the RULER-style tasks trained on and scored (``tasks=`` picks others)
    multiples: tuple[int, ...]  # scored lengths as multiples of L_tr (1 first)
    n: int  # scored examples per task and length, needle depths stratified over ``buckets``
    buckets: int
    eval_tokens: int  # tokens per length for perplexity and LongPPL (nonoverlapping chunks)
    task_mix: float  # fraction of language-modelling batches beside the task batches
    threshold: str = "rel:0.85"  # effective length: 0.85 × the score at L_tr (NoLiMa's relative form)
    train_overrides: Mapping[str, object] = field(default_factory=dict)


EFFECTIVE_LENGTH_PRESETS: dict[str, EffectiveLengthSettings] = {
    "smoke": EffectiveLengthSettings(
        "smoke",
        136,
        10,
        ("niah_single",),
        (1, 2),
        n=4,
        buckets=2,
        eval_tokens=544,
        task_mix=0.25,
        train_overrides={"save_every": 10, "batch_size": 4},
    ),
    # cpu: the alignment study's 3-layer d=64 model at L_tr = 288, where niah_single (131 byte tokens with its
    # answer) and qa1 (283) fit; niah_multikey needs 309.  vt (201) fits at 256, but 2000 steps did not teach
    # it (an ALiBi model scored 0.0 at L_tr, chance 0.25), while qa1 reached 0.45 (ALiBi) and 0.20 (RoPE) and
    # niah_single 0.40-0.60: with 20 examples the gate's bar is 0.44, so some pairs will read as not learned.
    # Measured on the shared 2-core machine: 0.068 s per step on one thread at load ~3.5 (0.096 s at L_tr = 256
    # under load 7) and ~30 s of scoring, PPL and LongPPL per model: 3-4 min per model, ~10-12 min for five
    # models two at a time (three rounds).
    "cpu": EffectiveLengthSettings(
        "cpu",
        288,
        2000,
        ("niah_single", "qa1"),
        (1, 2, 4, 8, 16),
        n=20,
        buckets=5,
        eval_tokens=8192,
        task_mix=0.25,
        train_overrides={**CPU_MODEL, "batch_size": 8, "save_every": 250, "log_every": 50},
    ),
    "paper": EffectiveLengthSettings(
        "paper",
        512,
        20000,
        ("niah_single", "niah_multikey", "vt", "qa1"),
        (1, 2, 4, 8, 16),
        n=100,
        buckets=10,
        eval_tokens=65536,
        task_mix=0.25,
    ),
}
