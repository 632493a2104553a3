"""The records of the effective-length study's workers: the job a worker receives and what it hands back."""

from __future__ import annotations

from dataclasses import dataclass

from extrap.results import EvalReport
from extrap.results.effective_length import EffectiveLengthModel
from extrap.run.records import TrainingSummary
from extrap.study.presets import EffectiveLengthSettings


@dataclass(frozen=True)
class EffectiveLengthJob:
    """One model of the experiment, as a worker process receives it (picklable)."""

    pe: str
    run_dir: str
    settings: EffectiveLengthSettings  # its ``tasks`` are the study's (``tasks=`` applied)
    delta: float  # δ of 000 Definition 0.1
    threads: int  # torch threads of the worker
    corpus: str | None = None  # the study's corpus (None: the preset's)
    device: str | None = None  # where it trains and measures (None: the training preset's, cpu to load)

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(self.settings.train_length * k for k in self.settings.multiples)


@dataclass(frozen=True)
class EffectiveLengthOutput:
    """What a worker hands back: its run, its training summary, the perplexity report and the model's record."""

    pe: str
    run_dir: str
    train: TrainingSummary | None
    report: EvalReport
    model: EffectiveLengthModel

    def to_json(self) -> dict:
        train = self.train.to_json() if self.train is not None else None
        head = {"pe": self.pe, "run_dir": self.run_dir, "train": train}
        return {**head, "report": self.report.to_json(), "model": self.model.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> EffectiveLengthOutput:
        train = TrainingSummary.from_json(d["train"]) if d.get("train") else None
        report, model = EvalReport.from_json(d["report"]), EffectiveLengthModel.from_json(d["model"])
        return cls(d["pe"], d["run_dir"], train, report, model)
