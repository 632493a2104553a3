"""The skeleton of an experiment that trains one model per PE on a task mix and then measures it.

Several experiments share it: the job a worker receives (:class:`ModelJob`), what it
hands back (:class:`ModelOutput`), the checks before anything is trained (:func:`preset_settings`,
:func:`check_pes`) and the shared sections of ``results.json`` (:func:`model_results`).  Each experiment adds
its own settings record, its measurement and its own block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from extrap.errors import ExtrapError
from extrap.results import EvalReport, StudyResults
from extrap.run.records import TrainingSummary
from extrap.study.learning import learning_gate
from extrap.study.orchestrator import StudyRequest, provenance, run_summary
from extrap.study.task_training import TaskTraining


@dataclass(frozen=True)
class ModelJob:
    """One model of an experiment, as a worker process receives it (picklable).

    ``settings``: the experiment's preset record; it has ``train_preset``, ``train_length``, ``steps``,
    ``multiples``, ``task_mix`` and ``train_overrides``."""

    pe: str
    run_dir: str
    settings: Any
    delta: float  # δ of 000 Definition 0.1
    threads: int  # torch threads of the worker
    corpus: str | None = None  # the study's corpus (None: the preset's)
    device: str | None = None  # where it trains and measures (None: the training preset's, cpu to load)

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(self.settings.train_length * k for k in self.settings.multiples)

    def training(self, task: str) -> TaskTraining:
        """How to train the model on ``task`` (one, or a comma-separated mix) beside language modelling."""
        s = self.settings
        return TaskTraining(self.run_dir, self.pe, s.train_preset, task, s.task_mix, s.train_length, s.steps,
                            s.train_overrides, self.corpus, self.device, self.threads)  # fmt: skip


@dataclass(frozen=True)
class ModelOutput:
    """What a worker hands back: its run, its training summary, the evaluation report and the model's record."""

    pe: str
    run_dir: str
    train: TrainingSummary | None
    report: EvalReport
    model: Any  # the experiment's record of the model (to_json / from_json)

    def to_json(self) -> dict:
        train = self.train.to_json() if self.train is not None else None
        head = {"pe": self.pe, "run_dir": self.run_dir, "train": train}
        return {**head, "report": self.report.to_json(), "model": self.model.to_json()}

    @classmethod
    def from_json(cls, d: dict, model: type) -> ModelOutput:
        """``model``: the record type of the experiment's ``model`` (its ``from_json`` reads it)."""
        train = TrainingSummary.from_json(d["train"]) if d.get("train") else None
        return cls(d["pe"], d["run_dir"], train, EvalReport.from_json(d["report"]), model.from_json(d["model"]))


def preset_settings(presets: Mapping[str, Any], name: str) -> Any:
    """The experiment's settings for preset ``name``; an unknown one is refused with the choices."""
    if name not in presets:
        raise ExtrapError(f"unknown preset {name!r} (choose from {', '.join(presets)})")
    return presets[name]


def check_pes(experiment: str, pes: Sequence[str]) -> None:
    """Every spec must be in the PE registry before anything is trained (options such as p= included)."""
    from extrap import positional

    for pe in pes:
        try:
            positional.get(pe)
        except ExtrapError as e:
            raise ExtrapError(f"{experiment}: {pe}: {e}") from None


def model_results(
    request: StudyRequest,
    experiment: str,
    outputs: Sequence[Any],
    protocol: str,
    train_length: int,
    lengths: list[int],
    **sections: Any,
) -> StudyResults:
    """``results.json`` of models trained at ``train_length``, each evaluated with one ``protocol``.

    ``outputs`` have ``pe``, ``run_dir``, ``train`` and ``report`` (of evaluation ``protocol``, read by the
    learning gate); ``sections``: as :func:`trained_results`."""
    trained = {o.pe: (o.run_dir, o.train) for o in outputs}
    evals = {o.pe: {protocol: o.report} for o in outputs if o.report is not None}
    return trained_results(request, experiment, trained, evals, train_length, lengths, **sections)


def trained_results(
    request: StudyRequest,
    experiment: str,
    trained: Mapping[str, tuple[str, TrainingSummary | None]],
    evals: Mapping[str, Mapping[str, EvalReport]],
    train_length: int,
    lengths: list[int],
    **sections: Any,
) -> StudyResults:
    """``results.json``'s shared sections: provenance, the runs, the reports and the learning gate.

    ``trained``: {pe: (run folder, its training summary)}, in the study's order; ``evals``: {pe: {protocol:
    report}}; ``sections``: the rest (``pes``, ``n_head``, ``settings``, ``failures``, the experiment's
    ``block``, ...)."""
    run_dirs = [run_dir for run_dir, _ in trained.values()]
    return StudyResults(
        preset=request.preset,
        experiment=experiment,
        train_length=train_length,
        lengths=lengths,
        delta=request.delta,
        **asdict(provenance(run_dirs)),
        runs={pe: run_summary(run_dir, train, request.out) for pe, (run_dir, train) in trained.items()},
        eval={pe: dict(reports) for pe, reports in evals.items()},
        learning=learning_gate(evals, run_dirs[0] if run_dirs else None, train_length),
        **sections,
    )
