"""The records of the retrieval tasks: an example, the request to score a model, and the score report.

Each is a frozen dataclass with one ``to_json()`` (exactly the JSON that ``extrap task sample --json`` and
``extrap task score --json`` print) and one ``from_json()`` (reads what earlier versions wrote; unknown
keys are ignored).  A per-layer τ is a tuple here and a list in the JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Self

Temperature = float | tuple[float, ...] | str | None  # none, one τ, one per layer, or "auto[:MODE][:per-layer]"


def _tau_json(tau: Temperature) -> Any:
    return list(tau) if isinstance(tau, tuple) else tau


def _tau_of(value: Any) -> Temperature:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Example:
    """One example of a retrieval task (:mod:`extrap.tasks.generators` says what each field means).

    ``n_lines``, ``key``, ``line_index`` belong to line examples and ``n_topics``, ``topics`` to topic
    examples (None elsewhere, and then not in the JSON).
    """

    task: str
    seed: int
    length: int
    prompt: str
    answer: str
    target: str  # " <answer>\n": what the model must produce
    candidates: tuple[str, ...]  # the answer first, then the others (rank scoring)
    depth: float  # where the needle sits in the context, in [0, 1]
    requested_depth: float
    prompt_tokens: int
    target_tokens: int
    needle_token: int  # index of the needle's first token in the prompt
    tokenizer: str
    n_lines: int | None = None
    key: str | None = None
    line_index: int | None = None
    n_topics: int | None = None
    topics: tuple[str, ...] | None = None

    EXTRAS = ("n_lines", "key", "line_index", "n_topics", "topics")

    def prompt_ids(self, tokenizer) -> list[int]:
        """The prompt as ``tokenizer``'s token ids (scoring and training tokenise prompt and target apart)."""
        return tokenizer.encode(self.prompt)

    def extras(self) -> list[tuple[str, Any]]:
        """The task's own fields that are set, in order: (name, value)."""
        return [(k, getattr(self, k)) for k in self.EXTRAS if getattr(self, k) is not None]

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in self.EXTRAS}
        out["candidates"] = list(self.candidates)
        return {**out, **{k: list(v) if isinstance(v, tuple) else v for k, v in self.extras()}}

    @classmethod
    def from_json(cls, d: dict) -> Example:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in names}
        values["candidates"] = tuple(d.get("candidates") or ())
        if d.get("topics") is not None:
            values["topics"] = tuple(d["topics"])
        return cls(**values)


@dataclass(frozen=True)
class DepthBucket:
    """Accuracy of the examples whose answer depth is in [lo, hi) (004 Table 9); None when the bucket is empty."""

    lo: float
    hi: float
    n: int = 0
    correct: int = 0

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n else None

    def to_json(self) -> dict:
        return {"lo": self.lo, "hi": self.hi, "n": self.n, "correct": self.correct, "accuracy": self.accuracy}

    @classmethod
    def from_json(cls, d: dict) -> DepthBucket:
        return cls(lo=d["lo"], hi=d["hi"], n=d.get("n", 0), correct=d.get("correct", 0))


@dataclass(frozen=True)
class ExampleScore:
    """One scored example (``--details``)."""

    length: int
    seed: int
    depth: float
    answer: str
    prediction: str
    correct: bool
    prompt_tokens: int

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, d: dict) -> ExampleScore:
        return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class LengthScore:
    """Accuracy at one length, by depth bucket; or why the length failed (``error``).

    ``temperature``: the τ used (None: the model as it was).  ``temperature_set`` is False when the length
    failed before its τ was chosen (then the JSON has no ``temperature``).
    """

    length: int
    n: int
    temperature: Temperature = None
    temperature_set: bool = True
    correct: int | None = None
    accuracy: float | None = None
    mean_prompt_tokens: float | None = None
    seconds: float | None = None
    by_depth: tuple[DepthBucket, ...] = ()
    error: str | None = None

    def to_json(self) -> dict:
        out: dict = {"length": self.length, "n": self.n}
        if self.temperature_set:
            out["temperature"] = _tau_json(self.temperature)
        if self.error is not None:
            return {**out, "error": self.error, "seconds": self.seconds}
        return {
            **out,
            "correct": self.correct,
            "accuracy": self.accuracy,
            "mean_prompt_tokens": self.mean_prompt_tokens,
            "seconds": self.seconds,
            "by_depth": [b.to_json() for b in self.by_depth],
        }

    @classmethod
    def from_json(cls, d: dict) -> LengthScore:
        return cls(
            length=d["length"],
            n=d["n"],
            temperature=_tau_of(d.get("temperature")),
            temperature_set="temperature" in d,
            correct=d.get("correct"),
            accuracy=d.get("accuracy"),
            mean_prompt_tokens=d.get("mean_prompt_tokens"),
            seconds=d.get("seconds"),
            by_depth=tuple(DepthBucket.from_json(b) for b in d.get("by_depth") or ()),
            error=d.get("error"),
        )


@dataclass(frozen=True)
class TaskSettings:
    """What :func:`extrap.tasks.score_task` is asked (``extrap task score``'s options).

    ``filler``: a corpus spec, Corpus or Filler for the haystack text (default ``stdlib``; its ``split``).
    ``temperature``: None (leave the model as it is), a τ or one τ per layer, or ``"auto"`` /
    ``"auto:MODE"`` / ``"auto:per-layer"`` (004 Algorithm 1 per length, which needs ``train_length``).
    ``details``: one :class:`ExampleScore` per example.  ``progress``: one INFO log line per length.
    """

    task: str
    lengths: Sequence[int]
    n: int = 50
    seed: int = 0
    method: str = "greedy"  # greedy | rank
    temperature: Any = None
    train_length: int | None = None
    buckets: int = 5
    filler: Any = None
    split: str = "validation"
    batch: int = 4
    details: bool = False
    progress: bool = False


class EchoesSettings:
    """Base of a report that repeats its settings' ``ECHOED`` fields by the same names (task and RULER reports)."""

    ECHOED = ("method", "n", "seed", "buckets")

    @classmethod
    def echoing(cls, settings, **rest) -> Self:
        """The report with ``settings``' echoed fields and the fields ``rest``."""
        return cls(**{k: getattr(settings, k) for k in cls.ECHOED}, **rest)


@dataclass(frozen=True)
class TaskReport(EchoesSettings):
    """Exact-match accuracy of a model on a task: per length, per depth bucket, overall (and per example)."""

    task: str
    method: str
    n: int
    seed: int
    buckets: int
    tokenizer: str
    temperature: Temperature
    filler: str | None
    lengths: tuple[int, ...]
    accuracy: float | None  # over every scored length (None if all failed)
    results: tuple[LengthScore, ...]
    by_depth: tuple[DepthBucket, ...]  # over every scored length
    examples: tuple[ExampleScore, ...] | None = None  # with details

    def to_json(self) -> dict:
        out = {
            "task": self.task,
            "method": self.method,
            "n": self.n,
            "seed": self.seed,
            "buckets": self.buckets,
            "tokenizer": self.tokenizer,
            "temperature": _tau_json(self.temperature),
            "filler": self.filler,
            "lengths": list(self.lengths),
            "accuracy": self.accuracy,
            "results": [r.to_json() for r in self.results],
            "by_depth": [b.to_json() for b in self.by_depth],
        }
        if self.examples is not None:
            out["examples"] = [e.to_json() for e in self.examples]
        return out

    @classmethod
    def from_json(cls, d: dict) -> TaskReport:
        examples = d.get("examples")
        return cls(
            task=d["task"],
            method=d["method"],
            n=d["n"],
            seed=d["seed"],
            buckets=d["buckets"],
            tokenizer=d.get("tokenizer", ""),
            temperature=_tau_of(d.get("temperature")),
            filler=d.get("filler"),
            lengths=tuple(d.get("lengths") or (r["length"] for r in d.get("results") or ())),
            accuracy=d.get("accuracy"),
            results=tuple(LengthScore.from_json(r) for r in d.get("results") or ()),
            by_depth=tuple(DepthBucket.from_json(b) for b in d.get("by_depth") or ()),
            examples=None if examples is None else tuple(ExampleScore.from_json(e) for e in examples),
        )


RUN_KEYS = ("run", "pe", "train_length", "trained_on", "step")  # a scored run's JSON starts with these


@dataclass(frozen=True)
class ScoredRun:
    """A run scored on a task or a suite (and its provenance), and the report; ``REPORT`` is the report's type.

    Its JSON is the run's keys, the report's, then the run's provenance; its seed is the report's (the examples').
    """

    run: str
    pe: str
    train_length: int
    trained_on: str | None
    step: int | None
    report: Any
    provenance: dict = field(default_factory=dict)  # the run's (version, command, seed, corpus hash, ...)

    REPORT: ClassVar[Any] = None

    @classmethod
    def of(cls, run, report, train_length: int | None = None):
        """``report`` on ``run`` (a loaded run); ``train_length``: the run's own unless given."""
        L_tr = run.train_length if train_length is None else train_length
        head = dict(run=str(run.path), pe=run.pe, train_length=L_tr, trained_on=run.task, step=run.step)
        return cls(**head, report=report, provenance=run.provenance().to_json())

    def to_json(self) -> dict:
        head = {k: getattr(self, k) for k in RUN_KEYS}
        return {**head, **self.report.to_json(), **self.provenance, "seed": self.report.seed}

    @classmethod
    def from_json(cls, d: dict):
        report = cls.REPORT.from_json(d)
        known = {f.name for f in fields(cls)} | set(report.to_json())
        return cls(
            run=d["run"],
            pe=d["pe"],
            train_length=d["train_length"],
            trained_on=d.get("trained_on"),
            step=d.get("step"),
            report=report,
            provenance={k: v for k, v in d.items() if k not in known},
        )


@dataclass(frozen=True)
class TaskRun(ScoredRun):
    """``extrap task score --json``: the run scored (and its provenance), and the report."""

    report: TaskReport
    REPORT: ClassVar[Any] = TaskReport
