"""Experiment ``effective-length``: how far past L_tr does each PE still retrieve, beside its TRF?

Models with the default PEs (:data:`.about.DEFAULT_PES`: ALiBi, KERPLE-log and
000's Type 1, whose TRF is finite, beside RoPE and NoPE, whose TRF is not) are trained at L_tr on a mix of the
RULER-style tasks that fit L_tr (example i of the (i mod count)-th task, :class:`extrap.tasks.TaskSampler`)
and language-modelling batches, as the alignment and rope-base studies train.  At L_tr × 1, 2, 4, 8, 16 each
is measured (:mod:`.measure`): every task by rank scoring with its needle-depth × length
table and effective length (relative form, 0.85 × the score at L_tr), perplexity and LongPPL, and the TRF
that the theory engine gives the model.  The report ranks the PEs by effective length beside their TRF, only
on the tasks each learned above chance, and judges "PEs with a finite TRF keep an effective length beyond
L_tr" (:mod:`.claims`).

Each model leaves ``runs/<pe>/`` with its training, ``eval-nonoverlapping`` and ``effective-length`` results;
a finished result is not computed again.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from extrap.errors import ExtrapError
from extrap.experiments.effective_length.about import DEFAULT_PES
from extrap.experiments.effective_length.measure import PROTOCOL, measure_model
from extrap.experiments.effective_length.presets import PRESETS, EffectiveLengthSettings
from extrap.experiments.effective_length.results import RESULTS, EffectiveLengthBlock, EffectiveLengthModel
from extrap.results import EvalReport, slug
from extrap.run import RunDir
from extrap.study.models import ModelJob, ModelOutput, check_pes, model_results, preset_settings
from extrap.study.orchestrator import Experiment, Job, Outcome, StudyRecord, StudyRequest, saved_record
from extrap.study.task_training import trained_task_run

RESULT = "effective-length"


def trained_run(job: ModelJob) -> RunDir:
    """The model's run folder, trained on the study's task mix (or its training finished) first if needed."""
    return trained_task_run(job.training(",".join(job.settings.tasks)), job.pe)


def effective_length_job(job: ModelJob) -> ModelOutput:
    """One model (in a worker process): train, then measure what its run folder has not recorded."""
    import torch

    torch.set_num_threads(job.threads)
    import extrap

    rd = trained_run(job)
    if not (rd.has_result(RESULT) and rd.has_result(f"eval-{PROTOCOL}")):  # one pass measures both
        run = extrap.load(rd.path, job.device)
        report, model = measure_model(run, job, run.config.model.n_head)
        rd.write_result(f"eval-{PROTOCOL}", report)
        rd.write_result(RESULT, model)
    report = rd.read_result(f"eval-{PROTOCOL}", EvalReport)
    model = rd.read_result(RESULT, EffectiveLengthModel)
    return ModelOutput(job.pe, str(rd.path), rd.read_final(), report, model)


def progress_line(out: ModelOutput) -> str:
    m = out.model
    loss = out.train.final_loss if out.train is not None else float("nan")
    tasks = []
    for t in m.ruler.tasks if m.ruler is not None else ():
        learned = m.learned(t.task)
        eff = t.effective_length.length
        tasks.append(f"{t.task} {eff if learned else 'not learned'}")
    trf = m.trf.value if m.trf.finite else m.trf.status
    return f"training loss {loss:.4f}; TRF {trf}; effective length {', '.join(tasks) or 'not measured'}"


def assemble(request: StudyRequest, settings: EffectiveLengthSettings, pes: list[str], heads: int, outcome: Outcome):
    """results.json: the perplexity reports, the learning gate and every model's record."""
    done = [outcome.done[pe] for pe in pes if pe in outcome.done]
    lengths = [settings.train_length * k for k in settings.multiples]
    scored = {k: getattr(settings, k) for k in ("tasks", "threshold", "n", "buckets", "eval_tokens")}
    models = {o.pe: o.model for o in done}
    block = EffectiveLengthBlock(settings.train_length, tuple(lengths), **scored, method="rank", protocol=PROTOCOL,
                                 models=models)  # fmt: skip
    return model_results(request, "effective-length", done, PROTOCOL, settings.train_length, lengths, pes=pes,
                         tasks=list(settings.tasks), n_head=heads, settings=asdict(settings),
                         extra=RESULTS.entry(block), failures=outcome.failures)  # fmt: skip


def check_tasks(tasks: list[str], settings: EffectiveLengthSettings, tokenizer_spec: str, corpus: str) -> None:
    """Every task must be a RULER-style one whose example, with its answer, fits L_tr."""
    from extrap.data.tokenizers import ByteTokenizer, get_tokenizer, parse_spec
    from extrap.tasks.ruler import check_ruler_task, ruler_min_length

    if not tasks:
        raise ExtrapError("effective-length: give at least one task")
    if parse_spec(tokenizer_spec) is None:
        tok = ByteTokenizer()
    else:
        from extrap.data import load_corpus

        tok = get_tokenizer(tokenizer_spec, load_corpus(corpus))
    L = settings.train_length
    for t in tasks:
        check_ruler_task(t)
        need = ruler_min_length(t, tok, include_target=True, split="train") - 1
        if need > L:
            raise ExtrapError(
                f"effective-length: task {t} needs L_tr >= {need} tokens with the {tok.name} tokenizer "
                f"(with its answer); the {settings.train_preset} preset trains at L_tr = {L}"
            )


def build(request: StudyRequest) -> Experiment:
    """Experiment ``effective-length``, checked before anything is trained."""
    from extrap.config import build_configs

    settings = preset_settings(PRESETS, request.preset)
    saved = saved_record(request.out) if request.resume else None
    tasks = list(dict.fromkeys(request.tasks or (saved.tasks if saved and saved.tasks else settings.tasks)))
    steps = settings.steps if request.steps is None else request.steps
    settings = replace(settings, steps=steps, tasks=tuple(tasks))
    pes = list(dict.fromkeys(request.pes or (saved.pes if saved else DEFAULT_PES)))  # resume: same PEs
    check_pes("effective-length", pes)
    over = {**settings.train_overrides, **({"corpus": request.corpus} if request.corpus else {})}
    model_cfg, train_cfg = build_configs("nope", settings.train_preset, overrides=over)
    check_tasks(tasks, settings, train_cfg.tokenizer, train_cfg.corpus)
    job = ModelJob("", "", settings, request.delta, request.threads, request.corpus, request.device)
    return Experiment(
        record=StudyRecord.asked(request, "effective-length", pes, tasks=tasks),
        must_match=("preset", "experiment", "delta", "steps", "corpus", "tasks"),  # other PEs may join
        headline=f"study effective-length: {', '.join(pes)}, preset {request.preset}, L_tr={settings.train_length}, "
        f"tasks {', '.join(tasks)}, lengths L_tr x {list(settings.multiples)}, {request.jobs} at a time "
        f"-> {request.out}",
        worker=effective_length_job,
        jobs=[Job(pe, replace(job, pe=pe, run_dir=str(request.out / "runs" / slug(pe)))) for pe in pes],
        progress=progress_line,
        assemble=lambda outcome: assemble(request, settings, pes, model_cfg.n_head, outcome),
    )
