"""The block of ``extrap study --experiment finetune-extension`` in results.json: every method's measurements.

Frozen records with ``to_json``/``from_json`` (a missing key reads as None or empty).  :class:`FtResult` is one
method: last-token perplexity per length with its ratio to L_tr and noise (rope-base's
:class:`~extrap.experiments.rope_base.results.PplLength`), passkey accuracy per length, the RULER-style task
reports (:class:`~extrap.tasks.ruler.records.RulerTaskReport`, with their effective lengths), LongPPL per length
and the theory's in-distribution length beside the measured break.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from extrap.experiments.rope_base.results import PasskeyLength, PplLength, measured_from_json, measured_json
from extrap.results import ResultsBlock, StudyResults
from extrap.results.records import FlatRecord, as_mapping
from extrap.tasks.ruler.records import RulerTaskReport


@dataclass(frozen=True)
class LongPplLength(FlatRecord):
    """LongPPL at one length (None: no key token there, or ``error``), over ``key_tokens`` key tokens."""

    length: int
    longppl: float | None
    key_tokens: int | None
    error: str | None = None


@dataclass(frozen=True)
class FtResult:
    """One method: how it was made, its measurements per length, and the theory's in-distribution length."""

    name: str
    kind: str  # finetune | inference | base
    approximate: bool  # LCEG's approximate-attention group (S²-Attn, LM-Infinite, Self-Extend)
    as_run: str
    train_length: int | None  # the length it was fine-tuned at (None: not fine-tuned)
    train_loss: float | None  # the fine-tune's final training loss
    ppl: tuple[PplLength, ...] = ()
    passkey: tuple[PasskeyLength, ...] = ()
    ruler: tuple[RulerTaskReport, ...] = ()  # niah_single and vt
    longppl: tuple[LongPplLength, ...] = ()
    predicted_length: int | None = None  # the theory's in-distribution length (None: none found up to the longest)
    basis: str | None = None  # angles (extrap theory rope at the fine-tuned length) | distance (extend) | none
    measured_break: int | None = None
    passkey_falloff: int | None = None

    def passkey_at(self, length: int) -> float | None:
        return next((p.accuracy for p in self.passkey if p.length == length), None)

    def ppl_at(self, length: int) -> float | None:
        return next((p.ppl for p in self.ppl if p.length == length), None)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("ppl", "passkey", "ruler", "longppl"):
            out[key] = [x.to_json() for x in out[key]]
        return out

    @classmethod
    def from_json(cls, d: Any) -> FtResult:
        d = as_mapping(d)
        kinds = {"ppl": PplLength, "passkey": PasskeyLength, "ruler": RulerTaskReport, "longppl": LongPplLength}
        values = {f.name: d.get(f.name) for f in fields(cls)}
        values.update({k: tuple(t.from_json(x) for x in d.get(k) or ()) for k, t in kinds.items()})
        return cls(**values)


@dataclass(frozen=True)
class FinetuneBlock:
    """Every method of the experiment, with the base and the settings its numbers were measured with."""

    pe: str | None = None  # the base's spec
    train_length: int | None = None
    lengths: tuple[int, ...] = ()
    delta: float | None = None
    fall_fraction: float | None = None
    passkey_n: int | None = None
    targets: int | None = None
    budget: float | None = None  # fine-tune tokens / the base's training tokens
    finetune_length: int | None = None
    methods: Mapping[str, FtResult] = field(default_factory=dict)

    def to_json(self) -> dict:
        head = {"pe": self.pe, "budget": self.budget, "finetune_length": self.finetune_length}
        return {**head, **measured_json(self), "methods": {n: m.to_json() for n, m in self.methods.items()}}

    @classmethod
    def from_json(cls, d: Any) -> FinetuneBlock:
        d = as_mapping(d)
        methods = {str(n): FtResult.from_json(m) for n, m in as_mapping(d.get("methods")).items()}
        return cls(pe=d.get("pe"), budget=d.get("budget"), finetune_length=d.get("finetune_length"),
                   **measured_from_json(d), methods=methods)  # fmt: skip


def block(results: StudyResults) -> FinetuneBlock:
    """The finetune-extension block of ``results`` (empty when the results hold none)."""
    return RESULTS.of(results) or FinetuneBlock()


RESULTS = ResultsBlock("finetune_extension", FinetuneBlock)  # its block of results.json, under this key
