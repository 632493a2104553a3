"""The sections of an extrapolation or ALiBi-slope study: theory, runs, evaluation, receptive fields, timing."""

from __future__ import annotations

from dataclasses import dataclass

from extrap.results.records import Record, listed, plain

# What a results.json written before the TRF fields were labelled meant by an unlabelled TRF:
# the widest head's n(eps) at eps = 1e-3, initial parameters (theory.STUDY_TRF).
UNLABELLED_TRF_EPS = 1e-3
UNLABELLED_TRF_REDUCE = "max"


@dataclass
class Claim(Record):
    """One paper claim judged against the study: ``ok`` True (reproduced), False (contradicted), None (no data)."""

    claim: str = ""
    ok: bool | None = None
    evidence: str = ""
    source: str = ""


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
    """000 Theorem 0.4 and Eq. 22 for one head of one PE at its initial parameters.

    ``trf`` maps each ε (its string key, e.g. "0.001") to that head's n(ε): one head, no reduction.
    """

    pe: str | None = None
    head: int | str | None = None  # "all" when every head is the same
    verdict: str | None = None
    test: str | None = None
    series_sum: float | None = None
    trf: dict = plain(factory=dict)
    explanation: str | None = None
    trf_note: str | None = plain(omit=True)


@dataclass
class LengthPoint(Record):
    """One evaluation length of one protocol (``error`` when it could not be evaluated)."""

    length: int | None = None
    ppl: float | None = None
    error: str | None = plain(omit=True)


@dataclass
class EvalReport(Record):
    """One protocol's evaluation of one run (extrap.evaluate.evaluate_run), with 000 Definition 0.1's verdict."""

    protocol: str | None = None
    extrapolates: bool | None = None
    worst_ratio: float | None = None
    results: list[LengthPoint] = listed(LengthPoint)
    error: str | None = plain(omit=True)


@dataclass
class ErfEntry(Record):
    """Receptive fields of one run: gradient and attention ERF, and the TRF they are ranked against.

    ``trf`` is n(``trf_eps``) reduced over heads by ``trf_reduce`` (extrap.theory.receptive_field).
    """

    grad_erf: float | None = None
    grad_curve: list | None = None
    attn_erf: float | None = None
    trf: int | float | None = None
    trf_eps: float | None = None
    trf_reduce: str | None = None
    error: str | None = plain(omit=True)

    @classmethod
    def from_dict(cls, d):
        entry = super().from_dict(d)
        if entry.trf_eps is None and isinstance(d, dict) and "trf" in d:
            entry.trf_eps, entry.trf_reduce = UNLABELLED_TRF_EPS, UNLABELLED_TRF_REDUCE
        return entry


@dataclass
class Spearman(Record):
    """Spearman ρ of the TRF (n(``trf_eps``), reduced by ``trf_reduce``) against each ERF, over ``n`` PEs."""

    n: int | None = None
    grad: float | None = None
    attn: float | None = None
    trf_eps: float | None = None
    trf_reduce: str | None = None

    @classmethod
    def from_dict(cls, d):
        sp = super().from_dict(d)
        if sp.trf_eps is None and isinstance(d, dict) and d:
            sp.trf_eps, sp.trf_reduce = UNLABELLED_TRF_EPS, UNLABELLED_TRF_REDUCE
        return sp


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
