"""The one orchestrator of every study experiment: its folder, its jobs, resuming, failures and the results.

An :class:`Experiment` says what to run: its jobs and the worker function that runs one
(module-level, so that spawned processes can import it), what the study folder records
about it (``study.json``) and how the workers' outputs become a
:class:`extrap.results.StudyResults`.  :func:`run_experiment` does the rest the same way
for every experiment: it claims the folder (or resumes it when its settings match), runs
the jobs ``workers`` at a time, collects the failures without losing the other jobs,
and hands the results to the report.  Workers skip every stage whose result their run
folder has recorded, so a resumed study trains and measures only what is missing.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from logging.handlers import QueueHandler, QueueListener
from pathlib import Path
from typing import Any

from extrap.errors import ExtrapError
from extrap.io import atomic_write_json, run_metadata
from extrap.results import ResultsBlock, RunSummary, StudyHost, StudyResults, StudyTraining, save_results
from extrap.run.records import TrainingSummary
from extrap.study.plan import (
    STUDY_FILE,
    Experiment,
    Job,
    Outcome,
    StudyExistsError,
    StudyMismatchError,
    StudyRecord,
    StudyRequest,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StudyProvenance:
    """Version and command of a study; seed, corpus and its hash from its first run (None without runs)."""

    seed: int | None
    corpus_hash: str | None
    extrap_version: str
    command: str
    corpus: str | None
    created: str  # UTC, ISO 8601 to the second


def saved_record(out: Path) -> StudyRecord | None:
    """What ``out/study.json`` recorded about the study there, or None (no study, or unreadable)."""
    try:
        return StudyRecord.from_json(json.loads((out / STUDY_FILE).read_text()))
    except (OSError, ValueError, ExtrapError):
        return None


def claim_folder(out: Path, exp: Experiment, resume: bool) -> None:
    """Record the study in ``out/study.json``; an existing one must be resumed with the same settings."""
    path = out / STUDY_FILE
    if path.exists():
        if not resume:
            raise StudyExistsError(f"{out} already holds a study")
        try:
            prev = StudyRecord.from_json(json.loads(path.read_text()), str(path))
        except ValueError:
            raise ExtrapError(f"{path} is corrupt (not JSON)") from None
        for key in exp.must_match:
            if prev.value(key) != exp.record.value(key):
                raise StudyMismatchError(out, key, prev.value(key))
    atomic_write_json(path, exp.record.to_json())


class _ParentLoggers(logging.Handler):
    """Hands a worker's log record to the logger of the same name here, so the command's handlers show it."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


def forward_logs(queue, level: int) -> None:
    """In a spawned worker: extrap's log records go to the parent through ``queue``."""
    logger = logging.getLogger("extrap")
    logger.handlers[:] = [QueueHandler(queue)]
    logger.setLevel(level)
    logger.propagate = False


def run_jobs(
    fn: Callable[[Any], Any], jobs: list[Job], workers: int, collect: Callable[[Job, Callable[[], Any]], None]
) -> None:
    """Run ``fn(job.args)`` for every job, ``workers`` at a time in spawned processes; ``collect(job, get_output)``."""
    if workers == 1 or len(jobs) == 1:
        for job in jobs:
            collect(job, lambda job=job: fn(job.args))
        return
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    listener = QueueListener(queue, _ParentLoggers())
    listener.start()
    try:
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=ctx,
            initializer=forward_logs,
            initargs=(queue, logging.getLogger("extrap").getEffectiveLevel()),
        ) as pool:
            futures = {pool.submit(fn, job.args): job for job in jobs}
            for fut in as_completed(futures):
                collect(futures[fut], fut.result)
    finally:
        listener.stop()
        queue.close()


def run_experiment(exp: Experiment, request: StudyRequest, block: ResultsBlock | None = None) -> StudyResults:
    """Run an experiment's jobs in ``request.out`` (resuming what is there) and write its results and report;
    ``block``: the experiment's own block of results.json (its spec's ``results``), for results.csv."""
    resumed = (request.out / STUDY_FILE).exists()
    claim_folder(request.out, exp, request.resume)
    t_start = time.perf_counter()
    log.info(exp.headline)
    outcome = Outcome()

    def collect(job: Job, get: Callable[[], Any]) -> None:
        try:
            output = get()
        except Exception as e:  # one job failing must not lose the others
            outcome.failures[job.name] = str(e) if isinstance(e, ExtrapError) else f"{type(e).__name__}: {e}"
            log.warning("  %s: failed: %s", job.name, outcome.failures[job.name])
            return
        outcome.done[job.name] = output
        log.info("  %s: %s", job.name, exp.progress(output))

    run_jobs(exp.worker, exp.jobs, request.jobs, collect)
    host = StudyHost(os.cpu_count(), request.threads, request.jobs, request.device, resumed)
    return finish(request.out, exp.assemble(outcome), t_start, host, block)


def trained_models(out: Path, results: StudyResults) -> StudyTraining | None:
    """The models' shape and training, from the first run's configuration (None without a readable run)."""
    from extrap.run import RunDir

    for pe in results.runs:
        path = results.run_path(pe, out)
        try:
            cfg = RunDir(path).read_config() if path is not None else None
        except (OSError, ExtrapError, ValueError):  # a half-written run folder: try the next
            continue
        if cfg is not None:
            m, t = cfg.model, cfg.train
            return StudyTraining(
                m.n_layer, m.d_model, m.n_head, t.steps, t.batch_size, t.train_length, cfg.tokenizer, cfg.corpus
            )
    return None


def finish(
    out: Path, results: StudyResults, t_start: float, host: StudyHost | None = None, block: ResultsBlock | None = None
) -> StudyResults:
    """Claims, results.json (and results.csv) and report.html: the last step of every experiment."""
    from extrap.report import compute_claims, write_report
    from extrap.results.tables import study_table, write_csv

    results.claims = compute_claims(results)
    results.host, results.training = host, trained_models(out, results)
    results.seconds = time.perf_counter() - t_start
    save_results(results, out)
    write_csv(out / "results.csv", study_table(results, block))  # the same records, one row each, for spreadsheets
    log.info("study: report -> %s", write_report(results, out))
    return results


def provenance(run_dirs: list[str]) -> StudyProvenance:
    """Version and command of this study; seed, corpus and its hash from its first run (None without runs)."""
    from extrap.run import RunDir

    meta = run_metadata(None, None)
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if run_dirs:
        cfg = RunDir(run_dirs[0]).read_config()
        meta.update(seed=cfg.seed, corpus_hash=cfg.corpus_hash)
        return StudyProvenance(**meta, corpus=cfg.train.corpus, created=created)
    return StudyProvenance(**meta, corpus=None, created=created)


def run_summary(run_dir: str, final: TrainingSummary | None, out: Path) -> RunSummary:
    """A trained run as the results list it: its folder relative to the study, loss, time and size."""
    return RunSummary(
        run_dir=os.path.relpath(run_dir, out),
        final_loss=final.final_loss if final else None,
        seconds=final.seconds if final else None,
        params=final.params if final else None,
    )
