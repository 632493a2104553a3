"""Did the evaluated run learn?  The study's learning gate, applied to one evaluation's verdict.

A model that has not learned to read its context predicts at best the token frequencies: its loss is
about the unigram entropy of the training tokens at every length, its perplexity flat, and a flat curve
passes 000 Definition 0.1 whatever its PE.  So ``extrap eval`` gives no verdict for a run whose loss at
L_tr is above the study's fraction of that entropy (:data:`extrap.study.learning.LEARNED_FRACTION`,
judged by :class:`extrap.results.LearningGate`, the study's own gate), and says why.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from extrap.results import EvalReport, LearningGate

log = logging.getLogger(__name__)


def learning_gate(report: EvalReport, run_dir: str | Path) -> LearningGate:
    """The gate of one evaluation: its loss at L_tr against the unigram entropy of the run's training tokens
    (read from the cached token stream of the corpus the run was trained on)."""
    from extrap.study.learning import LEARNED_FRACTION, loss_at, training_unigram

    gate = LearningGate(max_fraction=LEARNED_FRACTION, protocol=report.protocol)
    gate.loss = {report.pe: loss_at(report, report.train_length)}
    gate.unigram_entropy, gate.unigram_tokens, gate.note = training_unigram(run_dir)
    return gate


def not_learned_reason(gate: LearningGate, pe: str, train_length: int) -> str | None:
    """Why ``pe``'s model gets no verdict (None: it learned, or whether it did is unknown)."""
    if gate.learned(pe) is not False:
        return None
    H = gate.unigram_entropy
    return (
        f"not learned: loss {gate.loss[pe]:.3f} nats at L_tr = {train_length} against a unigram entropy of the "
        f"training tokens of {H:.3f}; a model counts as trained at a loss of at most "
        f"{gate.max_fraction:g} × {H:.3f} = {gate.threshold:.3f}"
    )


def gated(report: EvalReport, run_dir: str | Path) -> EvalReport:
    """``report`` with no verdict when its run did not learn (``verdict_reason`` says so), else unchanged.

    The ratios stay (they are measured); only the verdict and its noise note go.  When the training tokens
    cannot be read, whether the run learned is unknown: the verdict stays and a warning says so.
    """
    if report.extrapolates is None:
        return report
    gate = learning_gate(report, run_dir)
    if gate.unigram_entropy is None:
        log.warning("whether %s learned is unknown (%s); its verdict stands unchecked", run_dir, gate.note)
        return report
    reason = not_learned_reason(gate, report.pe, report.train_length)
    if reason is None:
        return report
    return replace(report, extrapolates=None, verdict_reason=reason, within_noise=None, noise=None)
