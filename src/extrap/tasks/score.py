"""Exact-match accuracy of a model on a retrieval task, by length and by answer depth.

Two methods (``method=``):

* ``greedy``: the model must produce the target `` <answer>\\n`` by greedy
  decoding.  This is computed in one teacher-forced forward pass over
  prompt + target: greedy decoding reproduces the target iff the argmax at
  every target position is the target token (each greedy step sees exactly the
  target prefix until the first mismatch).  The prediction reported is the
  greedy output up to and including its first wrong token.  Token-level: the
  model must emit the tokenizer's own encoding of the target.
* ``rank``: the summed log-likelihood of each candidate continuation
  `` <candidate>\\n`` given the prompt; correct iff the true answer scores
  strictly higher than every other candidate (a tie counts as wrong).
  Candidates: see :mod:`extrap.tasks.generators`.  The candidates of a prompt
  share one pass over it (:func:`extrap.tasks.continuations.score_candidates`:
  the model's KV cache of the prompt), so ranking costs about as much as greedy
  scoring.

An encoder-decoder model (T5, :class:`extrap.model.protocol.Seq2SeqLM`) reads the
prompt with its encoder and scores the same target or candidates with its decoder,
teacher-forced from its start token (:mod:`extrap.tasks.seq2seq`); the two methods are
otherwise unchanged.

Examples at each length are stratified over ``buckets`` equal depth buckets
(example ``i`` asks for a depth in bucket ``i mod buckets``), and accuracy is
reported per length, per realised-depth bucket (the lost-in-the-middle
breakdown of 004 Table 9) and overall.
"""

from __future__ import annotations

import logging
import random
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import torch

from extrap.errors import ExtrapError
from extrap.model.protocol import ExtrapLM, Seq2SeqLM
from extrap.model.protocol import temperature as temperature_ctx
from extrap.tasks.continuations import score_candidates, score_continuations
from extrap.tasks.filler import get_filler
from extrap.tasks.formats import min_length, seed_of
from extrap.tasks.generators import check_task, make_example, needs_filler
from extrap.tasks.records import DepthBucket, Example, ExampleScore, LengthScore, TaskReport, TaskSettings, Temperature
from extrap.tasks.seq2seq import seq2seq_candidates, seq2seq_continuations

METHODS = ("greedy", "rank")
log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# temperature
# ---------------------------------------------------------------------------
def parse_temperature(value: Any) -> float | list[float] | str | None:
    """None / "none" -> None; a positive finite τ; one τ per layer (a list, or "1.1,1.2,...");
    or "auto", "auto:MODE", "auto:per-layer", "auto:MODE:per-layer" (``extrap.align`` modes; "auto:pmax"
    reads as "auto").  See :func:`extrap.align.parse_temperature_spec`."""
    from extrap.align import parse_temperature_spec

    spec = parse_temperature_spec(value)
    if spec.kind == "auto" and spec.mode == "pmax":
        spec = replace(spec, mode=None)
    return spec.value()


def _auto_temperature(align, spec: str, model, train_length: int, length: int, prompts: list[list[int]]) -> Temperature:
    """004 Algorithm 1 (``extrap.align.aligned_temperature``) on the task's own prompts at this length.

    The prompts are concatenated into one token stream; its windows of L_ex and
    of L_tr give the attention statistics to align (labels are never read).
    ``auto:per-layer`` gives one τ per layer.
    """
    parsed = align.parse_temperature_spec(spec)
    ids = [t for p in prompts for t in p]
    while len(ids) < 2 * length:
        ids += ids
    tau = align.aligned_temperature(
        model,
        torch.tensor(ids, dtype=torch.long),
        int(train_length),
        int(length),
        mode=parsed.mode or "pmax",
        per_layer=parsed.per_layer,
    )
    return tuple(tau) if isinstance(tau, list) else tau


# ---------------------------------------------------------------------------
# depth buckets
# ---------------------------------------------------------------------------
class _Tally:
    """Examples and correct answers per depth bucket (``k`` equal buckets of [0, 1])."""

    def __init__(self, k: int):
        self.k = k
        self.n = [0] * k
        self.correct = [0] * k

    def add(self, depth: float, ok: bool) -> None:
        b = min(self.k - 1, max(0, int(depth * self.k)))
        self.n[b] += 1
        self.correct[b] += int(ok)

    def buckets(self) -> tuple[DepthBucket, ...]:
        return tuple(DepthBucket(b / self.k, (b + 1) / self.k, self.n[b], self.correct[b]) for b in range(self.k))


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------
def task_examples(
    task: str, tokenizer, length: int, n: int, seed: int = 0, buckets: int = 5, filler: Any = None
) -> list[Example]:
    """The ``n`` evaluation examples at ``length``: example ``i`` has a depth in bucket ``i mod buckets``."""
    out = []
    for i in range(n):
        u = random.Random(seed_of("score-depth", seed, length, i)).random()
        depth = min(1.0, ((i % buckets) + u) / buckets)
        out.append(make_example(task, tokenizer, length, seed_of("score", seed, length, i), depth=depth, filler=filler))
    return out


def score_task(model: ExtrapLM | Seq2SeqLM, tokenizer, settings: TaskSettings) -> TaskReport:
    """Exact-match accuracy of ``model`` on ``settings.task`` at each length, with the depth breakdown.

    ``settings`` (:class:`TaskSettings`): the task, the lengths, the examples per length, the method, the
    temperature and the filler.  A τ (one, or one per layer) is applied with ``model.set_temperature``;
    ``"auto"`` / ``"auto:MODE"`` / ``"auto:per-layer"`` runs ``extrap.align.aligned_temperature`` (004
    Algorithm 1, mode ``pmax`` by default) per length on that length's task prompts, which needs
    ``train_length`` (L_tr).  The model's temperatures are restored afterwards.

    A :class:`extrap.model.protocol.Seq2SeqLM` (T5) reads the prompt with its encoder and scores the answer
    with its decoder (:mod:`extrap.tasks.seq2seq`); its temperature is its encoder's.  A model that is
    neither protocol (no temperature) is scored as a causal LM without one.
    """
    s = settings
    lengths = _check_request(tokenizer, s)
    seq2seq = isinstance(model, Seq2SeqLM)
    if seq2seq and not model.has_decoder:
        raise ExtrapError("this encoder-decoder model was loaded without its decoder: task scoring needs one")
    tau = parse_temperature(s.temperature)
    tau = tuple(tau) if isinstance(tau, list) else tau
    align = _auto_align(tau, s.train_length)
    tempered = seq2seq or isinstance(model, ExtrapLM)  # both protocols carry a per-layer temperature
    if tau is not None and not tempered:
        raise ExtrapError("this model has no per-layer temperature; score it without one")
    if isinstance(tau, tuple):
        from extrap.align import check_layer_taus

        check_layer_taus(tau, model.shape.n_layer)  # before any example is built
    fill = get_filler(s.filler, s.split) if needs_filler(s.task) else None
    job = _Scoring(model, tokenizer, s, seq2seq, tempered, tau, align, fill)
    total = _Tally(s.buckets)
    records: list[ExampleScore] = []
    results = _score_lengths(job, lengths, total, records if s.details else None)
    scored = [r for r in results if r.error is None]
    return TaskReport.echoing(
        s,
        task=s.task,
        tokenizer=tokenizer.name,
        temperature=tau,
        filler=fill.name if fill else None,
        lengths=tuple(lengths),
        accuracy=sum(r.correct for r in scored) / sum(r.n for r in scored) if scored else None,
        results=tuple(results),
        by_depth=total.buckets(),
        examples=tuple(records) if s.details else None,
    )


@dataclass(frozen=True)
class _Scoring:
    """The settings of one :func:`score_task` call, shared by all its lengths."""

    model: Any
    tokenizer: Any
    settings: TaskSettings
    seq2seq: bool  # a Seq2SeqLM: the prompt to the encoder, the answer to the decoder
    tempered: bool  # the model has a per-layer temperature
    tau: Temperature
    align: Any  # extrap.align when tau is "auto[:MODE][:per-layer]", else None
    fill: Any


def _score_lengths(job: _Scoring, lengths: list[int], total: _Tally, records) -> list[LengthScore]:
    """Every length in eval mode at the requested temperature; the model's mode and temperatures are restored."""
    model, tau = job.model, job.tau
    results = []
    fixed = None if isinstance(tau, str) else tau  # auto: each length sets its own
    fixed = list(fixed) if isinstance(fixed, tuple) else fixed
    restore = temperature_ctx(model, fixed) if job.tempered else nullcontext()
    was_training = model.training
    model.eval()
    try:
        with restore:
            for L in lengths:
                res = _score_length(job, L, total, records)
                results.append(res)
                if job.settings.progress:
                    log.info(
                        "  %s L=%s: %s",
                        job.settings.task,
                        L,
                        f"failed: {res.error}"
                        if res.error is not None
                        else f"accuracy {res.accuracy:.3f} ({res.seconds:.1f} s)",
                    )
    finally:
        if was_training:
            model.train()
    return results


def _check_request(tokenizer, s: TaskSettings) -> list[int]:
    """The sorted distinct lengths, after checking every setting of :func:`score_task`."""
    check_task(s.task)
    if s.method not in METHODS:
        raise ExtrapError(f"unknown scoring method {s.method!r}; choose from {', '.join(METHODS)}")
    if isinstance(s.n, bool) or not isinstance(s.n, int) or s.n < 1:
        raise ExtrapError(f"n must be a positive integer, got {s.n!r}")
    if isinstance(s.buckets, bool) or not isinstance(s.buckets, int) or not 1 <= s.buckets <= 100:
        raise ExtrapError(f"buckets must be an integer in 1..100, got {s.buckets!r}")
    if s.batch < 1:
        raise ExtrapError(f"batch must be positive, got {s.batch}")
    try:
        lengths = sorted({int(L) for L in s.lengths})
    except (TypeError, ValueError):
        raise ExtrapError(f"lengths must be integers, got {s.lengths!r}") from None
    if not lengths:
        raise ExtrapError("give at least one length")
    need = min_length(s.task, tokenizer)
    if lengths[0] < need:
        raise ExtrapError(
            f"{s.task}: length {lengths[0]} is below the minimum of {need} tokens with the "
            f"{tokenizer.name} tokenizer; use lengths >= {need}"
        )
    return lengths


def _auto_align(tau, train_length):
    """extrap.align for ``temperature="auto[:MODE][:per-layer]"`` (checked by parse_temperature), else None."""
    if not isinstance(tau, str):
        return None
    from extrap import align

    if train_length is None:
        raise ExtrapError("temperature auto needs the training length (train_length=L_tr)")
    return align


def _score_length(job: _Scoring, L: int, total: _Tally, records: list[ExampleScore] | None) -> LengthScore:
    """One length of :func:`score_task`: its result, tallied into ``total`` (and ``records``)."""
    t0 = time.perf_counter()
    model, tokenizer, s = job.model, job.tokenizer, job.settings
    examples = task_examples(s.task, tokenizer, L, s.n, s.seed, s.buckets, job.fill)
    prompts = [ex.prompt_ids(tokenizer) for ex in examples]
    used_tau, chosen = job.tau, job.align is None
    try:
        if job.align is not None:
            used_tau = _auto_temperature(job.align, job.tau, model, s.train_length, L, prompts)
            model.set_temperature(list(used_tau) if isinstance(used_tau, tuple) else used_tau)
        chosen = True
        preds = _predict(job, examples, prompts)
    except (RuntimeError, MemoryError, ExtrapError) as e:  # e.g. out of memory, or past a learned APE
        why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        return LengthScore(L, s.n, used_tau, chosen, error=why, seconds=time.perf_counter() - t0)
    bk = _Tally(s.buckets)
    correct = 0
    for ex, (ok, pred) in zip(examples, preds):
        bk.add(ex.depth, ok)
        total.add(ex.depth, ok)
        correct += int(ok)
        if records is not None:
            records.append(ExampleScore(L, ex.seed, ex.depth, ex.answer, pred, ok, ex.prompt_tokens))
    return LengthScore(
        L,
        s.n,
        used_tau,
        correct=correct,
        accuracy=correct / s.n,
        mean_prompt_tokens=sum(ex.prompt_tokens for ex in examples) / s.n,
        seconds=time.perf_counter() - t0,
        by_depth=bk.buckets(),
    )


def _predict(job: _Scoring, examples: list[Example], prompts: list[list[int]]) -> list[tuple[bool, str]]:
    """(correct, prediction text) per example."""
    model, tokenizer, s = job.model, job.tokenizer, job.settings
    if s.method == "greedy":
        pairs = [(p, tokenizer.encode(ex.target)) for ex, p in zip(examples, prompts)]
        scored = (seq2seq_continuations if job.seq2seq else score_continuations)(model, pairs, s.batch)
        return [(c.greedy, tokenizer.decode(c.prediction).strip()) for c in scored]
    out = []
    for ex, p in zip(examples, prompts):
        cands = list(ex.candidates)
        conts = [tokenizer.encode(f" {c}\n") for c in cands]
        ll = [c.loglik for c in (seq2seq_candidates if job.seq2seq else score_candidates)(model, p, conts)]
        best = max(range(len(cands)), key=lambda i: ll[i])
        truth = cands.index(ex.answer)
        ok = all(ll[truth] > ll[i] for i in range(len(cands)) if i != truth)
        out.append((ok, cands[best]))
    return out
