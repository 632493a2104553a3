"""The section of ``extrap study --experiment rope-base``: each RoPE model's measured break beside the theory's.

Frozen records, each with ``to_json`` and ``from_json`` (a missing key reads as None or empty, so a partial
file still loads).  :class:`RopeBaseModel` is one model: its last-token perplexity per length with the ratio
to L_tr and its noise (:class:`PplLength`), passkey accuracy per length and needle distance
(:class:`PasskeyLength`, :class:`DistanceBin`), what ``extrap theory rope`` predicts for it
(:class:`RopePrediction`), and the measured break and retrieval fall-off (its last-token
:class:`~extrap.results.EvalReport` is the study's ``eval[pe]["last-token"]``).  :class:`RopeBaseBlock` holds
every model and the settings they were measured with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extrap.results import ResultsBlock, StudyResults
from extrap.results.records import FlatRecord, as_mapping, record_json


@dataclass(frozen=True)
class RopePrediction(FlatRecord):
    """What :func:`extrap.theory.rope.analyse_rope` predicts for a model (None throughout for NoPE: ``error``)."""

    head_dim: int | None = None  # the head dimension the analysis used
    rotary_dim: int | None = None  # d of Liu's bound: the dimensions that rotate (partial rotary: fewer)
    plain: bool | None = None  # plain RoPE trained from scratch (no scaling, p-RoPE or partial rotary)
    base: float | None = None  # β
    in_distribution_length: int | None = None  # every length up to it only turns angles training saw
    decided_by: str | None = None  # rotation-angles | full-periods | search-cap
    critical_dim: int | None = None  # Liu et al. 2024 Eq. 13
    extrapolation_bound: float | None = None  # Liu et al. 2024 Eq. 16a: the critical pair's period
    scratch_bound: float | None = None  # L_tr·β^(2/d), d = rotary_dim: Liu et al.'s from-scratch bound
    first_negative: int | None = None  # Men et al. 2024: first distance m with B(m) < 0
    aggregation_cap: int | None = None  # distances searched for first_negative
    error: str | None = None  # why there is no prediction (not a rotary scheme, ...)


@dataclass(frozen=True)
class PplLength(FlatRecord):
    """Last-token perplexity at one length, and its |Δppl|/ppl against L_tr with the ratio's standard error."""

    length: int
    ppl: float | None
    stderr: float | None  # standard error of the mean loss (nats)
    ratio: float | None = None  # |ppl - ppl(L_tr)| / ppl(L_tr) (000 Def. 0.1); None at L_tr
    ratio_stderr: float | None = None  # paired, as extrap.evaluate.verdict computes it
    above_delta: bool | None = None  # ratio > δ outside its 95% interval; None: no standard error


@dataclass(frozen=True)
class DistanceBin(FlatRecord):
    """Passkey examples whose needle lies (lo, hi] tokens before the query, and how many were answered."""

    lo: int
    hi: int
    n: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n else None

    def to_json(self) -> dict:
        return {**record_json(self), "accuracy": self.accuracy}


@dataclass(frozen=True)
class PasskeyLength:
    """Passkey exact-match accuracy (greedy) at one prompt length, overall and per needle distance."""

    length: int
    n: int
    correct: int
    bins: tuple[DistanceBin, ...] = ()
    error: str | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n and self.error is None else None

    def to_json(self) -> dict:
        head = {"length": self.length, "n": self.n, "correct": self.correct, "accuracy": self.accuracy}
        return {**head, "bins": [b.to_json() for b in self.bins], "error": self.error}

    @classmethod
    def from_json(cls, d: Any) -> PasskeyLength:
        d = as_mapping(d)
        bins = tuple(DistanceBin.from_json(b) for b in d.get("bins") or ())
        return cls(d.get("length"), d.get("n") or 0, d.get("correct") or 0, bins, d.get("error"))


@dataclass(frozen=True)
class RopeBaseModel:
    """One model of the experiment: measurements, the theory's predictions, and the measured break."""

    pe: str
    ppl: tuple[PplLength, ...]
    passkey: tuple[PasskeyLength, ...]
    by_distance: tuple[DistanceBin, ...]  # passkey examples of every length, pooled per distance bin
    measured_break: int | None  # first length whose ratio exceeds δ beyond its noise; None: none measured
    falloff_distance: int | None  # lower edge of the first bin below fall_fraction × the nearest bin's accuracy
    prediction: RopePrediction

    @property
    def reference_accuracy(self) -> float | None:
        """Accuracy in the nearest distance bin that holds examples (the retrieval the model learned)."""
        return next((b.accuracy for b in self.by_distance if b.n), None)

    def to_json(self) -> dict:
        return {
            "pe": self.pe,
            "ppl": [p.to_json() for p in self.ppl],
            "passkey": [p.to_json() for p in self.passkey],
            "by_distance": [b.to_json() for b in self.by_distance],
            "measured_break": self.measured_break,
            "falloff_distance": self.falloff_distance,
            "reference_accuracy": self.reference_accuracy,
            "prediction": self.prediction.to_json(),
        }

    @classmethod
    def from_json(cls, d: Any) -> RopeBaseModel:
        d = as_mapping(d)
        return cls(
            pe=d.get("pe"),
            ppl=tuple(PplLength.from_json(p) for p in d.get("ppl") or ()),
            passkey=tuple(PasskeyLength.from_json(p) for p in d.get("passkey") or ()),
            by_distance=tuple(DistanceBin.from_json(b) for b in d.get("by_distance") or ()),
            measured_break=d.get("measured_break"),
            falloff_distance=d.get("falloff_distance"),
            prediction=RopePrediction.from_json(d.get("prediction")),
        )


@dataclass(frozen=True)
class RopeBaseBlock:
    """Every model of the experiment, with the settings its numbers were measured with."""

    train_length: int | None = None
    lengths: tuple[int, ...] = ()
    delta: float | None = None  # δ of 000 Definition 0.1
    fall_fraction: float | None = None  # retrieval falls off below this fraction of the nearest bin's accuracy
    passkey_n: int | None = None  # passkey examples per length
    targets: int | None = None  # last-token targets per length
    models: Mapping[str, RopeBaseModel] = field(default_factory=dict)  # {pe: model}, the study's order

    def to_json(self) -> dict:
        return {**measured_json(self), "models": {pe: m.to_json() for pe, m in self.models.items()}}

    @classmethod
    def from_json(cls, d: Any) -> RopeBaseBlock:
        models = {str(pe): RopeBaseModel.from_json(m) for pe, m in as_mapping(as_mapping(d).get("models")).items()}
        return cls(**measured_from_json(d), models=models)


# The settings a block's numbers were measured with, in results.json's order (``lengths`` after them); the
# extension experiment measures with rope-base's code and records the same.
MEASURED = ("train_length", "delta", "fall_fraction", "passkey_n", "targets")


def measured_json(block) -> dict:
    return {**{k: getattr(block, k) for k in MEASURED}, "lengths": list(block.lengths)}


def measured_from_json(d: Any) -> dict:
    d = as_mapping(d)
    return {**{k: d.get(k) for k in MEASURED}, "lengths": tuple(d.get("lengths") or ())}


RESULTS = ResultsBlock("rope_base", RopeBaseBlock)


def block(results: StudyResults) -> RopeBaseBlock:
    """The rope-base block of ``results`` (empty when the results hold none)."""
    return RESULTS.of(results) or RopeBaseBlock()


__all__ = ["DistanceBin", "PasskeyLength", "PplLength", "RopeBaseBlock", "RopeBaseModel", "RopePrediction", "block"]
