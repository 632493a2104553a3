"""Experiment ``rope-base``'s presets: what it trains and measures at smoke, cpu and paper scale."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extrap.study.presets import CPU_MODEL


@dataclass(frozen=True)
class RopeBaseSettings:
    """Experiment ``rope-base``: models trained with passkey examples in their mix, measured up to 16 × L_tr."""

    train_preset: str  # model size and optimiser of extrap.config.PRESETS
    train_length: int  # L_tr (passkey needs 81 byte tokens with its answer)
    steps: int
    multiples: tuple[int, ...]  # evaluation lengths as multiples of L_tr (1 first)
    targets: int  # last-token targets per length
    passkey_n: int  # passkey examples per length, needle depths stratified
    task_mix: float  # fraction of language-modelling batches beside the passkey batches
    fall_fraction: float = 0.5  # retrieval falls off below this fraction of the nearest bin's accuracy
    train_overrides: Mapping[str, object] = field(default_factory=dict)


PRESETS: dict[str, RopeBaseSettings] = {
    "smoke": RopeBaseSettings(
        "smoke", 96, 20, (1, 2, 4), targets=8, passkey_n=3, task_mix=0.5, train_overrides={"save_every": 20}
    ),
    # cpu: the alignment study's 3-layer d=64 model with 4 heads, so d = 16 per head: Liu's bound
    # L_tr·β^(2/d) then spreads over 1.8-5.6 × L_tr across the five bases, inside the measured lengths.
    # 2000 steps with a quarter of language-modelling batches: a base-10^4 model retrieves every passkey
    # at L_tr and reaches 0.63 of the unigram entropy (the gate asks 0.8).  256 last-token targets keep
    # the paired standard error of |Δppl|/ppl near a fifth of a 0.5 ratio; ~2.5 min per model on one core.
    "cpu": RopeBaseSettings(
        "cpu",
        128,
        2000,
        (1, 2, 4, 8, 16),
        targets=256,
        passkey_n=40,
        task_mix=0.25,
        train_overrides={**CPU_MODEL, "save_every": 500, "log_every": 50},
    ),
    "paper": RopeBaseSettings("paper", 512, 20000, (1, 2, 4, 8, 16), targets=256, passkey_n=100, task_mix=0.25),
}
