"""Experiment ``finetune-extension``'s presets: the extension experiment's base model and the fine-tune budget."""

from __future__ import annotations

from dataclasses import dataclass, replace

from extrap.experiments.extension.presets import PRESETS as EXTENSION
from extrap.experiments.extension.presets import ExtensionSettings

RULER_TASKS = ("niah_single", "vt")


@dataclass(frozen=True)
class FinetuneSettings:
    """The base (the extension experiment's model, trained as rope-base trains it) and one budget for every method.

    ``budget``: fine-tuning tokens as a fraction of the base's training tokens (LCEG: one budget for all);
    ``stretch``: the fine-tuning length as a multiple of L_tr; ``lr_scale``: the fine-tune's peak learning rate
    as a fraction of the base's and ``warmup`` its linear warmup as a fraction of the fine-tune's steps, then
    cosine to 0.1 × (choices of this study, not LCEG's: a warmup as long as the fine-tune would end it at its peak
    rate); ``abf``: ABF's base multiplier (Xiong et
    al. 2023); ``pose_target``: PoSE's target as a multiple of L_tr (windows of L_tr); ``s2_ratio``: LongLoRA's
    group as a share of the fine-tuning length; ``lm_infinite`` / ``self_extend``: their extend specs on the base
    (None: the defaults at L_tr), chosen so that each is exact at L_tr and so retrieves there as the base does.
    """

    base: ExtensionSettings
    budget: float = 0.1
    stretch: int = 4
    lr_scale: float = 0.3
    warmup: float = 0.05
    abf: float = 64.0
    pose_target: int = 16
    s2_ratio: float = 0.25
    ruler_n: int = 20  # RULER-style examples per task and length
    ruler_buckets: int = 5
    eval_tokens: int = 8192  # tokens per length for LongPPL (nonoverlapping chunks)
    lm_infinite: str | None = None  # None: global=10, local=L_tr (exact up to L_tr)
    self_extend: str | None = None  # None: group=16, window=3/4 L_tr (exact up to 3/4 L_tr, grouped beyond)

    @property
    def train_length(self) -> int:
        return self.base.model.train_length

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(self.train_length * k for k in self.base.model.multiples)


_TINY = dict(steps=8, train_length=128, multiples=(1, 2), targets=4, passkey_n=2)
_SMOKE = replace(EXTENSION["smoke"], model=replace(EXTENSION["smoke"].model, **_TINY))
PRESETS: dict[str, FinetuneSettings] = {
    # smoke: the extension smoke model (2 layers, d = 32) at L_tr = 128 (niah_single needs 126 bytes), 8 steps,
    # 1-2 fine-tune steps, 2 lengths: the tests' run
    "smoke": FinetuneSettings(_SMOKE, ruler_n=2, ruler_buckets=1, eval_tokens=1024),
    # cpu: the extension experiment's cpu base (rope, L_tr = 128, 2000 steps, passkey in the mix) and 40% of its
    # tokens at 4 × L_tr: 200 fine-tune steps per method (PoSE 800 at L_tr windows).  Why not LCEG's small share:
    # this base learns passkey only after ~1000 steps (its loss falls from chance at steps 1000-1200), and a plain
    # RoPE fine-tune at 512 re-learns it at 512 in 200 steps (20/20 at 128, 256 and 512), not in 100 (10/20 at
    # 128, 2/20 at 512) or 50 (2/20 at 128: the fine-tune unlearns it); PI ×4 alike (20/20 up to 512 at 200 steps,
    # 2/20 at 100).  The goal line says that 0.4 is above its 10%.  10 RULER examples per task and length keep
    # the measurement of a method near a minute on two cores.  S²-Attn in groups of L_tr / 2 (LongLoRA's 1/4 of
    # the fine-tuning length is 128 = L_tr here): with 1/4 the fine-tune keeps 4/20 passkeys at L_tr, with 1/2
    # 20/20 (200 steps each, measured on this base), and the approximate methods must retrieve at L_tr.
    "cpu": FinetuneSettings(EXTENSION["cpu"], budget=0.4, s2_ratio=0.5, ruler_n=10, ruler_buckets=5, eval_tokens=4096),
    "paper": FinetuneSettings(EXTENSION["paper"]),
}
