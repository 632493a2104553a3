"""What an experiment's plan hands the orchestrator: the request, the jobs, the study record and the errors.

Kept apart from :mod:`.orchestrator` (which runs a plan and writes the report) so that an experiment's
declaration (:mod:`extrap.experiments.protocol`) can name these types without importing the report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extrap.errors import ExtrapError
from extrap.results import StudyResults

STUDY_FILE = "study.json"


class StudyExistsError(ExtrapError):
    """The output folder already holds a study, and resuming it was not asked for."""


class StudyMismatchError(ExtrapError):
    """The output folder holds a study run with other settings."""

    def __init__(self, folder: Path, key: str, saved: Any):
        super().__init__(f"{folder}: the saved study used {key}={saved!r}")
        self.folder, self.key, self.saved = folder, key, saved


@dataclass(frozen=True)
class StudyRequest:
    """What ``extrap study`` was asked for; each experiment reads the settings it uses."""

    out: Path
    preset: str = "cpu"
    experiment: str = "extrapolation"
    pes: list[str] | None = None
    resume: bool = True
    jobs: int = 2  # jobs at a time
    delta: float = 0.02  # 000 Definition 0.1
    steps: int | None = None
    corpus: str | None = None
    tasks: list[str] | None = None
    device: str | None = None  # every job trains and measures there (None: train on cuda if any, measure on cpu)
    methods: list[str] | None = None  # the methods, where the experiment takes them (None: all)

    @property
    def threads(self) -> int:
        """Torch threads per job: one each when jobs run side by side."""
        return 1 if self.jobs > 1 else max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Job:
    name: str  # how progress lines and failures name it ("alibi", "passkey/t5")
    args: Any  # what the worker function gets (picklable: a frozen job spec, or a dict)


@dataclass
class Outcome:
    done: dict[str, Any] = field(default_factory=dict)  # job name -> the worker's output
    failures: dict[str, str] = field(default_factory=dict)  # job name -> why it failed


@dataclass(frozen=True)
class StudyRecord:
    """``study.json``: what a study folder was asked for, checked when the study is resumed.

    ``delta`` and ``tasks`` belong to some experiments only; each is written only where it is set, so
    the file reads as earlier versions wrote it.
    """

    preset: str
    experiment: str
    pes: tuple[str, ...]
    steps: int | None = None
    corpus: str | None = None
    device: str | None = None
    delta: float | None = None
    tasks: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        head = {"preset": self.preset, "experiment": self.experiment, "pes": list(self.pes)}
        head.update({"delta": self.delta} if self.delta is not None else {})
        head.update({"tasks": list(self.tasks)} if self.tasks is not None else {})
        return {**head, "steps": self.steps, "corpus": self.corpus, "device": self.device}

    @classmethod
    def from_json(cls, d: Any, where: str = STUDY_FILE) -> StudyRecord:
        if not isinstance(d, dict) or not isinstance(d.get("pes", []), list):
            raise ExtrapError(f"{where} is not a study record (a JSON object with a list of pes)")
        tasks = d.get("tasks")
        return cls(
            preset=str(d.get("preset")),
            experiment=str(d.get("experiment", "extrapolation")),
            pes=tuple(map(str, d.get("pes", []))),
            steps=d.get("steps"),
            corpus=d.get("corpus"),
            device=d.get("device"),
            delta=d.get("delta"),
            tasks=tuple(map(str, tasks)) if isinstance(tasks, list) else None,
        )

    @classmethod
    def asked(cls, request: StudyRequest, experiment: str, pes, *, delta: bool = True, tasks=None) -> StudyRecord:
        """What ``request`` asks of ``experiment`` (``delta``: whether the experiment records δ)."""
        return cls(request.preset, experiment, tuple(pes), steps=request.steps, corpus=request.corpus,
                   device=request.device, delta=request.delta if delta else None,
                   tasks=None if tasks is None else tuple(tasks))  # fmt: skip

    def value(self, key: str) -> Any:
        """A field as JSON shows it (tuples as lists), for comparisons and messages."""
        v = getattr(self, key)
        return list(v) if isinstance(v, tuple) else v


@dataclass
class Experiment:
    record: StudyRecord  # what study.json holds
    must_match: tuple[str, ...]  # record keys that a resumed study must share
    headline: str  # the first progress line
    worker: Callable[[Any], Any]
    jobs: list[Job]
    progress: Callable[[Any], str]  # the progress line of a finished job, from its output
    assemble: Callable[[Outcome], StudyResults]
