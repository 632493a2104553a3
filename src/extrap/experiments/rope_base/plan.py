"""Experiment ``rope-base``: does RoPE break where its theory says?

Models with plain RoPE at bases 10^2 ... 10^6, p-RoPE (``rope:p=0.75``), partial rotary
(``rope:partial=0.5``) and NoPE are trained at L_tr with passkey examples in their mix (as the
alignment study trains: :mod:`extrap.tasks`, ``task_mix`` of language-modelling batches), so they
both model text and retrieve at L_tr.  At L_tr × 1, 2, 4, 8, 16 each is measured
(:mod:`.measure`): last-token perplexity with its standard error, and passkey accuracy by the
needle's distance from the query.  Beside the measured break and retrieval fall-off stand the
predictions of ``extrap theory rope`` for the same model (:func:`extrap.theory.rope.analyse_rope`):
the in-distribution length, Liu et al.'s from-scratch bound L_tr·β^(2/d) and Men et al.'s first
distance where B(m) < 0.  The report judges "from-scratch RoPE breaks before L_tr·β^(2/d)" and
"retrieval fails beyond Men's first negative distance" on the models that learned
(:mod:`.claims`).

Each model leaves ``runs/<pe>/`` with its training, ``eval-last-token`` and ``rope-base`` results;
a finished result is not computed again.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from extrap.experiments.rope_base import measure
from extrap.experiments.rope_base.about import DEFAULT_PES
from extrap.experiments.rope_base.presets import PRESETS, RopeBaseSettings
from extrap.experiments.rope_base.results import RESULTS, RopeBaseBlock, RopeBaseModel
from extrap.results import EvalReport, slug
from extrap.run import RunDir
from extrap.study.models import ModelJob, ModelOutput, check_pes, model_results, preset_settings
from extrap.study.orchestrator import Experiment, Job, Outcome, StudyRecord, StudyRequest, saved_record
from extrap.study.task_training import trained_task_run

PROTOCOL = "last-token"


def trained_run(job: ModelJob) -> RunDir:
    """The model's run folder, trained on passkey beside language modelling (or its training finished) if needed."""
    return trained_task_run(job.training("passkey"), job.pe)


def measure_model(run, job: ModelJob, report: EvalReport) -> RopeBaseModel:
    """Passkey by distance and the theory's predictions for a loaded run, beside its last-token report."""
    s, lengths = job.settings, job.lengths
    edges = measure.distance_edges(s.train_length, max(lengths))
    passkey = measure.passkey_by_distance(run.model, run.tokenizer, lengths, s.passkey_n, edges)
    by_distance = measure.pooled(passkey)
    rows = measure.ppl_rows(report, s.train_length, job.delta)
    shape = run.config.model
    return RopeBaseModel(
        pe=job.pe,
        ppl=rows,
        passkey=passkey,
        by_distance=by_distance,
        measured_break=measure.measured_break(rows),
        falloff_distance=measure.falloff_distance(by_distance, s.fall_fraction),
        prediction=measure.prediction(job.pe, shape.d_model // shape.n_head, s.train_length, max(lengths)),
    )


def rope_base_job(job: ModelJob) -> ModelOutput:
    """One model (in a worker process): train, then measure what its run folder has not recorded."""
    import torch

    torch.set_num_threads(job.threads)
    import extrap
    from extrap import evaluate
    from extrap.evaluate.settings import EvalSettings

    rd = trained_run(job)
    measured = rd.has_result("rope-base") and rd.has_result(f"eval-{PROTOCOL}")
    if not measured:  # the paired ratios need the per-token losses: one pass measures both
        run = extrap.load(rd.path, job.device)
        at = EvalSettings(job.lengths, PROTOCOL, targets=job.settings.targets, delta=job.delta)
        report = evaluate.evaluate_run(run, at)
        rd.write_result(f"eval-{PROTOCOL}", report)
        rd.write_result("rope-base", measure_model(run, job, report))
    report = rd.read_result(f"eval-{PROTOCOL}", EvalReport)
    model = rd.read_result("rope-base", RopeBaseModel)
    return ModelOutput(job.pe, str(rd.path), rd.read_final(), report, model)


def progress_line(out: ModelOutput) -> str:
    m, p = out.model, out.model.prediction
    loss = out.train.final_loss if out.train is not None else float("nan")
    return (
        f"training loss {loss:.4f}; break at {m.measured_break or 'none measured'} (L_tr·β^(2/d) "
        f"{'–' if p.scratch_bound is None else f'{p.scratch_bound:.0f}'}); retrieval falls off at "
        f"{m.falloff_distance or 'none measured'} (Men {p.first_negative or '–'})"
    )


def assemble(request: StudyRequest, settings: RopeBaseSettings, pes: list[str], heads: int, outcome: Outcome):
    """results.json: the last-token reports, the learning gate and every model's record."""
    done: dict[str, ModelOutput] = {pe: outcome.done[pe] for pe in pes if pe in outcome.done}
    L_tr = settings.train_length
    lengths = [L_tr * k for k in settings.multiples]
    block = RopeBaseBlock(
        train_length=L_tr,
        lengths=tuple(lengths),
        delta=request.delta,
        fall_fraction=settings.fall_fraction,
        passkey_n=settings.passkey_n,
        targets=settings.targets,
        models={pe: o.model for pe, o in done.items()},
    )
    return model_results(request, "rope-base", list(done.values()), PROTOCOL, L_tr, lengths, pes=pes, n_head=heads,
                         settings=asdict(settings), extra=RESULTS.entry(block), failures=outcome.failures)  # fmt: skip


def build(request: StudyRequest) -> Experiment:
    """Experiment ``rope-base``, checked before anything is trained."""
    from extrap.config import build_configs

    settings = preset_settings(PRESETS, request.preset)
    settings = replace(settings, steps=settings.steps if request.steps is None else request.steps)
    saved = saved_record(request.out) if request.resume and request.pes is None else None
    pes = list(dict.fromkeys(request.pes or (saved.pes if saved else DEFAULT_PES)))  # resume: same PEs
    check_pes("rope-base", pes)
    model_cfg, _ = build_configs("nope", settings.train_preset, overrides=dict(settings.train_overrides))
    job = ModelJob("", "", settings, request.delta, request.threads, request.corpus, request.device)
    return Experiment(
        record=StudyRecord.asked(request, "rope-base", pes),
        must_match=("preset", "experiment", "delta", "steps", "corpus"),  # other PEs may join: runs are per PE
        headline=f"study rope-base: {', '.join(pes)}, preset {request.preset}, L_tr={settings.train_length}, "
        f"lengths L_tr x {list(settings.multiples)}, {request.jobs} at a time -> {request.out}",
        worker=rope_base_job,
        jobs=[Job(pe, replace(job, pe=pe, run_dir=str(request.out / "runs" / slug(pe)))) for pe in pes],
        progress=progress_line,
        assemble=lambda outcome: assemble(request, settings, pes, model_cfg.n_head, outcome),
    )
