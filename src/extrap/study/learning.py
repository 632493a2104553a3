"""Did the study's models learn?  Their loss at L_tr against the unigram entropy of the training tokens.

A model that has not learned to use its context predicts at best the token frequencies, whose
cross-entropy is the unigram entropy; its perplexity is then flat in length whatever its PE, and
a flat curve would pass 000 Definition 0.1 for every PE.  The extrapolation claims are therefore
judged only on models whose loss at L_tr is at most :data:`LEARNED_FRACTION` of the unigram
entropy (:class:`extrap.results.LearningGate`), as the alignment study judges its accuracy
claims only on models that retrieve at L_tr.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path

import torch

from extrap.errors import ExtrapError
from extrap.results import EvalReport, LearningGate

log = logging.getLogger(__name__)

# A model counts as trained when its loss at L_tr is at most this fraction of the unigram entropy.
# The stdlib byte stream's unigram entropy is 3.23 nats (4.66 bits) per byte; the cpu preset's
# models reach 0.47-0.67 of it at L_tr (NoPE the highest) and the smoke preset's 30 steps stay
# above 1.2 of it, so 0.8 separates a model that reads its context from one that counts bytes.
LEARNED_FRACTION = 0.8
GATE_PROTOCOLS = ("nonoverlapping", "sliding", "last-token")  # whose loss at L_tr is compared, in this order


def unigram_entropy(stream: torch.Tensor) -> float:
    """H = -Σ_v p(v) ln p(v) in nats of the token frequencies p(v) of ``stream`` (Shannon 1948, Theorem 2)."""
    stream = torch.as_tensor(stream).reshape(-1).long()
    if stream.numel() == 0:
        raise ExtrapError("the unigram entropy of an empty token stream is undefined")
    counts = torch.bincount(stream).double()
    p = counts[counts > 0] / stream.numel()
    return float(-(p * p.log()).sum())


def training_unigram(run_dir: str | Path) -> tuple[float | None, int | None, str | None]:
    """(entropy in nats per token, tokens counted, why None) of the training split a run was trained on."""
    from extrap.data import load_corpus, load_tokenizer, token_stream
    from extrap.run import RunDir

    try:
        cfg = RunDir(run_dir).read_config()
        corpus = load_corpus(cfg.train.corpus)
        if cfg.corpus_hash is not None and corpus.hash != cfg.corpus_hash:
            return None, None, f"corpus {corpus.name} changed since the models were trained"
        stream = token_stream(corpus, load_tokenizer(run_dir), "train")
    except ExtrapError as e:
        return None, None, f"the training tokens could not be read: {e}"
    return unigram_entropy(stream), int(stream.numel()), None


def loss_at(report: EvalReport | None, length: int) -> float | None:
    """The loss (nats per token) that an evaluation report has at ``length`` (None: not evaluated there, or failed)."""
    r = report.result_at(length) if report is not None else None
    if r is None or r.loss is None or not math.isfinite(r.loss):
        return None
    return r.loss


def gate_protocol(evals: Mapping[str, Mapping[str, EvalReport]]) -> str | None:
    """The first of :data:`GATE_PROTOCOLS` that any PE was evaluated with (``evals``: {pe: {protocol: report}})."""
    return next((p for p in GATE_PROTOCOLS if any(p in e for e in evals.values())), None)


def learning_gate(
    evals: Mapping[str, Mapping[str, EvalReport]], run_dir: str | Path | None, train_length: int
) -> LearningGate:
    """The gate of a study from each PE's evaluations ({pe: {protocol: report}}) and one of its run folders,
    whose training split gives the unigram entropy."""
    protocol = gate_protocol(evals)
    gate = LearningGate(max_fraction=LEARNED_FRACTION, protocol=protocol)
    gate.loss = {pe: loss_at(e.get(protocol), train_length) if protocol else None for pe, e in evals.items()}
    if not evals or run_dir is None:
        gate.note = "no model was trained"
        return gate
    gate.unigram_entropy, gate.unigram_tokens, gate.note = training_unigram(run_dir)
    if gate.unigram_entropy is not None:
        log.info(
            "study: unigram entropy of the training tokens %.4f nats; trained means loss at L_tr <= %.4f",
            gate.unigram_entropy,
            gate.threshold,
        )
    return gate
