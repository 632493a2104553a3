"""Experiment ``extension``: training-free ways to read a RoPE model past L_tr, measured side by side.

One RoPE model is trained at L_tr with passkey examples in its mix, as the rope-base study trains its
models (:func:`extrap.experiments.rope_base.plan.trained_run`, the same code and settings), so that it both models
text and retrieves at L_tr.  It is then read with every method of :mod:`.methods` (the model as
trained, five frequency scalings, seven training-free extensions and a window) at L_tr × 1, 2, 4, 8, 16,
and each method is measured by :mod:`.measure`: last-token perplexity with its standard error
and the measured break, passkey accuracy and its fall-off, beside the length the theory keeps in
distribution.  The report (:mod:`.claims`) judges "methods that keep every distance within
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
from extrap.experiments.extension.about import METHODS
from extrap.experiments.extension.measure import PROTOCOL, MethodJob, measure_method
from extrap.experiments.extension.methods import check_methods
from extrap.experiments.extension.presets import PRESETS, ExtensionSettings
from extrap.experiments.extension.records import ExtensionJob, ExtensionOutput
from extrap.experiments.extension.results import RESULTS, ExtensionBlock, ExtensionMethod
from extrap.experiments.rope_base.plan import trained_run
from extrap.results import EvalReport, slug
from extrap.run import RunDir
from extrap.study.models import ModelJob, model_results, preset_settings
from extrap.study.orchestrator import Experiment, Job, Outcome, StudyRecord, StudyRequest, run_jobs

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
    block = ExtensionBlock(
        pe=pe, train_length=L_tr, lengths=tuple(lengths), delta=request.delta, fall_fraction=s.fall_fraction,
        passkey_n=s.passkey_n, targets=s.targets,
        methods={m: out.methods[m] for m in methods if out is not None and m in out.methods},
    )  # fmt: skip
    failures = dict(outcome.failures) | ({f"{pe}/{m}": why for m, why in out.failures.items()} if out else {})
    settings_json = {**asdict(settings), "methods": list(methods)}
    return model_results(request, "extension", [out] if out is not None else [], PROTOCOL, L_tr, lengths,
                         pes=[pe], n_head=heads, settings=settings_json,
                         extra=RESULTS.entry(block), failures=failures)  # fmt: skip


def build(request: StudyRequest) -> Experiment:
    """Experiment ``extension``, checked before anything is trained."""
    from extrap.config import build_configs

    settings = preset_settings(PRESETS, request.preset)
    if request.pes is not None:
        raise ExtrapError("the extension experiment trains one RoPE model: PEs are not chosen")
    s = replace(settings.model, steps=settings.model.steps if request.steps is None else request.steps)
    settings = replace(settings, model=s)
    methods = check_methods(("none", *(request.methods or METHODS)))
    model_cfg, _ = build_configs(settings.pe, s.train_preset, overrides=dict(s.train_overrides))
    cores = os.cpu_count() or 1
    train_threads = cores if request.jobs == 1 else min(request.jobs, cores)  # one job: training has every core
    run_dir = str(request.out / "runs" / slug(settings.pe))
    training = ModelJob(settings.pe, run_dir, s, request.delta, train_threads, request.corpus, request.device)
    job = ExtensionJob(training, methods, request.jobs, request.threads)
    return Experiment(
        record=StudyRecord.asked(request, "extension", (settings.pe,)),
        must_match=("preset", "experiment", "delta", "steps", "corpus"),  # other methods may join: one result each
        headline=f"study extension: {settings.pe} at L_tr={s.train_length}, preset {request.preset}, methods "
        f"{', '.join(methods)}, lengths L_tr x {list(s.multiples)}, {request.jobs} at a time -> {request.out}",
        worker=extension_job,
        jobs=[Job(settings.pe, job)],
        progress=progress_line,
        assemble=lambda outcome: assemble(request, settings, methods, model_cfg.n_head, outcome),
    )
