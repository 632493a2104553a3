"""Experiment ``extension``'s presets: the model it trains (rope-base's) and the methods it reads it with."""

from __future__ import annotations

from dataclasses import dataclass, replace

from extrap.experiments.rope_base.presets import PRESETS as ROPE_BASE
from extrap.experiments.rope_base.presets import RopeBaseSettings


@dataclass(frozen=True)
class ExtensionSettings:
    """Experiment ``extension``: the model (``model``: trained and measured as rope-base does) and its methods."""

    pe: str  # the trained RoPE model's spec
    model: RopeBaseSettings  # training, lengths, last-token targets and passkey examples


PRESETS: dict[str, ExtensionSettings] = {
    "smoke": ExtensionSettings("rope", ROPE_BASE["smoke"]),
    # cpu: rope-base's cpu model at base 10^4 (it retrieves every passkey at L_tr), read with 14 methods at 5
    # lengths.  Measured CPU time on one thread (16 targets, 4 passkey examples, all 5 lengths): 31 s of last-token
    # and 8 s of passkey over the 14 methods, so 128 targets and 40 examples cost ~330 core-s, ~3 min on 2 cores,
    # beside ~2 min of training: ~6 min on 2 idle cores, ~10 if shared ones double the CPU time.
    "cpu": ExtensionSettings("rope", replace(ROPE_BASE["cpu"], targets=128, passkey_n=40)),
    "paper": ExtensionSettings("rope", ROPE_BASE["paper"]),
}
