"""Experiment ``extension``: training-free ways to read a RoPE model past L_tr, measured side by side.

One RoPE model is trained at L_tr with passkey examples in its mix, as the rope-base study trains its
models (:func:`extrap.study.rope_base.trained_run`, the same code and settings), so that it both models
text and retrieves at L_tr.  It is then read with every method of :mod:`.extension_methods` (the model as
trained, five frequency scalings, seven training-free extensions and a window) at L_tr × 1, 2, 4, 8, 16,
and each method is measured by :mod:`.extension_measure`: last-token perplexity with its standard error
and the measured break, passkey accuracy and its fall-off, beside the length the theory keeps in
distribution.  The report (:mod:`extrap.report.extension`) judges "methods that keep every distance within
L_tr keep PPL flat" and "a window without sinks breaks a RoPE model where sinks plus the same window do not".

The run folder ``runs/<pe>/`` keeps the training and one ``extension-<method>`` result per method; a
finished one is not computed again.  ``none`` (the model as trained) is always measured: it is the
reference and its loss at L_tr is what the learning gate reads.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, replace

from extrap.errors import ExtrapError
from extrap.results import EvalReport, StudyResults, slug
from extrap.results.extension import ExtensionBlock, ExtensionMethod
from extrap.run import RunDir
from extrap.study.extension_measure import PROTOCOL, MethodJob, measure_method
from extrap.study.extension_methods import check_methods
from extrap.study.extension_records import ExtensionJob, ExtensionOutput
from extrap.study.learning import learning_gate
from extrap.study.orchestrator import (
    Experiment,
    Job,
    Outcome,
    StudyRecord,
    StudyRequest,
    provenance,
    run_jobs,
    run_summary,
)
from extrap.study.presets import EXTENSION_METHODS, EXTENSION_PRESETS, ExtensionSettings
from extrap.study.rope_base import trained_run

log = logging.getLogger(__name__)
REPORT = f"eval-{PROTOCOL}"


def result_name(method: str) -> str:
    return f"extension-{slug(method)}"


def method_jobs(job: ExtensionJob, rd: RunDir) -> list[Job]:
    """The methods whose result the run folder has not recorded."""
    t, s = job.training, job.training.settings
    todo = [m for m in job.methods if not rd.has_result(result_name(m))]
    spec = MethodJob("", str(rd.path), s.train_length, job.lengths, s.targets, s.passkey_n, t.delta,
                     s.fall_fraction, job.threads, t.device)  # fmt: skip
    return [Job(m, replace(spec, name=m)) for m in todo]


def extension_job(job: ExtensionJob) -> ExtensionOutput:
    """Train the model (if its run is not finished), then measure every method not yet recorded."""
    import torch

    torch.set_num_threads(job.training.threads)
    rd = trained_run(job.training)
    failures: dict[str, str] = {}

    def collect(j: Job, get) -> None:
        try:
            record, report = get()
        except Exception as e:  # one method failing must not lose the others
            failures[j.name] = str(e) if isinstance(e, ExtrapError) else f"{type(e).__name__}: {e}"
            log.warning("  %s: failed: %s", j.name, failures[j.name])
            return
        rd.write_result(result_name(j.name), record)
        if j.name == "none":
            rd.write_result(REPORT, report)
        log.info("  %s: break at %s, passkey falls at %s", j.name, record.measured_break, record.passkey_falloff)

    run_jobs(measure_method, method_jobs(job, rd), job.workers, collect)
    methods = {m: rd.read_result(result_name(m), ExtensionMethod) for m in job.methods if m not in failures}
    return ExtensionOutput(
        job.training.pe, str(rd.path), rd.read_final(), rd.read_result(REPORT, EvalReport),
        {m: r for m, r in methods.items() if r is not None}, failures,
    )  # fmt: skip


def progress_line(out: ExtensionOutput) -> str:
    loss = out.train.final_loss if out.train is not None else float("nan")
    return f"training loss {loss:.4f}; {len(out.methods)} methods measured, {len(out.failures)} failed"


def assemble(request: StudyRequest, settings: ExtensionSettings, methods: tuple, heads: int, outcome: Outcome):
    """results.json: the model's own last-token report, the learning gate and every method's record."""
    s, pe = settings.model, settings.pe
    out: ExtensionOutput | None = outcome.done.get(pe)
    L_tr, lengths = s.train_length, [s.train_length * k for k in s.multiples]
    evals = {pe: {PROTOCOL: out.report}} if out is not None and out.report is not None else {}
    block = ExtensionBlock(
        pe=pe, train_length=L_tr, lengths=tuple(lengths), delta=request.delta, fall_fraction=s.fall_fraction,
        passkey_n=s.passkey_n, targets=s.targets,
        methods={m: out.methods[m] for m in methods if out is not None and m in out.methods},
    )  # fmt: skip
    failures = dict(outcome.failures) | ({f"{pe}/{m}": why for m, why in out.failures.items()} if out else {})
    return StudyResults(
        preset=request.preset,
        experiment="extension",
        pes=[pe],
        train_length=L_tr,
        n_head=heads,
        lengths=lengths,
        delta=request.delta,
        **asdict(provenance([out.run_dir] if out is not None else [])),
        settings={**asdict(settings), "methods": list(methods)},
        runs={pe: run_summary(out.run_dir, out.train, request.out)} if out is not None else {},
        eval=evals,
        learning=learning_gate(evals, out.run_dir if out is not None else None, L_tr),
        extension=block,
        failures=failures,
    )


def build(request: StudyRequest) -> Experiment:
    """Experiment ``extension``, checked before anything is trained."""
    from extrap.config import build_configs
    from extrap.study.rope_base_records import RopeBaseJob

    if request.preset not in EXTENSION_PRESETS:
        raise ExtrapError(f"unknown preset {request.preset!r} (choose from {', '.join(EXTENSION_PRESETS)})")
    if request.pes is not None:
        raise ExtrapError("the extension experiment trains one RoPE model: PEs are not chosen")
    settings = EXTENSION_PRESETS[request.preset]
    s = replace(settings.model, steps=settings.model.steps if request.steps is None else request.steps)
    settings = replace(settings, model=s)
    methods = check_methods(("none", *(request.methods or EXTENSION_METHODS)))
    model_cfg, _ = build_configs(settings.pe, s.train_preset, overrides=dict(s.train_overrides))
    cores = os.cpu_count() or 1
    train_threads = cores if request.jobs == 1 else min(request.jobs, cores)  # one job: training has every core
    run_dir = str(request.out / "runs" / slug(settings.pe))
    training = RopeBaseJob(settings.pe, run_dir, s, request.delta, train_threads, request.corpus, request.device)
    job = ExtensionJob(training, methods, request.jobs, request.threads)
    return Experiment(
        record=StudyRecord(
            request.preset,
            "extension",
            (settings.pe,),
            steps=request.steps,
            corpus=request.corpus,
            device=request.device,
            delta=request.delta,
        ),  # fmt: skip
        must_match=("preset", "experiment", "delta", "steps", "corpus"),  # other methods may join: one result each
        headline=f"study extension: {settings.pe} at L_tr={s.train_length}, preset {request.preset}, methods "
        f"{', '.join(methods)}, lengths L_tr x {list(s.multiples)}, {request.jobs} at a time -> {request.out}",
        worker=extension_job,
        jobs=[Job(settings.pe, job)],
        progress=progress_line,
        assemble=lambda outcome: assemble(request, settings, methods, model_cfg.n_head, outcome),
    )
