"""The block of ``extrap study --experiment effective-length``: each model's effective length per task
beside its TRF, with perplexity and LongPPL at the same lengths.

Frozen records, each with ``to_json`` and ``from_json`` (a missing key reads as None or empty, so a partial
file still loads).  :class:`EffectiveLengthModel` is one model: its RULER-style report
(:class:`extrap.tasks.ruler.RulerReport`: scores per task, length and needle depth, and each task's
:class:`~extrap.tasks.ruler.EffectiveLength`, whose JSON records the form and ratio), whether it learned
each task above chance (:class:`TaskGate`), its TRF (:class:`TrfValue`) and its LongPPL per length
(:class:`~extrap.results.longppl.LongPPL`, the plain perplexity beside it).  :class:`EffectiveLengthBlock`
holds every model and the settings they were measured with; :func:`block` reads it from the study's results.
Light: the RULER records are imported when read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extrap.results import ResultsBlock, StudyResults
from extrap.results.longppl import LongPPL
from extrap.results.records import FlatRecord, as_mapping, record_fields, record_json

if TYPE_CHECKING:
    from extrap.tasks.ruler.records import RulerReport

FINITE, INFINITE, NOT_APPLICABLE, UNKNOWN = "finite", "infinite", "not-applicable", "unknown"


@dataclass(frozen=True)
class TrfValue(FlatRecord):
    """n(ε) of 000 Eq. 22 for a model (:func:`extrap.theory.receptive_field`, widest head over every layer).

    ``status``: finite (``value`` holds it), infinite (the series diverges), not-applicable (no Toeplitz
    bias: RoPE, NoPE; ``reason`` says why) or unknown.  ``params``: initial, or trained for a scheme whose
    bias learns (then ``initial`` is the value before training).
    """

    status: str
    value: int | None = None
    eps: float | None = None
    reduce: str | None = None
    params: str | None = None
    initial: int | None = None
    reason: str | None = None

    @property
    def finite(self) -> bool:
        return self.status == FINITE

    @classmethod
    def from_json(cls, d: Any) -> TrfValue:
        return cls(**record_fields(cls, d) | {"status": as_mapping(d).get("status") or UNKNOWN})


@dataclass(frozen=True)
class TaskGate(FlatRecord):
    """Did the model learn ``task`` above chance at L_tr?  Rank scoring picks one of ``candidates`` answers,
    so chance is 1/candidates; learned: the score at L_tr exceeds chance by more than two binomial standard
    errors, chance + 2·sqrt(c(1 − c)/n) (a one-sided test at about 2.3%).  ``learned`` None: not scored."""

    task: str
    chance: float | None
    n: int | None
    score: float | None  # at L_tr
    bar: float | None  # chance + 2 standard errors
    learned: bool | None


def task_gate(task: str, candidates: int, n: int, score: float | None) -> TaskGate:
    """The gate of one task from its candidate count, its examples at L_tr and their mean score."""
    c = 1 / candidates
    bar = c + 2 * math.sqrt(c * (1 - c) / n)  # binomial standard error of a mean of n Bernoulli(c) scores
    return TaskGate(task, c, n, score, bar, None if score is None else score > bar)


@dataclass(frozen=True)
class EffectiveLengthModel:
    """One model: its RULER report, task gates, TRF and LongPPL (``error``: why a part is missing)."""

    pe: str
    trf: TrfValue
    ruler: RulerReport | None
    gates: tuple[TaskGate, ...] = ()
    longppl: LongPPL | None = None
    error: str | None = None

    def gate(self, task: str) -> TaskGate | None:
        return next((g for g in self.gates if g.task == task), None)

    def learned(self, task: str) -> bool | None:
        g = self.gate(task)
        return g.learned if g is not None else None

    def effective(self, task: str):
        """The task's :class:`~extrap.tasks.ruler.EffectiveLength` (None: not scored)."""
        t = next((t for t in self.ruler.tasks if t.task == task), None) if self.ruler is not None else None
        return t.effective_length if t is not None else None

    def to_json(self) -> dict:
        return record_json(self)  # pe, trf, ruler, gates, longppl, error: each record by its own to_json

    @classmethod
    def from_json(cls, d: Any) -> EffectiveLengthModel:
        from extrap.tasks.ruler.records import RulerReport

        d = as_mapping(d)
        return cls(
            pe=d.get("pe"),
            trf=TrfValue.from_json(d.get("trf")),
            ruler=RulerReport.from_json(d["ruler"]) if isinstance(d.get("ruler"), Mapping) else None,
            gates=tuple(TaskGate.from_json(g) for g in d.get("gates") or ()),
            longppl=LongPPL.from_json(d["longppl"]) if isinstance(d.get("longppl"), Mapping) else None,
            error=d.get("error"),
        )


@dataclass(frozen=True)
class EffectiveLengthBlock:
    """Every model of the experiment, with the settings its numbers were measured with."""

    train_length: int | None = None
    lengths: tuple[int, ...] = ()
    tasks: tuple[str, ...] = ()
    threshold: str | None = None  # rel:0.85 (each task's EffectiveLength records its form and ratio)
    method: str | None = None  # rank scoring
    n: int | None = None  # examples per task and length
    buckets: int | None = None  # needle-depth buckets
    eval_tokens: int | None = None  # tokens per length of perplexity and LongPPL
    protocol: str | None = None  # of perplexity and LongPPL
    models: Mapping[str, EffectiveLengthModel] = field(default_factory=dict)  # {pe: model}, the study's order

    HEAD = ("train_length", "threshold", "method", "n", "buckets", "eval_tokens", "protocol")

    def to_json(self) -> dict:
        head = {k: getattr(self, k) for k in self.HEAD}
        models = {pe: m.to_json() for pe, m in self.models.items()}
        return {**head, "lengths": list(self.lengths), "tasks": list(self.tasks), "models": models}

    @classmethod
    def from_json(cls, d: Any) -> EffectiveLengthBlock:
        d = as_mapping(d)
        return cls(
            **{k: d.get(k) for k in cls.HEAD},
            lengths=tuple(d.get("lengths") or ()),
            tasks=tuple(d.get("tasks") or ()),
            models={str(pe): EffectiveLengthModel.from_json(m) for pe, m in as_mapping(d.get("models")).items()},
        )


RESULTS = ResultsBlock("effective_length", EffectiveLengthBlock)


def block(results: StudyResults) -> EffectiveLengthBlock:
    """The effective-length block of ``results`` (empty when the results hold none)."""
    return RESULTS.of(results) or EffectiveLengthBlock()


__all__ = [
    "FINITE",
    "INFINITE",
    "NOT_APPLICABLE",
    "UNKNOWN",
    "EffectiveLengthBlock",
    "EffectiveLengthModel",
    "RESULTS",
    "TaskGate",
    "TrfValue",
    "block",
    "task_gate",
]
