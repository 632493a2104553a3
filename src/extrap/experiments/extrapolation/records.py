"""What a worker of experiments ``extrapolation`` and ``alibi-slopes`` receives and hands back (picklable)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extrap.erf import RunErf
from extrap.evaluate.settings import EvalSettings
from extrap.results import EvalReport
from extrap.run.records import TrainingSummary
from extrap.study.trained import TrainedTheory


@dataclass(frozen=True)
class PeJob:
    """One PE of an extrapolation or ALiBi-slope study: what its worker trains and measures (picklable)."""

    pe: str
    run_dir: str
    preset: str  # the training preset
    overrides: Mapping[str, Any]  # training settings over the preset's (steps, corpus)
    multiples: tuple[int, ...]  # evaluation lengths, as multiples of L_tr
    eval_tokens: int | None
    targets: int
    erf_multiple: int
    erf_segments: int
    delta: float  # δ of 000 Definition 0.1
    threads: int

    def eval_settings(self, train_length: int, protocol: str) -> EvalSettings:
        lengths = tuple(train_length * k for k in self.multiples)
        return EvalSettings(lengths, protocol, tokens=self.eval_tokens, targets=self.targets, delta=self.delta)


@dataclass(frozen=True)
class PeOutput:
    """What one PE's worker measured: its training summary (final.json), every protocol's evaluation,
    its receptive fields (``extrap erf``'s JSON) and its trained theory rows."""

    pe: str
    run_dir: str
    train: TrainingSummary | None
    eval: Mapping[str, EvalReport]  # {protocol: report}
    erf: RunErf
    theory: TrainedTheory

    def to_json(self) -> dict:
        reports = {p: rep.to_json() for p, rep in self.eval.items()}
        train = self.train.to_json() if self.train is not None else None
        head = {"pe": self.pe, "run_dir": self.run_dir, "train": train, "eval": reports}
        return {**head, "erf": self.erf.to_json(), "theory": self.theory.to_json()}
