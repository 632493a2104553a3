"""The records of the alignment study: a worker's job, what it finds at one length, and what it returns.

:class:`LengthRecord` is ``runs/<task>/<pe>/alignment/L<length>.json`` (``to_json`` writes exactly what
earlier versions wrote, ``from_json`` reads it back); :class:`AlignJob` is what a worker process receives and
:class:`AlignJobResult` what it hands back.  Tables keyed by mode, setting or method are dicts of typed values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extrap.align.records import Algorithm1, ClosedForms, LogLengthForm, Tau, read_closed_forms, tau_json, tau_of
from extrap.experiments.alignment.presets import AlignmentSettings
from extrap.run.records import TrainingSummary
from extrap.tasks.records import DepthBucket


@dataclass(frozen=True)
class AlignJob:
    """One (task, PE) of the study, as a worker process receives it."""

    task: str
    pe: str
    run_dir: str
    train_length: int  # the task's L_tr
    settings: AlignmentSettings
    corpus: str | None  # the study's corpus (None: the preset's)
    threads: int  # torch threads of the worker
    cap: int  # the longest length probed (beyond: the log-length rule)
    device: str | None = None  # where it trains and measures (None: the training preset's, cpu to load)


@dataclass(frozen=True)
class TauFindings:
    """τ of every mode at one length, where it came from, Algorithm 1's picks and the closed forms."""

    tau: dict[str, Tau]  # {mode: τ, or one per layer}
    source: dict[str, str]  # {mode: "L_tr" | "algorithm1" | "log-length (...)"}
    algorithm1: dict[str, Algorithm1] = field(default_factory=dict)  # {mode: its summary (no curves)}
    closed_forms: ClosedForms | LogLengthForm | None = None

    def to_json(self) -> dict:
        return {
            "tau": {m: tau_json(t) for m, t in self.tau.items()},
            "source": dict(self.source),
            "algorithm1": {m: a.to_json() for m, a in self.algorithm1.items()},
            "closed_forms": self.closed_forms.to_json() if self.closed_forms is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict) -> TauFindings:
        return cls(
            tau={m: tau_of(t) for m, t in (d.get("tau") or {}).items()},
            source=dict(d.get("source") or {}),
            algorithm1={m: Algorithm1.from_json(a) for m, a in (d.get("algorithm1") or {}).items()},
            closed_forms=read_closed_forms(d.get("closed_forms")),
        )


@dataclass(frozen=True)
class SettingScores:
    """Exact-match accuracy at one length without alignment and with each mode's τ, per scoring method."""

    accuracy: dict[str, dict[str, float | None]]  # {method: {setting: accuracy, None where it failed}}
    by_depth: dict[str, tuple[DepthBucket, ...]]  # {setting: greedy accuracy per depth bucket}
    errors: dict[str, str]  # {"setting/method": why it failed}
    seconds_method: dict[str, float]  # scoring time per method

    def to_json(self) -> dict:
        return {
            "accuracy": {m: dict(v) for m, v in self.accuracy.items()},
            "by_depth": {st: [b.to_json() for b in bs] for st, bs in self.by_depth.items()},
            "errors": dict(self.errors),
            "seconds_method": dict(self.seconds_method),
        }

    @classmethod
    def from_json(cls, d: dict) -> SettingScores:
        return cls(
            accuracy={m: dict(v) for m, v in (d.get("accuracy") or {}).items()},
            by_depth={st: tuple(DepthBucket.from_json(b) for b in bs) for st, bs in (d.get("by_depth") or {}).items()},
            errors=dict(d.get("errors") or {}),
            seconds_method=dict(d.get("seconds_method") or {}),
        )


@dataclass(frozen=True)
class LengthRecord:
    """Everything measured at one length (``L<length>.json``): the τs, and the accuracies with their timings."""

    length: int
    found: TauFindings
    seconds_align: float
    scores: SettingScores
    seconds_score: float

    def to_json(self) -> dict:
        return {
            "length": self.length,
            **self.found.to_json(),
            "seconds_align": self.seconds_align,
            **self.scores.to_json(),
            "seconds_score": self.seconds_score,
        }

    @classmethod
    def from_json(cls, d: dict) -> LengthRecord:
        return cls(
            length=d["length"],
            found=TauFindings.from_json(d),
            seconds_align=d.get("seconds_align", 0.0),
            scores=SettingScores.from_json(d),
            seconds_score=d.get("seconds_score", 0.0),
        )


@dataclass(frozen=True)
class AlignJobResult:
    """What a worker hands back: its run, the run's training summary (final.json) and every length's record."""

    pe: str
    task: str
    run_dir: str
    train: TrainingSummary | None  # final.json of the trained run
    lengths: dict[str, LengthRecord]  # {length_key(L): record}

    @property
    def final_loss(self) -> float | None:
        return self.train.final_loss if self.train is not None else None
