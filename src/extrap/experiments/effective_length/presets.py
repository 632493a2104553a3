"""Experiment ``effective-length``'s presets: what it trains, scores and measures at smoke, cpu and paper scale."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extrap.study.presets import CPU_MODEL


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


PRESETS: dict[str, EffectiveLengthSettings] = {
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
