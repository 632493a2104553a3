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

An encoder-decoder model (T5, ``is_encoder_decoder``) reads the prompt with its
encoder and scores the same target or candidates with its decoder, teacher-forced
from its start token (:mod:`extrap.tasks.seq2seq`); the two methods are otherwise
unchanged.

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
from extrap.model.protocol import temperature as temperature_ctx
from extrap.tasks.continuations import score_candidates, score_continuations
from extrap.tasks.filler import get_filler
from extrap.tasks.formats import min_length, seed_of
from extrap.tasks.generators import check_task, make_example, needs_filler
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


def _auto_temperature(align, spec: str, model, train_length: int, length: int, prompts: list[list[int]]):
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
    if isinstance(tau, torch.Tensor):
        tau = tau.tolist()
    return tau


# ---------------------------------------------------------------------------
# depth buckets
# ---------------------------------------------------------------------------
def _buckets(k: int) -> list[dict]:
    return [{"lo": b / k, "hi": (b + 1) / k, "n": 0, "correct": 0} for b in range(k)]


def _bucket_of(depth: float, k: int) -> int:
    return min(k - 1, max(0, int(depth * k)))


def _finalise(buckets: list[dict]) -> list[dict]:
    return [{**b, "accuracy": b["correct"] / b["n"] if b["n"] else None} for b in buckets]


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------
def task_examples(
    task: str, tokenizer, length: int, n: int, seed: int = 0, buckets: int = 5, filler: Any = None
) -> list[dict]:
    """The ``n`` evaluation examples at ``length``: example ``i`` has a depth in bucket ``i mod buckets``."""
    out = []
    for i in range(n):
        u = random.Random(seed_of("score-depth", seed, length, i)).random()
        depth = min(1.0, ((i % buckets) + u) / buckets)
        out.append(make_example(task, tokenizer, length, seed_of("score", seed, length, i), depth=depth, filler=filler))
    return out


def score_task(
    model,
    tokenizer,
    task: str,
    lengths,
    n: int = 50,
    seed: int = 0,
    method: str = "greedy",
    temperature: Any = None,
    *,
    train_length: int | None = None,
    buckets: int = 5,
    filler: Any = None,
    split: str = "validation",
    batch: int = 4,
    details: bool = False,
    progress: bool = False,
) -> dict:
    """Exact-match accuracy of ``model`` on ``task`` at each length, with the depth breakdown.

    ``filler``: a corpus spec, Corpus or Filler for the haystack text (default
    ``stdlib``; its ``split``).  ``temperature``: None (leave the model as it
    is), a τ or one τ per layer (a list) applied with ``model.set_temperature``,
    or ``"auto"`` / ``"auto:MODE"`` / ``"auto:per-layer"``: per length,
    ``extrap.align.aligned_temperature`` (004 Algorithm 1, mode ``pmax`` by
    default; one τ per layer with ``per-layer``) on that length's task prompts,
    which needs ``train_length`` (L_tr).  The model's temperatures are restored
    afterwards.  ``progress``: one INFO log line per length.

    An encoder-decoder ``model`` (``is_encoder_decoder``, e.g. :class:`extrap.hf.t5_run.T5Model`)
    reads the prompt with its encoder and scores the answer with its decoder
    (:mod:`extrap.tasks.seq2seq`); its temperature is its encoder's.

    Returns ``{"task", "method", "n", "seed", "buckets", "tokenizer",
    "temperature", "accuracy", "results": [per length], "by_depth": [...]}``;
    each length has ``length, n, correct, accuracy, mean_prompt_tokens,
    temperature, seconds, by_depth`` (or ``error``); a depth bucket has
    ``lo, hi, n, correct, accuracy`` (None when empty).  ``details=True`` adds
    one record per example under ``"examples"``.
    """
    lengths = _check_request(model, tokenizer, task, lengths, n, method, buckets, batch)
    if getattr(model, "is_encoder_decoder", False) and not getattr(model, "has_decoder", True):
        raise ExtrapError("this encoder-decoder model was loaded without its decoder: task scoring needs one")
    tau = parse_temperature(temperature)
    align = _auto_align(tau, train_length)
    if tau is not None and not _has_temperature(model):
        raise ExtrapError("this model has no per-layer temperature; score it without one")
    if isinstance(tau, list):
        from extrap.align import check_layer_taus

        check_layer_taus(tau, model.shape.n_layer)  # before any example is built
    fill = get_filler(filler, split) if needs_filler(task) else None
    job = _Scoring(model, tokenizer, task, n, seed, method, tau, align, train_length, buckets, batch, fill)
    total_bk = _buckets(buckets)
    records: list[dict] = []
    results = _score_lengths(job, lengths, total_bk, records if details else None, progress)
    report = _report(job, lengths, results, total_bk)
    if details:
        report["examples"] = records
    return report


@dataclass(frozen=True)
class _Scoring:
    """The settings of one :func:`score_task` call, shared by all its lengths."""

    model: Any
    tokenizer: Any
    task: str
    n: int
    seed: int
    method: str
    tau: float | list[float] | str | None
    align: Any  # extrap.align when tau is "auto[:MODE][:per-layer]", else None
    train_length: int | None
    buckets: int
    batch: int
    fill: Any


def _score_lengths(job: _Scoring, lengths: list[int], total_bk: list[dict], records, progress: bool) -> list[dict]:
    """Every length in eval mode at the requested temperature; the model's mode and temperatures are restored."""
    model, tau = job.model, job.tau
    results = []
    fixed = None if isinstance(tau, str) else tau  # auto: each length sets its own
    restore = temperature_ctx(model, fixed) if _has_temperature(model) else nullcontext()
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with restore:
            for L in lengths:
                res = _score_length(job, L, total_bk, records)
                results.append(res)
                if progress:
                    log.info(
                        "  %s L=%s: %s",
                        job.task,
                        L,
                        f"failed: {res['error']}"
                        if "error" in res
                        else f"accuracy {res['accuracy']:.3f} ({res['seconds']:.1f} s)",
                    )
    finally:
        if was_training and hasattr(model, "train"):
            model.train()
    return results


def _report(job: _Scoring, lengths: list[int], results: list[dict], total_bk: list[dict]) -> dict:
    scored = [r for r in results if "error" not in r]
    overall = sum(r["correct"] for r in scored) / sum(r["n"] for r in scored) if scored else None
    return {
        "task": job.task,
        "method": job.method,
        "n": job.n,
        "seed": job.seed,
        "buckets": job.buckets,
        "tokenizer": job.tokenizer.name,
        "temperature": job.tau,
        "filler": job.fill.name if job.fill else None,
        "lengths": lengths,
        "accuracy": overall,
        "results": results,
        "by_depth": _finalise(total_bk),
    }


def _check_request(model, tokenizer, task, lengths, n, method, buckets, batch) -> list[int]:
    """The sorted distinct lengths, after checking every argument of :func:`score_task`."""
    check_task(task)
    if method not in METHODS:
        raise ExtrapError(f"unknown scoring method {method!r}; choose from {', '.join(METHODS)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ExtrapError(f"n must be a positive integer, got {n!r}")
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= 100:
        raise ExtrapError(f"buckets must be an integer in 1..100, got {buckets!r}")
    if batch < 1:
        raise ExtrapError(f"batch must be positive, got {batch}")
    try:
        lengths = sorted({int(L) for L in lengths})
    except (TypeError, ValueError):
        raise ExtrapError(f"lengths must be integers, got {lengths!r}") from None
    if not lengths:
        raise ExtrapError("give at least one length")
    need = min_length(task, tokenizer)
    if lengths[0] < need:
        raise ExtrapError(
            f"{task}: length {lengths[0]} is below the minimum of {need} tokens with the "
            f"{tokenizer.name} tokenizer; use lengths >= {need}"
        )
    return lengths


def _has_temperature(model) -> bool:
    """Whether ``model`` has per-layer softmax temperatures (``temperatures`` / ``set_temperature``)."""
    return hasattr(model, "temperatures") and hasattr(model, "set_temperature")


def _auto_align(tau, train_length):
    """extrap.align for ``temperature="auto[:MODE][:per-layer]"`` (checked by parse_temperature), else None."""
    if not isinstance(tau, str):
        return None
    from extrap import align

    if train_length is None:
        raise ExtrapError("temperature auto needs the training length (train_length=L_tr)")
    return align


def _score_length(job: _Scoring, L: int, total_bk: list[dict], records: list[dict] | None) -> dict:
    """One length of :func:`score_task`: its result, tallied into ``total_bk`` (and ``records``)."""
    t0 = time.perf_counter()
    model, tokenizer, n = job.model, job.tokenizer, job.n
    examples = task_examples(job.task, tokenizer, L, n, job.seed, job.buckets, job.fill)
    prompts = [tokenizer.encode(ex["prompt"]) for ex in examples]
    res: dict[str, Any] = {"length": L, "n": n}
    try:
        used_tau = job.tau
        if job.align is not None:
            used_tau = _auto_temperature(job.align, job.tau, model, job.train_length, L, prompts)
            model.set_temperature(used_tau)
        res["temperature"] = used_tau
        preds = _predict(model, tokenizer, examples, prompts, job.method, job.batch)
    except (RuntimeError, MemoryError, ExtrapError) as e:  # e.g. out of memory, or past a learned APE
        res.update(error=str(e).splitlines()[0][:200] if str(e) else type(e).__name__, seconds=time.perf_counter() - t0)
        return res
    bk = _buckets(job.buckets)
    correct = 0
    for ex, (ok, pred) in zip(examples, preds):
        b = _bucket_of(ex["depth"], job.buckets)
        for table in (bk, total_bk):
            table[b]["n"] += 1
            table[b]["correct"] += int(ok)
        correct += int(ok)
        if records is not None:
            records.append(
                {
                    "length": L,
                    "seed": ex["seed"],
                    "depth": ex["depth"],
                    "answer": ex["answer"],
                    "prediction": pred,
                    "correct": ok,
                    "prompt_tokens": ex["prompt_tokens"],
                }
            )
    res.update(
        correct=correct,
        accuracy=correct / n,
        mean_prompt_tokens=sum(ex["prompt_tokens"] for ex in examples) / n,
        seconds=time.perf_counter() - t0,
        by_depth=_finalise(bk),
    )
    return res


def _predict(model, tokenizer, examples, prompts, method, batch) -> list[tuple[bool, str]]:
    """(correct, prediction text) per example."""
    seq2seq = getattr(model, "is_encoder_decoder", False)
    if method == "greedy":
        pairs = [(p, tokenizer.encode(ex["target"])) for ex, p in zip(examples, prompts)]
        scored = (seq2seq_continuations if seq2seq else score_continuations)(model, pairs, batch)
        return [(s["greedy"], tokenizer.decode(s["prediction"]).strip()) for s in scored]
    out = []
    for ex, p in zip(examples, prompts):
        cands = ex["candidates"]
        conts = [tokenizer.encode(f" {c}\n") for c in cands]
        ll = [r["loglik"] for r in (seq2seq_candidates if seq2seq else score_candidates)(model, p, conts)]
        best = max(range(len(cands)), key=lambda i: ll[i])
        truth = cands.index(ex["answer"])
        ok = all(ll[truth] > ll[i] for i in range(len(cands)) if i != truth)
        out.append((ok, cands[best]))
    return out
