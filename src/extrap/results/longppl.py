"""The records of ``extrap eval --longppl``: LongPPL (Fang et al., ICLR 2025) at every evaluation length.

:class:`LongPPLResult` is one length, :class:`LongPPL` the settings and every length, and
:class:`LongPPLReport` an :class:`~extrap.results.evaluation.EvalReport` with its LongPPL: its JSON is the
report's JSON with one added key, ``longppl`` (a plain ``extrap eval`` writes no such key).  Light: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from extrap.results.evaluation import EvalReport
from extrap.results.records import as_mapping, finite_number

if TYPE_CHECKING:
    import torch


ALPHA = 2.0  # the authors' defaults: alpha = 2, beta = -2 (find_key_token, compute_longppl)
BETA = -2.0
BLOCK_FRACTION = 0.25  # the authors' sliding_window / trunc_len = 1024 / 4096


@dataclass(frozen=True)
class LongPPLResult:
    """One length: the evaluated model's perplexity over the key tokens that the evaluator chose.

    ``key_loss`` is the evaluated model's mean loss (nats) over the ``key_tokens`` key tokens among the
    ``tokens`` scored ones (None: no key token, or the length failed, ``error`` says why); ``loss`` its
    mean over all of them (the plain PPL's).  ``key`` (N,) marks the key tokens in stream order; it is
    not written.
    """

    length: int
    key_loss: float | None
    key_tokens: int | None
    tokens: int | None
    loss: float | None
    seconds: float | None = None
    error: str | None = None
    key: torch.Tensor | None = field(default=None, repr=False, compare=False)

    @property
    def longppl(self) -> float | None:
        """exp(mean loss over the key tokens)."""
        return math.exp(self.key_loss) if self.key_loss is not None else None

    @property
    def ppl(self) -> float | None:
        return math.exp(self.loss) if self.loss is not None else None

    @property
    def key_fraction(self) -> float | None:
        return self.key_tokens / self.tokens if self.key_tokens is not None and self.tokens else None

    def to_json(self) -> dict:
        out = {
            "length": self.length,
            "longppl": self.longppl,
            "key_tokens": self.key_tokens,
            "key_fraction": self.key_fraction,
            "tokens": self.tokens,
            "ppl": self.ppl,
            "key_loss": self.key_loss,
            "loss": self.loss,
            "seconds": self.seconds,
        }
        if self.error:
            out["error"] = self.error
        return out

    @classmethod
    def from_json(cls, d: Mapping) -> LongPPLResult:
        d = as_mapping(d)
        return cls(
            length=d.get("length"),
            key_loss=finite_number(d.get("key_loss")),
            key_tokens=d.get("key_tokens"),
            tokens=d.get("tokens"),
            loss=finite_number(d.get("loss")),
            seconds=d.get("seconds"),
            error=d.get("error"),
        )


@dataclass(frozen=True)
class LongPPL:
    """LongPPL's settings and one :class:`LongPPLResult` per evaluated length.

    A token is key when the evaluator's loss with its context cut to ``trunc_len`` tokens exceeds its loss
    with the whole context by more than ``alpha`` and that whole-context loss is below ``-beta``; the cut
    contexts come in blocks of ``block`` tokens (``block_fraction`` of ``trunc_len``).  ``evaluator`` is
    the evaluator run (the evaluated run itself by default).
    """

    alpha: float
    beta: float
    trunc_len: int
    block: int
    block_fraction: float
    evaluator: str
    results: tuple[LongPPLResult, ...] = ()

    def result_at(self, length: int) -> LongPPLResult | None:
        return next((r for r in self.results if r.length == length), None)

    def to_json(self) -> dict:
        head = {k: getattr(self, k) for k in ("alpha", "beta", "trunc_len", "block", "block_fraction", "evaluator")}
        return {**head, "results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, d: Mapping) -> LongPPL:
        d = as_mapping(d)
        results = d.get("results") if isinstance(d.get("results"), list) else []
        head = {k: d.get(k) for k in ("alpha", "beta", "trunc_len", "block", "block_fraction", "evaluator")}
        return cls(**head, results=tuple(LongPPLResult.from_json(r) for r in results))


@dataclass(frozen=True)
class LongPPLReport:
    """``extrap eval --longppl``: the evaluation's :class:`EvalReport` and its :class:`LongPPL`.

    ``to_json()`` is the report's JSON with the added key ``longppl``; ``from_json`` reads it back.
    """

    report: EvalReport
    longppl: LongPPL

    def to_json(self) -> dict:
        return {**self.report.to_json(), "longppl": self.longppl.to_json()}

    @classmethod
    def from_json(cls, d: Mapping) -> LongPPLReport:
        d = as_mapping(d)
        rest = {k: v for k, v in d.items() if k != "longppl"}  # else the report would keep it as provenance
        return cls(EvalReport.from_json(rest), LongPPL.from_json(d.get("longppl")))
