"""The presets of experiment ``alignment`` (004 §5.2): what it trains and measures at smoke, cpu and paper scale."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extrap.study.presets import CPU_MODEL


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
PRESETS: dict[str, AlignmentSettings] = {
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
