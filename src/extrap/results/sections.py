"""The sections of ``results.json`` that serve every experiment: its runs, the learning gate, the claims.

(Each experiment's own records live in its package, :mod:`extrap.experiments`.)
"""

from __future__ import annotations

from dataclasses import dataclass

from extrap.results.records import Record, plain

TRAINED, INITIAL = "trained", "initial"  # which parameter values a TRF or theory row was computed from


@dataclass
class Claim(Record):
    """One paper claim judged against the study: ``ok`` True (reproduced), False (contradicted), None (no data).

    ``untested`` is True when the claim needs trained models and its models did not learn (or
    whether they learned is not recorded): ``ok`` is then None and ``evidence`` says why.
    """

    claim: str = ""
    ok: bool | None = None
    evidence: str = ""
    source: str = ""
    untested: bool | None = plain(omit=True)


@dataclass
class LearningGate(Record):
    """Did the models learn?  Each PE's loss at L_tr against the unigram entropy of the training tokens.

    A model that ignores its context still reaches the unigram entropy of the training tokens by
    predicting their frequencies, and its perplexity is then flat in length whatever its PE: a flat
    curve of such a model says nothing about extrapolation.  A PE's model counts as trained when its
    evaluation loss at L_tr (nats per token, protocol ``protocol``) is at most ``max_fraction`` times
    the unigram entropy.  Any number missing (a file written before this record existed, a PE not
    evaluated at L_tr): whether it learned is unknown.
    """

    unigram_entropy: float | None = None  # nats per token, from the training split's token counts
    unigram_tokens: int | None = None  # training tokens counted
    max_fraction: float | None = None
    protocol: str | None = None
    loss: dict = plain(factory=dict)  # {pe: loss at L_tr in nats per token, or None}
    note: str | None = plain(omit=True)  # why unigram_entropy is None

    @property
    def threshold(self) -> float | None:
        """The loss at L_tr below which a model counts as trained (nats per token)."""
        if self.unigram_entropy is None or self.max_fraction is None:
            return None
        return self.max_fraction * self.unigram_entropy

    def learned(self, pe: str) -> bool | None:
        """True (trained), False (did not learn), None (unknown)."""
        loss, limit = self.loss.get(pe), self.threshold
        if not isinstance(loss, (int, float)) or limit is None:
            return None
        return loss <= limit


@dataclass
class RunSummary(Record):
    """One training run of the study (``error`` in place of the numbers when it failed)."""

    run_dir: str | None = None  # relative to the study folder
    final_loss: float | None = None
    seconds: float | None = None
    params: int | None = None
    error: str | None = plain(omit=True)
