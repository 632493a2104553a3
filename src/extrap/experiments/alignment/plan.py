"""Experiment ``alignment``: attention alignment on retrieval tasks (004 §5.2).

Chi, Fan and Rudnicky (004) sharpen every softmax at L_ex > L_tr with a temperature τ < 1
found by Algorithm 1 (match the average P_max, or entropy, of all attention rows at L_ex to
its value at L_tr with τ = 1).  Their Table 4 reports exact-match accuracy on passkey / line
/ topic retrieval without and with alignment, Table 5 the τ that Algorithm 1 picks at each
length, Figs. 3-5 the τs of Propositions 1-2 and of the log-length rule beside it, and
Table 9 accuracy by the position of the answer.

Here, for every task and every PE (default: T5 bias ``t5`` and ALiBi ``alibi``):

1. a model is trained at the task's L_tr on the task (answer-only loss, optionally mixed
   with language-modelling batches: ``task_mix``); line and topic prompts need more tokens
   than passkey, so each task has its own L_tr (``train_lengths``);
2. at every L in L_tr x multiples, τ is found on probe prompts of the task (modes ``pmax``,
   ``entropy``, ``pmax-layer``) beside the closed forms of 004 §6; probing is O(L^2) and
   capped at ``max_probe_length``, beyond which every mode uses the log-length rule
   τ = log_L L_tr, and the tables say so (:mod:`.measure`);
3. exact-match accuracy of ``n`` examples per length without alignment (``none``, τ = 1)
   and with each τ, with the accuracy per answer-depth bucket: greedy, and with ``rank``
   also 004's ranking of the candidate answers.

Each (task, PE, length) leaves ``runs/<task>/<pe>/alignment/L<length>.json``; a finished
one is not measured again, and the trained model is reused.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, replace

from extrap.errors import ExtrapError
from extrap.experiments.alignment.about import DEFAULT_PES
from extrap.experiments.alignment.measure import PromptProber, length_record
from extrap.experiments.alignment.presets import PRESETS, AlignmentSettings
from extrap.experiments.alignment.records import AlignJob, AlignJobResult, LengthRecord
from extrap.experiments.alignment.results import (
    MODES,
    RESULTS,
    SETTINGS,
    AlignmentBlock,
    AlignmentModel,
    AlignmentTasks,
    DepthSummary,
    best_setting,
    length_key,
)
from extrap.io import atomic_write_json
from extrap.results import StudyResults, slug
from extrap.run import RunDir
from extrap.study.models import check_pes, preset_settings
from extrap.study.orchestrator import Experiment, Job, Outcome, StudyRecord, StudyRequest, provenance, run_summary
from extrap.study.task_training import TaskTraining, trained_task_run
from extrap.tasks.records import DepthBucket

log = logging.getLogger(__name__)


def tau_text(t) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in t) + "]" if isinstance(t, (list, tuple)) else f"{t:.3f}"


def length_line(name: str, rec: LengthRecord) -> str:
    acc = rec.scores.accuracy["greedy"]
    return (
        f"  {name} L={rec.length}: τ "
        + ", ".join(f"{m} {tau_text(rec.found.tau[m])}" for m in MODES)
        + " | accuracy "
        + ", ".join(f"{st} {None if acc.get(st) is None else round(acc[st], 3)}" for st in SETTINGS)
        + f" ({rec.seconds_align:.0f} s align, {rec.seconds_score:.0f} s score)"
    )


def trained_run(job: AlignJob) -> RunDir:
    """The (task, PE) run folder, trained (or its training finished) first if needed."""
    rd, s, task = RunDir(job.run_dir), job.settings, job.task
    trained_on = rd.read_config().train.task if rd.exists() else task
    if trained_on != task:
        raise ExtrapError(f"{rd.path} was trained on {trained_on!r}, not {task!r}")
    plan = TaskTraining(job.run_dir, job.pe, s.train_preset, task, s.task_mix, job.train_length, s.steps,
                        s.train_overrides, job.corpus, job.device, job.threads)  # fmt: skip
    return trained_task_run(plan, f"{task}/{job.pe}")


def alignment_job(job: AlignJob) -> AlignJobResult:
    """One (task, PE) run (in a worker process): train, then measure every length not yet recorded."""
    import torch

    torch.set_num_threads(job.threads)
    import extrap

    rd = trained_run(job)
    run, probe, records = None, None, {}
    L_tr = rd.read_config().train_length
    for k in job.settings.multiples:
        L = L_tr * k
        path = rd.path / "alignment" / f"L{L}.json"
        if not path.exists():
            if run is None:
                run = extrap.load(rd.path, job.device)
                probe = PromptProber(run.model)
            rec = length_record(run, L, job.task, job.settings, job.cap, probe)
            atomic_write_json(path, rec.to_json())
            log.info(length_line(f"{job.task}/{job.pe}", rec))
        records[length_key(L)] = LengthRecord.from_json(json.loads(path.read_text()))
    return AlignJobResult(job.pe, job.task, str(rd.path), rd.read_final(), records)


Buckets = tuple[DepthBucket, ...]


def _depth_summary(
    acc: dict[str, dict[str, float | None]], by_depth: dict[str, dict[str, Buckets]], train_length: int
) -> DepthSummary:
    """004 Table 9 analogue: accuracy per answer-depth bucket, per length, and pooled over L > L_tr.

    ``acc``: {setting: {L: accuracy}}; ``by_depth``: {setting: {L: the buckets}}.
    """
    pooled, buckets = {}, None
    for st, per_len in by_depth.items():
        rows = [bs for k, bs in per_len.items() if int(k) > train_length]
        if not rows:
            continue
        buckets = [[b.lo, b.hi] for b in rows[0]]
        n = [sum(r[i].n for r in rows) for i in range(len(buckets))]
        c = [sum(r[i].correct for r in rows) for i in range(len(buckets))]
        pooled[st] = [ci / ni if ni else None for ci, ni in zip(c, n)]
    if buckets is None:
        first = next((bs for per_len in by_depth.values() for bs in per_len.values()), None)
        buckets = [[b.lo, b.hi] for b in first] if first else []
    return DepthSummary(
        best_setting=best_setting(acc, train_length),
        buckets=buckets,
        by_length={st: {k: [b.accuracy for b in bs] for k, bs in per_len.items()} for st, per_len in by_depth.items()},
        pooled_beyond=pooled,
    )


def model_summary(res: AlignJobResult, train_length: int, lengths: list[int]) -> AlignmentModel:
    """One PE's results on one task from its per-length records."""
    mdl = AlignmentModel(
        accuracy={st: {} for st in SETTINGS},
        tau={m: {} for m in MODES},
        tau_source={m: {} for m in MODES},
        at_grid_edge={m: {} for m in MODES},
    )
    rank: dict = {st: {} for st in SETTINGS}
    by_depth: dict = {st: {} for st in SETTINGS}
    for L in lengths:
        k, r = length_key(L), res.lengths.get(length_key(L))
        if r is None:
            continue
        acc, found = r.scores.accuracy, r.found
        for st in SETTINGS:
            mdl.accuracy[st][k] = acc["greedy"].get(st)
            if "rank" in acc:
                rank[st][k] = acc["rank"].get(st)
            if st in r.scores.by_depth:
                by_depth[st][k] = r.scores.by_depth[st]
        for m in MODES:
            t = found.tau[m]
            mdl.tau[m][k], mdl.tau_source[m][k] = list(t) if isinstance(t, tuple) else t, found.source[m]
            mdl.at_grid_edge[m][k] = m in found.algorithm1 and found.algorithm1[m].at_grid_edge
        if found.closed_forms is not None:
            mdl.closed_forms[k] = found.closed_forms
        mdl.errors.update({f"L={L} {e}": v for e, v in r.scores.errors.items()})
    mdl.depth = _depth_summary(mdl.accuracy, by_depth, train_length)
    if any(rank[st] for st in SETTINGS):
        mdl.rank_accuracy = rank
    return mdl


_RECORDED = ("n", "buckets", "rank", "probe_prompts", "probe_tokens")  # the settings a block repeats, by name


def assemble(
    request: StudyRequest, settings: AlignmentSettings, pes: list[str], cap: int, num_heads: int, outcome: Outcome
) -> StudyResults:
    """results.json: run metadata, and per task the per-PE τs, closed forms, accuracies and depth tables."""
    blocks, runs = {}, {}
    for task in settings.tasks:
        L_tr = settings.train_lengths[task]
        lengths = [L_tr * k for k in settings.multiples]
        got = {pe: outcome.done[f"{task}/{pe}"] for pe in pes if f"{task}/{pe}" in outcome.done}  # the study's order
        blocks[task] = AlignmentBlock(
            task=task,
            train_length=L_tr,
            lengths=lengths,
            **{k: getattr(settings, k) for k in _RECORDED},
            probe_cap=cap,
            models={pe: model_summary(r, L_tr, lengths) for pe, r in got.items()},
        )
        runs.update({f"{task}/{pe}": run_summary(r.run_dir, r.train, request.out) for pe, r in got.items()})
    return StudyResults(
        preset=request.preset,
        experiment="alignment",
        pes=pes,
        tasks=list(settings.tasks),
        train_length={t: b.train_length for t, b in blocks.items()},
        n_head=num_heads,
        lengths=sorted({L for b in blocks.values() for L in b.lengths}),
        **asdict(provenance([r.run_dir for r in outcome.done.values()])),
        settings=asdict(settings),
        runs=runs,
        extra=RESULTS.entry(AlignmentTasks(blocks)),
        failures=outcome.failures,
    )


def check_lengths(settings: AlignmentSettings, corpus: str | None) -> int:
    """Every task's L_tr must hold one example with its answer; returns the model's heads per layer."""
    from extrap.config import build_configs
    from extrap.data import get_tokenizer, load_corpus
    from extrap.tasks import min_length

    m, t = build_configs("nope", settings.train_preset, overrides=dict(settings.train_overrides))
    tok = get_tokenizer(t.tokenizer, load_corpus(corpus or t.corpus))
    for task in settings.tasks:
        need, L_tr = min_length(task, tok, include_target=True), settings.train_lengths[task]
        if L_tr + 1 < need:
            raise ExtrapError(
                f"{task} needs L_tr >= {need - 1} tokens with the {tok.name} tokenizer, the preset has {L_tr}"
            )
    return m.n_head


def build(request: StudyRequest) -> Experiment:
    """Experiment ``alignment``, checked before anything is trained."""
    from extrap import align
    from extrap.tasks.generators import check_task

    settings = preset_settings(PRESETS, request.preset)
    tasks = tuple(check_task(t) for t in dict.fromkeys(request.tasks or settings.tasks))
    settings = replace(settings, tasks=tasks, steps=settings.steps if request.steps is None else request.steps)
    pes = list(dict.fromkeys(request.pes or DEFAULT_PES))
    check_pes("alignment", pes)  # fail early, before any training, on a bad spec
    num_heads = check_lengths(settings, request.corpus)
    cap = settings.max_probe_length or align.MAX_PROBE_LENGTH
    return Experiment(
        record=StudyRecord.asked(request, "alignment", pes, delta=False, tasks=tasks),
        must_match=("preset", "experiment", "steps", "corpus"),  # other tasks or PEs may join: runs are per task, PE
        headline=f"study alignment: {', '.join(pes)}, preset {request.preset}, "
        + "; ".join(f"{task} at L_tr={settings.train_lengths[task]}" for task in tasks)
        + f", lengths L_tr x {list(settings.multiples)}, {request.jobs} at a time -> {request.out}",
        worker=alignment_job,
        jobs=[
            Job(
                f"{task}/{pe}",
                AlignJob(
                    task=task,
                    pe=pe,
                    run_dir=str(request.out / "runs" / task / slug(pe)),
                    train_length=settings.train_lengths[task],
                    settings=settings,
                    corpus=request.corpus,
                    threads=request.threads,
                    cap=cap,
                    device=request.device,
                ),
            )
            for task in tasks
            for pe in pes
        ],
        progress=lambda res: f"done (training loss {res.final_loss:.4f})",
        assemble=lambda outcome: assemble(request, settings, pes, cap, num_heads, outcome),
    )
