"""Score a model on the RULER-style suite: per task, length and depth; the mean; the effective length.

Three methods (``RulerSettings.method``):

* ``rank``: the log-likelihood of each whole candidate answer `` <answer>\\n`` given the prompt
  (:func:`extrap.tasks.continuations.score_candidates`, one pass over the prompt); 1 if the true answer
  scores strictly highest, else 0.
* ``greedy``: 1 if greedy decoding reproduces `` <answer>\\n`` exactly (one teacher-forced pass,
  :func:`extrap.tasks.continuations.score_continuations`), else 0.
* ``generate``: greedy generation of twice the answer's tokens (:func:`extrap.model.generate.generate`),
  then RULER's metric on the text: string_match_all (the share of references found), or string_match_part
  for qa (any reference found).  Causal models only.

Examples at each length ask for depths stratified over ``buckets`` equal buckets (as
:func:`extrap.tasks.score.task_examples` does) and are tallied by their realised depth.  With the relative
threshold, L_tr is scored too.
"""

from __future__ import annotations

import logging
import random
import re
import time
from dataclasses import dataclass, replace
from typing import Any

import torch

from extrap.errors import ExtrapError
from extrap.model.protocol import ExtrapLM, Seq2SeqLM, model_device
from extrap.tasks.continuations import score_candidates, score_continuations
from extrap.tasks.filler import get_filler
from extrap.tasks.formats import seed_of
from extrap.tasks.ruler.haystack import get_haystack
from extrap.tasks.ruler.metrics import effective_length, parse_threshold, string_match_all, string_match_part
from extrap.tasks.ruler.records import (
    DepthCell,
    LengthMean,
    RulerExample,
    RulerLength,
    RulerReport,
    RulerScore,
    RulerSettings,
    RulerTaskReport,
)
from extrap.tasks.ruler.registry import (
    METRIC,
    RULER_TASKS,
    check_ruler_task,
    has_depth,
    make_ruler_example,
    ruler_min_length,
    ruler_params,
)
from extrap.tasks.seq2seq import seq2seq_candidates, seq2seq_continuations

METHODS = ("rank", "greedy", "generate")
_CONTROL = re.compile(r"[\x00-\x1f]")
log = logging.getLogger(__name__)


def ruler_examples(task: str, tokenizer, length: int, s: RulerSettings) -> list[RulerExample]:
    """The ``s.n`` examples of ``task`` at ``length``: example ``i`` asks for a depth in bucket ``i mod buckets``."""
    out = []
    for i in range(s.n):
        depth = None
        if has_depth(task):
            u = random.Random(seed_of("ruler-depth", s.seed, task, length, i)).random()
            depth = min(1.0, ((i % s.buckets) + u) / s.buckets)
        out.append(
            make_ruler_example(
                task,
                tokenizer,
                length,
                seed_of("ruler", s.seed, task, length, i),
                depth=depth,
                filler=s.filler,
                split=s.split,
                haystack=s.haystack if task not in ("cwe", "fwe") else None,
                params=_params_for(task, s.params),
            )
        )
    return out


def _params_for(task: str, params) -> tuple:
    """The given settings that belong to ``task`` (a suite shares one list)."""
    own = dict(ruler_params(task))
    return tuple((k, v) for k, v in params if k in own)


def check_settings(tokenizer, s: RulerSettings) -> tuple[list[str], list[int], list[str]]:
    """(tasks, sorted lengths with L_tr for the relative form, default tasks left out), after every check."""
    if s.method not in METHODS:
        raise ExtrapError(f"unknown scoring method {s.method!r}; choose from {', '.join(METHODS)}")
    for name, value in (("n", s.n), ("buckets", s.buckets), ("batch", s.batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (name == "buckets" and value > 100):
            raise ExtrapError(f"{name} must be a positive integer (buckets at most 100), got {value!r}")
    form, _ = parse_threshold(s.threshold)
    lengths = sorted({int(L) for L in s.lengths} | ({int(s.train_length)} if form == "relative" else set()))
    if not s.lengths:
        raise ExtrapError("give at least one length")
    tasks = list(dict.fromkeys(check_ruler_task(t) for t in (s.tasks or RULER_TASKS)))
    known = {k for t in tasks for k, _ in ruler_params(t)}
    for k, _ in s.params:
        if k not in known:
            raise ExtrapError(f"unknown setting {k!r} for the tasks {', '.join(tasks)}")
    for t in tasks:
        ruler_params(t, _params_for(t, s.params))
    if s.haystack is not None:
        get_haystack(s.haystack, s.filler, s.split)
    skipped = []
    for t in list(tasks):
        need = ruler_min_length(t, tokenizer, filler=s.filler, split=s.split, params=_params_for(t, s.params))
        if lengths[0] < need:
            if s.tasks:
                raise ExtrapError(
                    f"{t}: length {lengths[0]} is below the minimum of {need} tokens with the {tokenizer.name} "
                    f"tokenizer; use lengths >= {need}"
                    + (" (L_tr is scored for the relative threshold)" if form == "relative" else "")
                )
            tasks.remove(t)
            skipped.append(t)
    if not tasks:
        raise ExtrapError(f"no task of the suite fits length {lengths[0]}; use longer lengths")
    return tasks, lengths, skipped


@dataclass(frozen=True)
class _Job:
    model: Any
    tokenizer: Any
    settings: RulerSettings
    seq2seq: bool


def score_ruler(model: ExtrapLM | Seq2SeqLM, tokenizer, settings: RulerSettings) -> RulerReport:
    """Score ``model`` on the suite (:class:`RulerSettings`): see the module docstring."""
    tasks, lengths, skipped = check_settings(tokenizer, settings)
    s = replace(settings, filler=get_filler(settings.filler, settings.split))  # the corpus read once
    seq2seq = isinstance(model, Seq2SeqLM)
    if s.method == "generate" and not isinstance(model, ExtrapLM):
        raise ExtrapError("generation scoring needs a causal LM; score this model by rank or greedy")
    job = _Job(model, tokenizer, s, seq2seq)
    records: list[RulerScore] = []
    was_training = model.training
    model.eval()
    try:
        reports = [_score_task(job, t, lengths, records) for t in tasks]
    finally:
        if was_training:
            model.train()
    mean = []
    for i, L in enumerate(lengths):
        got = [r.results[i].score for r in reports]
        mean.append(LengthMean(L, None if any(g is None for g in got) else sum(got) / len(got)))
    haystack_name = get_haystack("corpus", s.filler, s.split).name if s.haystack != "noise" else "noise"
    return RulerReport.echoing(
        s,
        suite="ruler",
        tokenizer=tokenizer.name,
        filler=haystack_name,
        lengths=tuple(lengths),
        threshold=s.threshold,
        tasks=tuple(reports),
        mean=tuple(mean),
        effective_length=effective_length(lengths, [m.score for m in mean], s.threshold, s.train_length),
        skipped=tuple(skipped),
        examples=tuple(records) if s.details else None,
    )


def _score_task(job: _Job, task: str, lengths: list[int], records: list[RulerScore]) -> RulerTaskReport:
    s = job.settings
    results = []
    for L in lengths:
        res = _score_length(job, task, L, records)
        results.append(res)
        if s.progress:
            what = f"failed: {res.error}" if res.error else f"score {res.score:.3f} ({res.seconds:.1f} s)"
            log.info("  %s L=%s: %s", task, L, what)
    eff = effective_length(lengths, [r.score for r in results], s.threshold, s.train_length)
    return RulerTaskReport(task, METRIC[task], tuple(results), eff)


def _score_length(job: _Job, task: str, L: int, records: list[RulerScore]) -> RulerLength:
    t0 = time.perf_counter()
    s = job.settings
    try:
        examples = ruler_examples(task, job.tokenizer, L, s)
        scored = _predict(job, examples)
    except (RuntimeError, MemoryError, ExtrapError) as e:  # out of memory, past a learned APE, ...
        why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        return RulerLength(L, s.n, error=why, seconds=time.perf_counter() - t0)
    k = s.buckets
    n, total = [0] * k, [0.0] * k
    for ex, (score, pred) in zip(examples, scored):
        if ex.depth is not None:
            b = min(k - 1, int(ex.depth * k))
            n[b] += 1
            total[b] += score
        if s.details:
            records.append(RulerScore(task, L, ex.seed, ex.depth, ex.answer, pred, score))
    cells = tuple(DepthCell(b / k, (b + 1) / k, n[b], total[b]) for b in range(k)) if has_depth(task) else ()
    return RulerLength(
        L,
        s.n,
        score=sum(sc for sc, _ in scored) / s.n,
        mean_prompt_tokens=sum(ex.prompt_tokens for ex in examples) / s.n,
        seconds=time.perf_counter() - t0,
        by_depth=cells,
    )


def _predict(job: _Job, examples: list[RulerExample]) -> list[tuple[float, str]]:
    """(score in [0, 1], prediction text) per example."""
    model, tok, method = job.model, job.tokenizer, job.settings.method
    prompts = [ex.prompt_ids(tok) for ex in examples]
    if method == "greedy":
        pairs = [(p, tok.encode(ex.target)) for ex, p in zip(examples, prompts)]
        scored = (seq2seq_continuations if job.seq2seq else score_continuations)(model, pairs, job.settings.batch)
        return [(float(c.greedy), tok.decode(c.prediction).strip()) for c in scored]
    if method == "generate":
        return [_generate(model, tok, ex, p) for ex, p in zip(examples, prompts)]
    out = []
    for ex, p in zip(examples, prompts):
        conts = [tok.encode(f" {c}\n") for c in ex.candidates]
        ll = [c.loglik for c in (seq2seq_candidates if job.seq2seq else score_candidates)(model, p, conts)]
        best = max(range(len(ll)), key=lambda i: ll[i])
        out.append((float(all(ll[0] > x for x in ll[1:])), ex.candidates[best]))
    return out


def _generate(model, tok, ex: RulerExample, prompt: list[int]) -> tuple[float, str]:
    """Greedy generation of 2 × the answer's tokens, then RULER's post-processing and string match."""
    from extrap.model.generate import generate

    x = torch.tensor([prompt], dtype=torch.long, device=model_device(model))
    new = generate(model, x, 2 * ex.target_tokens)[0, len(prompt) :].tolist()
    pred = _CONTROL.sub("\n", tok.decode(new).strip()).strip()  # RULER's postprocess_pred
    match = string_match_part if ex.metric == "part" else string_match_all
    return match(pred, ex.answers), pred
