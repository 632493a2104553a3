"""The methods of the fine-tuned extension study (LCEG, Lu et al. 2024): how each one is made from the base run.

Three kinds:

* ``finetune``: a new run started from the base's weights (:func:`extrap.train.train` with ``init_from``) on the
  same stream, seed and token budget, with the method's rotary spec (the registry's scaled scheme,
  :meth:`extrap.positional.rotary.Rotary.rescaled` with L = the base's L_tr, as ``extrap train --rope KIND
  --factor F`` builds it), training length, position sampler (PoSE) or training attention (S²-Attn);
* ``inference``: a fine-tune read with a RoPE scaling it was not trained with (dynamic NTK on ``rope-ft``);
* ``base``: the base read with a training-free extension (:mod:`extrap.extend`).

``rope-ft`` plain RoPE at 4 L_tr; ``pi`` linear ×4 (Chen et al. 2023); ``ntk`` ×4 and ``ntk-16`` ×16 (LCEG's
"scale past the fine-tuned length"); ``yarn`` ×4 (Peng et al. 2024); ``llama3`` ×4; ``abf`` base × 64 (Xiong et
al. 2023); ``pose`` L_tr windows, positions up to 16 L_tr (Zhu et al. 2024); ``dynamic`` (emozilla 2023) on
``rope-ft``; ``s2-attn`` LongLoRA's shifted sparse attention in a full-parameter fine-tune at 4 L_tr (Chen et
al. 2024); ``lm-infinite`` (Han et al. 2024) and ``self-extend`` (Jin et al. 2024) on the base.
"""

from __future__ import annotations

from dataclasses import dataclass

from extrap.errors import ExtrapError
from extrap.experiments.finetune_extension.about import APPROXIMATE, METHODS
from extrap.experiments.finetune_extension.presets import FinetuneSettings

SCALED = {"pi": ("linear", 4), "ntk": ("ntk", 4), "ntk-16": ("ntk", 16), "yarn": ("yarn", 4), "llama3": ("llama3", 4)}


@dataclass(frozen=True)
class FtMethod:
    """One method as the study makes it: ``kind`` finetune | inference | base; what it trains or reads with."""

    name: str
    kind: str
    pe: str | None = None  # finetune: the child's rotary spec
    train_length: int | None = None  # finetune: its training length
    positions: str = "contiguous"  # finetune: its position sampler
    attention: str = "full"  # finetune: its training attention
    steps: int | None = None  # finetune: steps for the shared token budget
    of: str | None = None  # inference: the fine-tune it reads
    extend: str | None = None  # base: the extend spec
    rope: str | None = None  # inference: the RoPE scaling kind (factor 1: dynamic sets its own)

    @property
    def approximate(self) -> bool:
        return self.name in APPROXIMATE

    @property
    def as_run(self) -> str:
        """What ran, in words (the table's "as run" column)."""
        if self.kind == "base":
            return f"base + {self.extend}"
        if self.kind == "inference":
            return f"{self.of} read with rope {self.rope} (θ set by n / its L_tr)"
        extra = [x for x in (self.positions, self.attention) if x not in ("contiguous", "full")]
        return f"{self.pe} at {self.train_length}, {self.steps} steps" + "".join(f", {x}" for x in extra)


def check_methods(names) -> tuple[str, ...]:
    """The methods in the study order, each once; ``dynamic`` brings ``rope-ft`` (it reads it); one line if bad."""
    names = tuple(dict.fromkeys(names))
    bad = [n for n in names if n not in METHODS]
    if bad or not names:
        raise ExtrapError(f"finetune-extension: unknown method {bad[0] if bad else '(none)'!r} "
                          f"(choose from {', '.join(METHODS)})")  # fmt: skip
    if "dynamic" in names and "rope-ft" not in names:
        names = ("rope-ft", *names)
    return tuple(n for n in METHODS if n in names)


def ft_steps(s: FinetuneSettings, base_tokens: int, batch_tokens: int, length: int) -> int:
    """Steps that spend ``budget`` × the base's tokens at ``length`` (batch_tokens: sequences per step)."""
    return max(1, round(s.budget * base_tokens / (batch_tokens * length)))


def make_method(name: str, s: FinetuneSettings, base_pe: str, base_tokens: int, batch: int) -> FtMethod:
    """The method ``name`` for the base ``base_pe`` (every spec parsed here: a bad one is refused before training)."""
    from extrap import positional
    from extrap.extend import parse

    L, Lf = s.train_length, s.stretch * s.train_length
    base = positional.get(base_pe)
    if name == "lm-infinite":
        return FtMethod(name, "base", extend=parse(s.lm_infinite or "lm-infinite", L).spec)
    if name == "self-extend":
        default = f"self-extend:group=16,window={3 * L // 4}"
        return FtMethod(name, "base", extend=parse(s.self_extend or default, L).spec)
    if name == "dynamic":
        return FtMethod(name, "inference", of="rope-ft", rope="dynamic")
    pe, length, positions, attention = base_pe, Lf, "contiguous", "full"
    if name in SCALED:
        kind, factor = SCALED[name]
        pe = base.rescaled(kind, factor, L, {}).spec
    elif name == "abf":
        pe = positional.get(f"rope:base={base.opts['base'] * s.abf:g}").spec
    elif name == "pose":
        length, positions = L, f"pose:target={s.pose_target * L}"
    elif name == "s2-attn":
        attention = f"s2:ratio={s.s2_ratio}"
    return FtMethod(name, "finetune", pe, length, positions, attention, ft_steps(s, base_tokens, batch, length))
