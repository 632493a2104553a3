"""``extrap study``: the paper's experiments end to end, resumable, with an HTML report.

Experiments (:data:`EXPERIMENTS`, from :mod:`extrap.experiments.registry`): each is a package
``extrap.experiments.<name>`` whose spec plans an :class:`~extrap.study.orchestrator.Experiment`;
:func:`run_study` hands it to the one
orchestrator (:mod:`.orchestrator`), which runs its jobs two at a time (one thread each:
the machine this is built for has two cores), resumes an interrupted study where it
stopped, and writes ``results.json`` (:class:`extrap.results.StudyResults`) and the report.
Presets are in :mod:`.presets`.
"""

from __future__ import annotations

import os
from pathlib import Path

from extrap.errors import ExtrapError
from extrap.experiments import registry
from extrap.results import StudyResults, slug
from extrap.run.directory import refuse_run_folder
from extrap.study.orchestrator import StudyExistsError, StudyMismatchError, StudyRequest, run_experiment, run_jobs

EXPERIMENTS = registry.names()


def run_study(
    out: str | os.PathLike,
    preset: str = "cpu",
    pes: list[str] | None = None,
    experiment: str = registry.DEFAULT,
    resume: bool = True,
    jobs: int = 2,
    delta: float | None = None,
    steps: int | None = None,
    corpus: str | None = None,
    tasks: list[str] | None = None,
    device: str | None = None,
    methods: list[str] | None = None,
) -> StudyResults:
    """Run (or resume) one experiment in folder ``out``; returns its results, also in ``out/results.json``.

    ``delta`` (δ of 000 Definition 0.1; None: 0.02), ``tasks`` and ``methods`` (None: all) go only to an
    experiment that declares the option (:attr:`~extrap.experiments.protocol.ExperimentSpec.options`).
    ``device`` (cpu, cuda, cuda:N): where every job trains and measures; None: training on cuda when
    available, evaluation on cpu."""
    spec = registry.get(experiment)
    if jobs < 1:
        raise ExtrapError("jobs must be >= 1")
    for option, value in (("tasks", tasks), ("methods", methods), ("delta", delta)):
        if value is not None and option not in spec.options:
            takers = [n for n in registry.names() if option in registry.get(n).options]
            raise ExtrapError(f"{option} is only for the {' and '.join(takers)} experiment{'s' * (len(takers) > 1)}")
    refuse_run_folder(out, "a study")  # before anything is written: a run's folder is the run's alone
    request = StudyRequest(
        out=Path(out),
        preset=preset,
        experiment=experiment,
        pes=pes,
        resume=resume,
        jobs=jobs,
        **({} if delta is None else {"delta": delta}),
        steps=steps,
        corpus=corpus,
        tasks=tasks,
        device=device,
        methods=methods,
    )
    return run_experiment(spec.plan(request), request, spec.results)


__all__ = [
    "EXPERIMENTS",
    "StudyExistsError",
    "StudyMismatchError",
    "StudyRequest",
    "run_jobs",
    "run_study",
    "slug",
]
