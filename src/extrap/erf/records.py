"""What ``extrap erf`` is asked (:class:`ErfSettings`) and what it reports (:class:`RunErf`, :class:`ErfReport`).

Each record's ``to_json`` writes the JSON ``extrap erf --json`` prints (and the study records as a run's
``erf`` result); ``from_json`` reads it back, as written by this or an earlier version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from extrap.erf.measures import (
    ATTN_EPS,
    DEFAULT_SEGMENTS,
    GRAD_THRESHOLD,
    KINDS,
    TRF_SOURCES,
    AttentionERF,
    GradientERF,
    check_eps,
    check_positive,
    check_threshold,
)
from extrap.errors import ExtrapError
from extrap.theory.receptive import ERF_TRF


@dataclass(frozen=True)
class ErfSettings:
    """How to measure one run's receptive fields (the defaults are ``extrap erf``'s).

    ``length`` None: 4 x the run's training length (003 measures at L_ex = 4 L_tr); the
    attention ERF uses at most ATTN_MAX_LENGTH of it.  ``eps`` is the attention ERF's
    n_emp(eps); the TRF beside it is n(``trf_eps``) reduced over heads by ``trf_reduce``
    (:data:`extrap.theory.receptive.ERF_TRF`), at the ``trf_source`` parameters: ``init`` (the
    scheme's formula values, as in 000) or ``trained`` (the run's learned bias, every layer).
    ``corpus``: the corpus of an ``hf:PATH`` model (default stdlib; a project run reads its own).
    """

    kind: str = "both"  # grad | attn | both
    length: int | None = None
    segments: int = DEFAULT_SEGMENTS
    threshold: float = GRAD_THRESHOLD
    eps: float = ATTN_EPS
    split: str = "validation"
    batch: int = 4  # segments per backward pass
    trf_eps: float = ERF_TRF.eps
    trf_reduce: str = ERF_TRF.reduce
    trf_source: str = "init"
    device: str = "cpu"
    corpus: str | None = None

    def checked(self) -> ErfSettings:
        """These settings with their numbers checked (ExtrapError) and made floats."""
        if self.kind not in KINDS:
            raise ExtrapError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.trf_source not in TRF_SOURCES:
            raise ExtrapError(f"trf_source must be one of {', '.join(TRF_SOURCES)}, got {self.trf_source!r}")
        check_positive("segments", self.segments)
        check_positive("batch", self.batch)
        return replace(
            self,
            threshold=check_threshold(self.threshold),
            eps=check_eps(self.eps),
            trf_eps=check_eps(self.trf_eps),
        )


ERF_DEFAULTS = ErfSettings()
"""``extrap erf``'s settings when none are given."""


def finite(x):
    """``x``, or None where it is a float that is not finite (strict JSON has no NaN or Infinity)."""
    return None if isinstance(x, float) and not math.isfinite(x) else x


# the keys of a run's JSON object, in order; every other key is the run's provenance
_GRAD_KEYS = ("grad_erf", "grad_erf_of_mean_curve", "grad_per_segment", "grad_curve")
_KEYS = (
    "run",
    "pe",
    "length",
    "train_length",
    "split",
    "segments",
    "step",
    *_GRAD_KEYS,
    "threshold",
    "attn_erf",
    "eps",
) + ("trf", "trf_eps", "trf_reduce", "trf_source", "trf_reason")


@dataclass(frozen=True)
class RunErf:
    """One run's gradient ERF (003 §5.1), attention ERF (000 n_emp) and the theory's TRF (000 Eq. 22) beside them.

    ``grad`` / ``attn`` are None when that kind was not measured; ``trf`` is None when there is
    no number (``trf_reason`` says why).  Numbers that were not finite are None.  ``provenance``:
    the run's own record (seed, corpus hash, extrap version, command; an hf: model's source).
    """

    run: str | None
    pe: str | None
    length: int | None  # L_ex
    train_length: int | None
    split: str | None
    segments: int | None
    step: int | None
    threshold: float | None  # of the gradient ERF
    eps: float | None  # of the attention ERF's n_emp
    trf: int | float | None = None
    trf_eps: float | None = None
    trf_reduce: str | None = None
    trf_source: str | None = None  # init | trained
    trf_reason: str | None = None
    grad: GradientERF | None = None
    attn: AttentionERF | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        g = self.grad
        row = {
            "run": self.run,
            "pe": self.pe,
            "length": self.length,
            "train_length": self.train_length,
            "split": self.split,
            "segments": self.segments,
            "step": self.step,
            "grad_erf": finite(g.erf) if g else None,
            "grad_erf_of_mean_curve": g.erf_of_mean_curve if g else None,
            "grad_per_segment": list(g.per_segment) if g else None,
            "grad_curve": [finite(v) for v in g.curve] if g else None,
            "threshold": self.threshold,
            "attn_erf": self.attn.to_json() if self.attn else None,
            "eps": self.eps,
            "trf": finite(self.trf),
            "trf_eps": self.trf_eps,
            "trf_reduce": self.trf_reduce,
            "trf_source": self.trf_source,
            "trf_reason": self.trf_reason,
        }
        return {**row, **self.provenance}

    @classmethod
    def from_json(cls, d: dict) -> RunErf:
        """A run's object; one written before the TRF had its own eps used the attention ERF's ``eps``."""
        grad = None
        if any(d.get(k) is not None for k in _GRAD_KEYS):
            # the gradient ERF's own keys carry a grad_ prefix in a run's row; length, segments, threshold do not
            grad = GradientERF.from_json({**d, **{k.removeprefix("grad_"): d.get(k) for k in _GRAD_KEYS}})
        attn = d.get("attn_erf")
        return cls(
            **{k: d.get(k) for k in ("run", "pe", "length", "train_length", "split", "segments", "step")},
            threshold=d.get("threshold"),
            eps=d.get("eps"),
            trf=d.get("trf"),
            trf_eps=d.get("trf_eps", d.get("eps")),
            **{k: d.get(k) for k in ("trf_reduce", "trf_source", "trf_reason")},
            grad=grad,
            attn=AttentionERF.from_json(attn) if attn is not None else None,
            provenance={k: v for k, v in d.items() if k not in _KEYS},
        )


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's rho over ``n`` runs (None when undefined: fewer than two, or a constant ranking)."""

    rho: float | None
    n: int

    def to_json(self) -> dict:
        return {"rho": self.rho, "n": self.n}

    @classmethod
    def from_json(cls, d: dict) -> RankCorrelation:
        return cls(rho=d.get("rho"), n=d.get("n", 0))


@dataclass(frozen=True)
class ErfSpearman:
    """The TRF ranked against the gradient and the attention ERF, over the runs with both numbers."""

    grad: RankCorrelation
    attn: RankCorrelation

    def to_json(self) -> dict:
        return {"grad": self.grad.to_json(), "attn": self.attn.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> ErfSpearman:
        return cls(*(RankCorrelation.from_json(d.get(k) or {}) for k in ("grad", "attn")))


@dataclass(frozen=True)
class ErfReport:
    """``extrap erf``: every run's receptive fields and their rank correlations with the TRF.

    ``extrap_version``, ``command`` and ``plots`` are what the command adds (None / empty: not written).
    """

    runs: tuple[RunErf, ...]
    spearman: ErfSpearman
    extrap_version: str | None = None
    command: str | None = None
    plots: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {"runs": [r.to_json() for r in self.runs], "spearman": self.spearman.to_json()}
        for key, value in (("extrap_version", self.extrap_version), ("command", self.command)):
            if value is not None:
                out[key] = value
        if self.plots:
            out["plots"] = list(self.plots)
        return out

    @classmethod
    def from_json(cls, d: dict) -> ErfReport:
        """The command's JSON, or the ``{"rows", "spearman"}`` that ``compare_trf_erf`` once returned."""
        return cls(
            runs=tuple(RunErf.from_json(r) for r in d.get("runs", d.get("rows")) or ()),
            spearman=ErfSpearman.from_json(d.get("spearman") or {}),
            extrap_version=d.get("extrap_version"),
            command=d.get("command"),
            plots=tuple(d.get("plots") or ()),
        )
