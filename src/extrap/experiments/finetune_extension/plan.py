"""Experiment ``finetune-extension``: extend a RoPE model as the field does, a short fine-tune per method under
one budget (LCEG, Lu et al. 2024), beside training-free methods on the base.

The base is the extension experiment's RoPE model, trained at L_tr with passkey in its mix by rope-base's code
(:func:`extrap.experiments.rope_base.plan.trained_run`) in ``runs/<pe>/``, the extension study's folder: a
finished base there (an extension study's, copied or in the same folder) is used as it is.  Each fine-tune
starts from its weights (:func:`extrap.train.train` with ``init_from``) in ``runs/finetune-<method>/``, on the
same stream, seed and task mix with the same token budget; each method's record is kept in the base's run folder
(``finetune-<method>`` result) and not computed again.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, replace

from extrap.errors import ExtrapError
from extrap.experiments.finetune_extension.about import METHODS
from extrap.experiments.finetune_extension.measure import PROTOCOL, MeasureJob, measure_method
from extrap.experiments.finetune_extension.methods import FtMethod, check_methods, make_method
from extrap.experiments.finetune_extension.presets import PRESETS
from extrap.experiments.finetune_extension.records import FtJob, FtOutput
from extrap.experiments.finetune_extension.results import RESULTS, FinetuneBlock, FtResult
from extrap.experiments.rope_base.plan import trained_run
from extrap.results import EvalReport, slug
from extrap.run import RunDir
from extrap.study.models import ModelJob, model_results, preset_settings
from extrap.study.orchestrator import Experiment, Job, Outcome, StudyRecord, StudyRequest

log = logging.getLogger(__name__)
REPORT = f"eval-{PROTOCOL}"


def result_name(method: str) -> str:
    return f"finetune-{slug(method)}"


def finetuned(job: FtJob, base: RunDir, m: FtMethod) -> RunDir:
    """The fine-tune's run folder, trained from the base (or resumed) if it is not finished."""
    from extrap import train as training

    t, s = job.training, job.training.settings
    rd = RunDir(os.path.join(job.runs, f"finetune-{slug(m.name)}"))
    if not rd.is_finished():
        warmup = max(1, round(job.settings.warmup * m.steps))  # then cosine: the fine-tune ends at 0.1 × its peak
        over = {**s.train_overrides, "task": "passkey", "task_mix": s.task_mix, "train_length": m.train_length,
                "steps": m.steps, "lr": job.lr, "warmup": warmup, "positions": m.positions, "attention": m.attention,
                "save_every": m.steps, "threads": t.threads,
                **({"corpus": t.corpus} if t.corpus else {}), **({"device": t.device} if t.device else {})}  # fmt: skip
        mc, tc = training.build_configs(m.pe, s.train_preset, overrides=over)
        log.info("  %s: fine-tuning %d steps at %d from %s", m.name, tc.steps, tc.train_length, base.path)
        start = None if rd.exists() else training.InitFrom(str(base.path))
        training.train(rd.path, mc, tc, resume=rd.exists(), progress=False, init_from=start)
    return rd


def source(job: FtJob, base: RunDir, m: FtMethod) -> tuple[str, float | None]:
    """The run the method reads (trained first if needed) and its fine-tune's final loss."""
    if m.kind == "base":
        return str(base.path), None
    made = m if m.kind == "finetune" else next(x for x in job.methods if x.name == m.of)
    rd = finetuned(job, base, made)
    final = rd.read_final()
    return str(rd.path), (final.final_loss if final is not None and m.kind == "finetune" else None)


def measure_job(job: FtJob, m: FtMethod, src: str) -> MeasureJob:
    s, t = job.settings, job.training
    b = t.settings
    return MeasureJob(m, src, b.train_length, t.lengths, b.targets, b.passkey_n, t.delta, b.fall_fraction,
                      s.ruler_n, s.ruler_buckets, s.eval_tokens, s.pose_target, t.device)  # fmt: skip


def base_report(rd: RunDir, job: FtJob) -> EvalReport:
    """The base's last-token report (the learning gate reads its loss at L_tr), evaluated once."""
    if not rd.has_result(REPORT):
        import extrap
        from extrap import evaluate
        from extrap.evaluate.settings import EvalSettings

        at = EvalSettings(job.training.lengths, PROTOCOL, targets=job.training.settings.targets)
        rd.write_result(REPORT, evaluate.evaluate_run(extrap.load(rd.path, job.training.device), at))
    return rd.read_result(REPORT, EvalReport)


def finetune_job(job: FtJob) -> FtOutput:
    """Train the base if needed, then make and measure every method not yet recorded (one failing keeps the rest)."""
    import torch

    torch.set_num_threads(job.training.threads)
    base = trained_run(job.training)
    failures: dict[str, str] = {}
    for m in job.methods:
        if base.has_result(result_name(m.name)):
            continue
        try:
            src, loss = source(job, base, m)
            record = measure_method(measure_job(job, m, src), loss)
        except Exception as e:  # one method failing must not lose the others
            failures[m.name] = str(e) if isinstance(e, ExtrapError) else f"{type(e).__name__}: {e}"
            log.warning("  %s: failed: %s", m.name, failures[m.name])
            continue
        base.write_result(result_name(m.name), record)
        log.info("  %s: break at %s, passkey falls at %s", m.name, record.measured_break, record.passkey_falloff)
    done = {m.name: base.read_result(result_name(m.name), FtResult) for m in job.methods if m.name not in failures}
    methods = {n: r for n, r in done.items() if r is not None}
    return FtOutput(job.training.pe, str(base.path), base.read_final(), base_report(base, job), methods, failures)


def progress_line(out: FtOutput) -> str:
    loss = out.train.final_loss if out.train is not None else float("nan")
    return f"base training loss {loss:.4f}; {len(out.methods)} methods measured, {len(out.failures)} failed"


def assemble(request: StudyRequest, job: FtJob, heads: int, outcome: Outcome):
    """results.json: the base's last-token report, the learning gate and every method's record."""
    s, b, pe = job.settings, job.training.settings, job.training.pe
    out: FtOutput | None = outcome.done.get(pe)
    block = FinetuneBlock(
        pe=pe, train_length=b.train_length, lengths=job.training.lengths, delta=request.delta,
        fall_fraction=b.fall_fraction, passkey_n=b.passkey_n, targets=b.targets, budget=s.budget,
        finetune_length=s.stretch * b.train_length,
        methods={m.name: out.methods[m.name] for m in job.methods if out is not None and m.name in out.methods},
    )  # fmt: skip
    failures = dict(outcome.failures) | ({f"{pe}/{m}": why for m, why in out.failures.items()} if out else {})
    settings_json = {
        **asdict(s),
        "methods": [m.name for m in job.methods],
        "as_run": {m.name: m.as_run for m in job.methods},
    }
    return model_results(request, "finetune-extension", [out] if out is not None else [], PROTOCOL, b.train_length,
                         list(job.training.lengths), pes=[pe], n_head=heads, settings=settings_json,
                         extra=RESULTS.entry(block), failures=failures)  # fmt: skip


def plan_job(request: StudyRequest) -> tuple[FtJob, int]:
    """The job (every method's spec parsed, its steps for the budget) and the base's heads; nothing written."""
    from extrap.config import build_configs

    settings = preset_settings(PRESETS, request.preset)
    if request.pes is not None:
        raise ExtrapError("the finetune-extension experiment fine-tunes one RoPE base: PEs are not chosen")
    b = replace(settings.base.model, steps=settings.base.model.steps if request.steps is None else request.steps)
    settings = replace(settings, base=replace(settings.base, model=b))
    names = check_methods(request.methods or METHODS)
    model_cfg, train_cfg = build_configs(settings.base.pe, b.train_preset, overrides=dict(b.train_overrides))
    batch = train_cfg.batch_size * train_cfg.grad_accum
    base_tokens = b.steps * batch * b.train_length
    methods = tuple(make_method(n, settings, settings.base.pe, base_tokens, batch) for n in names)
    cores = os.cpu_count() or 1
    threads = cores if request.jobs == 1 else min(request.jobs, cores)
    runs = request.out / "runs"
    training = ModelJob(settings.base.pe, str(runs / slug(settings.base.pe)), b, request.delta, threads,
                        request.corpus, request.device)  # fmt: skip
    job = FtJob(training, settings, methods, str(runs), train_cfg.lr * settings.lr_scale)
    return job, model_cfg.n_head


def build(request: StudyRequest) -> Experiment:
    """Experiment ``finetune-extension``, checked before anything is trained."""
    job, heads = plan_job(request)
    b, pe = job.training.settings, job.training.pe
    return Experiment(
        record=StudyRecord.asked(request, "finetune-extension", (pe,)),
        must_match=("preset", "experiment", "delta", "steps", "corpus"),
        headline=f"study finetune-extension: {pe} at L_tr={b.train_length}, preset {request.preset}, fine-tunes at "
        f"{job.settings.stretch} x L_tr on {job.settings.budget:g} of the base's tokens, methods "
        f"{', '.join(m.name for m in job.methods)}, lengths L_tr x {list(b.multiples)} -> {request.out}",
        worker=finetune_job,
        jobs=[Job(pe, job)],
        progress=progress_line,
        assemble=lambda outcome: assemble(request, job, heads, outcome),
    )
