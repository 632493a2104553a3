"""The records of the RULER-style tasks: an example, scores by length and depth, effective length, the report.

Frozen dataclasses with one ``to_json()`` and one ``from_json()`` each (the style of
:mod:`extrap.tasks.records`); ``extrap task sample --json`` and ``extrap task score --suite ruler --json``
print exactly their JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from extrap.tasks.records import EchoesSettings, ScoredRun


@dataclass(frozen=True)
class RulerExample:
    """One example of a RULER-style task (:mod:`extrap.tasks.ruler` says what each field means).

    ``answers`` are the references (RULER's ``outputs``); ``answer`` is them joined by ", " in their canonical
    order and ``target`` is ``" " + answer + "\\n"``, the continuation scored by log-likelihood and trained on.
    ``candidates`` are whole answers, the true one first (rank scoring).  ``depth`` is None for the tasks
    that spread their answer over the whole context (cwe, fwe).
    """

    task: str
    seed: int
    length: int
    prompt: str
    answers: tuple[str, ...]
    answer: str
    target: str
    candidates: tuple[str, ...]
    depth: float | None
    requested_depth: float | None
    prompt_tokens: int
    target_tokens: int
    needle_token: int | None  # index of the first needed piece's first token in the prompt
    tokenizer: str
    haystack: str | None  # corpus name, "noise", or None (no haystack)
    metric: str  # RULER's string match: "all" or "part"
    params: tuple[tuple[str, Any], ...] = ()  # the task's settings (num_hops, alpha, ...)

    def prompt_ids(self, tokenizer) -> list[int]:
        return tokenizer.encode(self.prompt)

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(answers=list(self.answers), candidates=list(self.candidates), params=dict(self.params))
        return out

    @classmethod
    def from_json(cls, d: dict) -> RulerExample:
        values = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        values.update(answers=tuple(d["answers"]), candidates=tuple(d["candidates"]))
        values["params"] = tuple((d.get("params") or {}).items())
        return cls(**values)


@dataclass(frozen=True)
class DepthCell:
    """Mean score of the examples whose realised depth is in [lo, hi); None when there are none."""

    lo: float
    hi: float
    n: int = 0
    total: float = 0.0  # the sum of the examples' scores

    @property
    def score(self) -> float | None:
        return self.total / self.n if self.n else None

    def to_json(self) -> dict:
        return {"lo": self.lo, "hi": self.hi, "n": self.n, "total": self.total, "score": self.score}

    @classmethod
    def from_json(cls, d: dict) -> DepthCell:
        return cls(lo=d["lo"], hi=d["hi"], n=d.get("n", 0), total=d.get("total", 0.0))


@dataclass(frozen=True)
class RulerScore:
    """One example scored: its score in [0, 1] (rank and greedy: 0 or 1; generate: RULER's string match)."""

    task: str
    length: int
    seed: int
    depth: float | None
    answer: str
    prediction: str
    score: float

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, d: dict) -> RulerScore:
        return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class RulerLength:
    """A task's mean score at one length and by depth bucket; or why the length failed (``error``)."""

    length: int
    n: int
    score: float | None = None
    mean_prompt_tokens: float | None = None
    seconds: float | None = None
    by_depth: tuple[DepthCell, ...] = ()
    error: str | None = None

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["by_depth"] = [c.to_json() for c in self.by_depth]
        return out

    @classmethod
    def from_json(cls, d: dict) -> RulerLength:
        values = {f.name: d.get(f.name) for f in fields(cls)}
        values["by_depth"] = tuple(DepthCell.from_json(c) for c in d.get("by_depth") or ())
        return cls(**values)


@dataclass(frozen=True)
class EffectiveLength:
    """The largest tested length up to which every score stays at or above ``cutoff`` (None: none does).

    ``form`` is "relative" (cutoff = ratio × the score at ``reference_length`` = L_tr, NoLiMa) or
    "absolute" (cutoff = ratio, RULER).  ``passing``: every tested length whose score reaches the cutoff.
    ``note`` says why the length is None when it is.
    """

    form: str
    ratio: float
    cutoff: float | None
    reference_length: int | None
    reference_score: float | None
    length: int | None
    passing: tuple[int, ...] = ()
    note: str | None = None

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["passing"] = list(self.passing)
        return out

    @classmethod
    def from_json(cls, d: dict) -> EffectiveLength:
        values = {f.name: d.get(f.name) for f in fields(cls)}
        values["passing"] = tuple(d.get("passing") or ())
        return cls(**values)


@dataclass(frozen=True)
class RulerTaskReport:
    """One task of the suite: its scores per length (and depth) and its own effective length."""

    task: str
    metric: str
    results: tuple[RulerLength, ...]
    effective_length: EffectiveLength

    def to_json(self) -> dict:
        return {
            "task": self.task,
            "metric": self.metric,
            "results": [r.to_json() for r in self.results],
            "effective_length": self.effective_length.to_json(),
        }

    @classmethod
    def from_json(cls, d: dict) -> RulerTaskReport:
        return cls(
            task=d["task"],
            metric=d["metric"],
            results=tuple(RulerLength.from_json(r) for r in d["results"]),
            effective_length=EffectiveLength.from_json(d["effective_length"]),
        )


@dataclass(frozen=True)
class LengthMean:
    """The mean over the suite's tasks at one length (None if a task failed there)."""

    length: int
    score: float | None

    def to_json(self) -> dict:
        return {"length": self.length, "score": self.score}

    @classmethod
    def from_json(cls, d: dict) -> LengthMean:
        return cls(length=d["length"], score=d.get("score"))


@dataclass(frozen=True)
class RulerSettings:
    """What :func:`extrap.tasks.ruler.score_ruler` is asked (``extrap task score --suite ruler``'s options).

    ``method``: rank | greedy | generate.  ``threshold``: "rel:0.85" (default) or "abs:0.85".
    ``haystack``: None (each task's default), "corpus" or "noise".  ``params``: task settings by name.
    """

    tasks: Sequence[str]
    lengths: Sequence[int]
    train_length: int
    n: int = 20
    seed: int = 0
    method: str = "rank"
    threshold: str = "rel:0.85"
    buckets: int = 5
    filler: Any = None
    split: str = "validation"
    haystack: str | None = None
    params: Sequence[tuple[str, Any]] = ()
    batch: int = 4
    details: bool = False
    progress: bool = False


@dataclass(frozen=True)
class RulerReport(EchoesSettings):
    """The suite's scores: per task, per length and depth; their mean per length; effective lengths."""

    suite: str
    method: str
    n: int
    seed: int
    buckets: int
    tokenizer: str
    filler: str | None
    lengths: tuple[int, ...]
    threshold: str
    tasks: tuple[RulerTaskReport, ...]
    mean: tuple[LengthMean, ...]
    effective_length: EffectiveLength  # of the mean
    skipped: tuple[str, ...] = ()  # default tasks left out: too long for the shortest length
    examples: tuple[RulerScore, ...] | None = None

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "examples"}
        out.update(
            lengths=list(self.lengths),
            tasks=[t.to_json() for t in self.tasks],
            mean=[m.to_json() for m in self.mean],
            effective_length=self.effective_length.to_json(),
            skipped=list(self.skipped),
        )
        if self.examples is not None:
            out["examples"] = [e.to_json() for e in self.examples]
        return out

    @classmethod
    def from_json(cls, d: dict) -> RulerReport:
        ex = d.get("examples")
        return cls(
            **{k: d[k] for k in ("suite", "method", "n", "seed", "buckets", "tokenizer", "filler", "threshold")},
            lengths=tuple(d["lengths"]),
            tasks=tuple(RulerTaskReport.from_json(t) for t in d["tasks"]),
            mean=tuple(LengthMean.from_json(m) for m in d["mean"]),
            effective_length=EffectiveLength.from_json(d["effective_length"]),
            skipped=tuple(d.get("skipped") or ()),
            examples=None if ex is None else tuple(RulerScore.from_json(e) for e in ex),
        )


@dataclass(frozen=True)
class RulerRun(ScoredRun):
    """``extrap task score --suite ruler --json``: the run scored (and its provenance), and the report."""

    report: RulerReport
    REPORT: ClassVar[Any] = RulerReport
