"""What the fine-tuned extension study measures for one method, with the shared measurement code.

The run (a fine-tune, the plain fine-tune read with dynamic NTK, or the base with a training-free extension) is
read once and measured at L_tr × the preset's multiples:

* last-token perplexity over the same targets at every length (those of the longest), its |Δppl|/ppl against
  L_tr with the paired standard error and the measured break (rope-base's :func:`~extrap.experiments.rope_base.
  measure.length_rows`, :func:`~extrap.experiments.rope_base.measure.measured_break`);
* passkey exact match (greedy) of rope-base's examples and the fall-off
  (:func:`extrap.experiments.extension.measure.passkey_falloff`);
* the RULER-style ``niah_single`` and ``vt`` (:func:`extrap.tasks.ruler.score_ruler`, rank scoring) at the
  lengths each fits, with each task's effective length (0.85 × its score at the shortest of them: L_tr where the
  task fits it; with bytes vt needs 166 tokens, so from 2 L_tr at L_tr = 128);
* LongPPL (:func:`extrap.evaluate.longppl.longppl_report`, the method's run as its own evaluator, truncated
  context = the run's own training length: 4 L_tr for a fine-tune, L_tr for the base);
* the theory's in-distribution length: ``extrap theory rope`` (:func:`extrap.theory.rope.analyse_rope`) of the
  fine-tune's spec with its fine-tuned length as the training length (PoSE: the positions it trained, its
  target), or an extension's closed form (:meth:`extrap.extend.methods.Method.usable_length`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from extrap.errors import ExtrapError
from extrap.experiments.extension.measure import passkey_falloff
from extrap.experiments.finetune_extension.methods import FtMethod
from extrap.experiments.finetune_extension.presets import RULER_TASKS
from extrap.experiments.finetune_extension.results import FtResult, LongPplLength
from extrap.experiments.rope_base import measure

PROTOCOL = "last-token"


@dataclass(frozen=True)
class MeasureJob:
    """One method to measure on the run at ``source`` (picklable)."""

    method: FtMethod
    source: str
    train_length: int  # the base's L_tr
    lengths: tuple[int, ...]
    targets: int
    passkey_n: int
    delta: float
    fall_fraction: float
    ruler_n: int
    ruler_buckets: int
    eval_tokens: int
    pose_target: int
    device: str | None = None


def predicted(method: FtMethod, job: MeasureJob, head_dim: int) -> tuple[int | None, str]:
    """(the theory's in-distribution length, its basis)."""
    from extrap.extend import parse
    from extrap.theory.rope import analyse_rope

    if method.kind == "base":
        up_to = parse(method.extend, job.train_length).usable_length()
        return (None if up_to == float("inf") else int(up_to)), "distance"
    if method.kind != "finetune":
        return None, "none"  # dynamic: its θ follows n, no fixed scheme to analyse
    L = job.pose_target * job.train_length if method.positions.startswith("pose") else method.train_length
    try:
        return analyse_rope(method.pe, head_dim, L, max(job.lengths)).in_distribution_length, "angles"
    except ExtrapError:
        return None, "none"


def loaded(job: MeasureJob):
    import extrap
    from extrap.extend import extend_run

    m = job.method
    run = extrap.load(job.source, job.device, **({"rope": m.rope, "factor": 1.0} if m.kind == "inference" else {}))
    if m.kind == "base":
        extend_run(run, m.extend)
    return run


def longppl_rows(run, job: MeasureJob) -> tuple[LongPplLength, ...]:
    from extrap.evaluate.longppl import longppl_report
    from extrap.evaluate.settings import EvalSettings

    at = EvalSettings(job.lengths, "nonoverlapping", tokens=job.eval_tokens, delta=job.delta)
    rows = [r for r in longppl_report(run, at).longppl.results if r.length in job.lengths]  # not its own L_tr
    return tuple(
        LongPplLength(r.length, None if r.key_loss is None else math.exp(r.key_loss), r.key_tokens, r.error)
        for r in rows
    )


def ruler_tasks(run, job: MeasureJob) -> tuple:
    """niah_single and vt at every length they fit (vt needs 166 bytes: L_tr = 128 is too short for it), each
    task's effective length relative to its score at the shortest length it was scored at (L_tr where it fits)."""
    from extrap.tasks.ruler import RulerSettings, ruler_min_length, score_ruler

    out = []
    for task in RULER_TASKS:
        fits = [L for L in job.lengths if L >= ruler_min_length(task, run.tokenizer)]
        if fits:
            suite = RulerSettings((task,), fits, train_length=fits[0], n=job.ruler_n, buckets=job.ruler_buckets,
                                  method="rank")  # fmt: skip
            out += score_ruler(run.model, run.tokenizer, suite).tasks
    return tuple(out)


def measure_method(job: MeasureJob, train_loss: float | None) -> FtResult:
    """Every length of ``job``'s method (see the module docstring)."""
    from extrap.evaluate.driver import evaluation_stream
    from extrap.evaluate.protocols import evaluate
    from extrap.evaluate.settings import EvalSettings

    run, lengths = loaded(job), list(job.lengths)
    stream, _ = evaluation_stream(run, EvalSettings(job.lengths, PROTOCOL, targets=job.targets), lengths)
    results = evaluate(run.model, stream, lengths, PROTOCOL, targets=job.targets, longest=max(lengths))
    ppl = measure.length_rows(results, job.train_length, job.delta)
    edges = measure.distance_edges(job.train_length, max(lengths))
    passkey = measure.passkey_by_distance(run.model, run.tokenizer, job.lengths, job.passkey_n, edges)
    ruler = ruler_tasks(run, job)
    up_to, basis = predicted(job.method, job, run.model.shape.head_dim)
    m = job.method
    return FtResult(
        name=m.name, kind=m.kind, approximate=m.approximate, as_run=m.as_run,
        train_length=m.train_length, train_loss=train_loss, ppl=ppl, passkey=passkey, ruler=ruler,
        longppl=longppl_rows(run, job), predicted_length=up_to, basis=basis,
        measured_break=measure.measured_break(ppl),
        passkey_falloff=passkey_falloff(passkey, job.train_length, job.fall_fraction),
    )  # fmt: skip
