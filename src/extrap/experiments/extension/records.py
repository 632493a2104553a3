"""The records of the extension study's worker: the job it receives and what it hands back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from extrap.experiments.extension.results import ExtensionMethod
from extrap.results import EvalReport
from extrap.run.records import TrainingSummary
from extrap.study.models import ModelJob


@dataclass(frozen=True)
class ExtensionJob:
    """The one model of the experiment (trained as rope-base trains it) and the methods to read it with."""

    training: ModelJob  # the model, its run folder and rope-base's settings (lengths, targets, passkey)
    methods: tuple[str, ...]
    workers: int  # methods measured at once (one thread each when more than one)
    threads: int  # torch threads per method

    @property
    def lengths(self) -> tuple[int, ...]:
        return self.training.lengths


@dataclass(frozen=True)
class ExtensionOutput:
    """What the worker hands back: the run, its training, the model's own last-token report and every method."""

    pe: str
    run_dir: str
    train: TrainingSummary | None
    report: EvalReport | None  # method none's last-token report: the learning gate reads its loss at L_tr
    methods: Mapping[str, ExtensionMethod] = field(default_factory=dict)
    failures: Mapping[str, str] = field(default_factory=dict)  # {method: why it failed}
    METHOD: ClassVar[type] = ExtensionMethod  # each method's record (a subclass reads its own)

    def to_json(self) -> dict:
        return {
            "pe": self.pe,
            "run_dir": self.run_dir,
            "train": self.train.to_json() if self.train is not None else None,
            "report": self.report.to_json() if self.report is not None else None,
            "methods": {n: m.to_json() for n, m in self.methods.items()},
            "failures": dict(self.failures),
        }

    @classmethod
    def from_json(cls, d: dict) -> ExtensionOutput:
        train = TrainingSummary.from_json(d["train"]) if d.get("train") else None
        report = EvalReport.from_json(d["report"]) if d.get("report") else None
        methods = {str(n): cls.METHOD.from_json(m) for n, m in (d.get("methods") or {}).items()}
        return cls(d["pe"], d["run_dir"], train, report, methods, dict(d.get("failures") or {}))
