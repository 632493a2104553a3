"""The records of the fine-tuned extension study's worker: the job it receives and what it hands back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extrap.experiments.finetune_extension.methods import FtMethod
from extrap.experiments.finetune_extension.presets import FinetuneSettings
from extrap.experiments.finetune_extension.results import FtResult
from extrap.results import EvalReport
from extrap.run.records import TrainingSummary
from extrap.study.models import ModelJob


@dataclass(frozen=True)
class FtJob:
    """The base (trained as rope-base trains it), the methods made from it and where their runs go."""

    training: ModelJob
    settings: FinetuneSettings
    methods: tuple[FtMethod, ...]
    runs: str  # folder of the fine-tunes (one run folder each)
    lr: float  # the fine-tunes' peak learning rate
    warmup: int


@dataclass(frozen=True)
class FtOutput:
    """The base's run, training and last-token report (the learning gate reads it), and every method."""

    pe: str
    run_dir: str
    train: TrainingSummary | None
    report: EvalReport | None
    methods: Mapping[str, FtResult] = field(default_factory=dict)
    failures: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "pe": self.pe, "run_dir": self.run_dir, "train": self.train.to_json() if self.train else None,
            "report": self.report.to_json() if self.report else None,
            "methods": {n: m.to_json() for n, m in self.methods.items()}, "failures": dict(self.failures),
        }  # fmt: skip

    @classmethod
    def from_json(cls, d: dict) -> FtOutput:
        train = TrainingSummary.from_json(d["train"]) if d.get("train") else None
        report = EvalReport.from_json(d["report"]) if d.get("report") else None
        methods = {str(n): FtResult.from_json(m) for n, m in (d.get("methods") or {}).items()}
        return cls(d["pe"], d["run_dir"], train, report, methods, dict(d.get("failures") or {}))
