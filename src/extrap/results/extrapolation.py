"""The sections of an extrapolation or ALiBi-slope study: theory, runs, receptive fields, timing.

Its evaluation section holds :class:`extrap.results.evaluation.EvalReport` records, the reports of
``extrap eval`` themselves.  These records are :class:`~extrap.results.StudyResults`'s own fields (the
oldest layout of results.json, see its docstring), so they stay here rather than in the experiment's
package (:mod:`extrap.experiments.extrapolation`); :class:`Claim`, :class:`LearningGate` and
:class:`RunSummary` serve every experiment.
"""

from __future__ import annotations

from dataclasses import dataclass

from extrap.results.records import Record, listed, plain

# What a results.json written before the TRF fields were labelled meant by an unlabelled TRF:
# the widest head's n(eps) at eps = 1e-3, initial parameters (theory.STUDY_TRF).
UNLABELLED_TRF_EPS = 1e-3
UNLABELLED_TRF_REDUCE = "max"
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


@dataclass
class TheoryRow(Record):
    """000 Theorem 0.4 and Eq. 22 for one head of one PE, at its initial or its trained parameters.

    ``trf`` maps each ε (its string key, e.g. "0.001") to that head's n(ε): one head, no reduction.
    ``params`` is "initial" (also when absent: files written before trained rows existed) or
    "trained", then with the ``layer`` the values come from.  ``values`` holds the head's
    parameter values (a number, such as KERPLE's r1 and r2, or a list, such as T5's bucket table;
    a row for every head, ``head`` "all", holds them all), and a trained row ``initial_values``, the
    same parameters before training.  Trained values are read as ``extrap theory --checkpoint``
    reads them, so its rows are the command's.
    """

    pe: str | None = None
    head: int | str | None = None  # "all" when every head is the same
    verdict: str | None = None
    test: str | None = None
    series_sum: float | None = None
    trf: dict = plain(factory=dict)
    explanation: str | None = None
    trf_note: str | None = plain(omit=True)
    params: str | None = plain(omit=True)  # "initial" | "trained"; None: initial
    layer: int | None = plain(omit=True)
    values: dict | None = plain(omit=True)
    initial_values: dict | None = plain(omit=True)

    @property
    def trained(self) -> bool:
        return self.params == TRAINED


class _TrfLabel:
    """What a record of a TRF (``trf_eps``, ``trf_reduce``, ``trf_params``) reads from a file written before
    TRFs were labelled: where it holds a TRF (its JSON has ``_TRF_KEY``; None: any key), the unlabelled ε and
    reduction; and ``params``, the parameter values of the TRF."""

    _TRF_KEY: str | None = None

    @classmethod
    def from_json(cls, d):
        record = super().from_json(d)
        holds = isinstance(d, dict) and d and (cls._TRF_KEY is None or cls._TRF_KEY in d)
        if record.trf_eps is None and holds:
            record.trf_eps, record.trf_reduce = UNLABELLED_TRF_EPS, UNLABELLED_TRF_REDUCE
        return record

    @property
    def params(self) -> str:
        """The parameter values of the TRF (unrecorded: initial, as every study wrote before trained TRFs)."""
        return self.trf_params or INITIAL


@dataclass
class ErfEntry(_TrfLabel, Record):
    """Receptive fields of one run: gradient and attention ERF, and the TRF they are ranked against.

    ``trf`` is n(``trf_eps``) reduced over heads by ``trf_reduce`` (extrap.theory.receptive_field),
    computed from the ``trf_params`` values: "trained" (every layer and head of the trained model,
    for a scheme with learned bias parameters; ``trf_initial`` is then the same TRF before training)
    or "initial" (a scheme without learned parameters, or a file written before trained TRFs).
    ``trf_reason`` says why ``trf`` is None.  Not recorded: initial values.
    """

    grad_erf: float | None = None
    grad_curve: list | None = None
    attn_erf: float | None = None
    trf: int | float | None = None
    trf_eps: float | None = None
    trf_reduce: str | None = None
    trf_params: str | None = plain(omit=True)
    trf_initial: int | float | None = plain(omit=True)
    trf_reason: str | None = plain(omit=True)
    error: str | None = plain(omit=True)

    _TRF_KEY = "trf"


@dataclass
class Spearman(_TrfLabel, Record):
    """Spearman ρ of the TRF (n(``trf_eps``), reduced by ``trf_reduce``) against each ERF, over ``n`` PEs."""

    n: int | None = None
    grad: float | None = None
    attn: float | None = None
    trf_eps: float | None = None
    trf_reduce: str | None = None
    trf_params: str | None = plain(omit=True)  # "trained": trained values for the schemes that learn them


@dataclass
class TimingRow(Record):
    method: str | None = None  # sliding | nonoverlapping | cache-window
    seconds: list = plain(factory=list)  # one per window size
    relative: float | None = None  # total time / nonoverlapping's


@dataclass
class Timing(Record):
    """000 Table 1: sliding-window against non-overlapping inference on the same tokens."""

    pe: str | None = None
    window_sizes: list = plain(factory=list)
    tokens: int | None = None
    rows: list[TimingRow] = listed(TimingRow)

    def row(self, method: str) -> TimingRow | None:
        return next((r for r in self.rows if r.method == method), None)


@dataclass
class SlopeVariant(Record):
    """One model of the ALiBi-slope experiment (003 Table 1)."""

    pe: str | None = None
    group: str | None = None  # shift | same-h | window
    label: str | None = None


@dataclass
class Slopes(Record):
    variants: list[SlopeVariant] = listed(SlopeVariant)
