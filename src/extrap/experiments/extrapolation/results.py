"""The extrapolation experiments' block of ``results.json``: theory, receptive fields, their correlation, the
ALiBi-slope variants and timing.

These are five top-level keys of the file (``theory``, ``erf``, ``spearman``, ``slopes``, ``timing``: its
layout before experiments had blocks), so :data:`RESULTS` is a :class:`~extrap.results.blocks.SpreadBlock`
that places each where the files before it held it (``theory`` after ``settings``, ``erf`` and ``spearman``
after the evaluation, ``slopes`` and ``timing`` after the failures).  :func:`block` reads it; the study's
evaluation reports stay in the shared ``eval`` section.
"""

from __future__ import annotations

from dataclasses import dataclass

from extrap.results import INITIAL, TRAINED, ResultsBlock, StudyResults
from extrap.results.blocks import SpreadBlock
from extrap.results.records import Record, listed, mapped, one, plain
from extrap.results.tables import flat, theory_rows

# What a results.json written before the TRF fields were labelled meant by an unlabelled TRF:
# the widest head's n(eps) at eps = 1e-3, initial parameters (theory.STUDY_TRF).
UNLABELLED_TRF_EPS = 1e-3
UNLABELLED_TRF_REDUCE = "max"


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


@dataclass
class ExtrapolationBlock(Record):
    """The experiments' own sections of results.json (see the module's docstring); any may be empty."""

    theory: list[TheoryRow] = listed(TheoryRow, omit=True)
    erf: dict[str, ErfEntry] = mapped(ErfEntry, omit=True)
    spearman: Spearman | None = one(Spearman, omit=True)
    slopes: Slopes | None = one(Slopes, omit=True)
    timing: Timing | None = one(Timing, omit=True)

    def theory_by_pe(self) -> dict[str, list[TheoryRow]]:
        """Every theory row per PE: initial parameters, then (learned schemes) trained ones per layer."""
        out: dict[str, list[TheoryRow]] = {}
        for row in self.theory:
            if row.pe is not None:
                out.setdefault(row.pe, []).append(row)
        return out

    def model_theory(self) -> dict[str, list[TheoryRow]]:
        """Per PE, the rows of the parameters its model uses: the trained rows where there are any."""
        out = {}
        for pe, rows in self.theory_by_pe().items():
            trained = [r for r in rows if r.trained]
            out[pe] = trained or rows
        return out


class ExtrapolationResults(SpreadBlock):
    """:data:`RESULTS`: the block with its rows of results.csv and the errors it recorded."""

    def first_rows(self, block: ExtrapolationBlock) -> list[dict]:
        """One row per theory row and ε (before the evaluation, as the file holds them)."""
        return [{"section": "theory", **row} for r in block.theory for row in theory_rows(r.to_json())]

    def rows(self, block: ExtrapolationBlock) -> list[dict]:
        """One row per receptive field, one for the correlation, one per timed method and window size."""
        out = [{"section": "erf", "pe": pe, **flat(e.to_json(), skip=("grad_curve",))} for pe, e in block.erf.items()]
        if (sp := block.spearman) is not None:
            trf = {"trf_eps": sp.trf_eps, "trf_reduce": sp.trf_reduce, "trf_params": sp.params}
            out.append({"section": "spearman", "rho_grad": sp.grad, "rho_attn": sp.attn, "n_pes": sp.n, **trf})
        if (t := block.timing) is not None:
            out += [
                {"section": "timing", "pe": t.pe, "method": r.method, "window": w, "seconds": s, "tokens": t.tokens}
                for r in t.rows
                for w, s in zip(t.window_sizes, r.seconds)
            ]
        return out

    def errors(self, block: ExtrapolationBlock) -> list[str]:
        return [f"erf {pe}: {e.error}" for pe, e in block.erf.items() if e.error]


RESULTS: ResultsBlock = ExtrapolationResults(
    "extrapolation",
    ExtrapolationBlock,
    after={
        "theory": ("settings",),
        "erf": ("eval", "runs"),
        "spearman": ("erf", "eval", "runs"),
        "slopes": ("failures",),
        "timing": ("slopes", "failures"),
    },
)


def block(results: StudyResults) -> ExtrapolationBlock:
    """The experiments' block of ``results`` (empty when the results hold none)."""
    return RESULTS.of(results) or ExtrapolationBlock()


def all_pes(results: StudyResults) -> list[str]:
    """Every PE the results mention, the study's order first (the shared sections', then the block's)."""
    own = block(results)
    return list(dict.fromkeys([*results.all_pes(), *own.erf, *(r.pe for r in own.theory if r.pe)]))
