"""The records of an evaluation: ``extrap eval --json`` (:class:`EvalReport`) and ``--file`` (:class:`FileScore`).

Frozen dataclasses: :mod:`extrap.evaluate` builds them, the CLI, the study and the report read their
attributes.  Each ``to_json()`` writes the JSON that extrap has always written (key for key, in the same
order) and ``from_json()`` reads it back, also as earlier versions wrote it: a missing key reads as None,
an unknown key of a length or a window is ignored, and an unknown key at the top of a report is kept with
the run's provenance (:class:`Provenance`), where the run's source adds its own keys.  The window's
records (bound and measurement) live in :mod:`.window`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from extrap.results.records import as_mapping, finite_number
from extrap.results.window import WindowInfo

if TYPE_CHECKING:
    import torch

Z95 = 1.959964  # two-sided 95% quantile of the standard normal

Tau = float | list[float]  # one softmax τ, or one per layer (004)


def _tau(t: Any) -> Tau | None:
    return list(t) if isinstance(t, (list, tuple)) else t


@dataclass(frozen=True)
class LengthResult:
    """One evaluation length: the mean loss, its standard error, and what the window cost.

    ``loss`` is None when the length failed (``error`` says why).  The perplexity, its 95% interval and
    the bits per token follow from ``loss`` and ``stderr``.  With a window, ``exact_ppl`` scores the same
    tokens with exact attention (``exact_error``: why that could not be done).  Above L_tr, ``ratio`` is the
    verdict's |Δppl| / ppl(L_tr) at this length and ``ratio_stderr`` its standard error, paired
    (``ratio_paired``) when both lengths scored the same tokens (:mod:`extrap.evaluate.verdict`).  ``nll``
    holds the per-token losses (N,) in stream order for the verdict's paired comparison; it is not written.
    """

    length: int
    loss: float | None  # mean negative log-likelihood per scored token, nats
    tokens: int | None  # scored tokens
    seconds: float | None
    window: int | None = None  # keys per query at this length (None: exact attention)
    error: str | None = None
    exact_ppl: float | None = None  # the same tokens with exact attention, when a window was used
    temperature: Tau | None = None  # softmax τ used at this length (004), when one was set
    exact_error: str | None = None  # why the exact-attention comparison could not be made
    stderr: float | None = None  # standard error of ``loss`` (evaluate.stats); None: too few tokens
    ratio: float | None = None  # |ppl - ppl(L_tr)| / ppl(L_tr), for a length above L_tr (000 Definition 0.1)
    ratio_stderr: float | None = None  # standard error of ``ratio``; None: too few tokens to estimate it
    ratio_paired: bool | None = None  # ``ratio_stderr`` is of the per-token loss differences (same tokens)
    nll: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.loss is not None and math.isnan(self.loss):  # a failed length: no loss at all
            object.__setattr__(self, "loss", None)
        object.__setattr__(self, "temperature", _tau(self.temperature))

    @property
    def ok(self) -> bool:
        """Evaluated without error, to a finite loss."""
        return self.error is None and self.loss is not None and math.isfinite(self.loss)

    @property
    def ppl(self) -> float | None:
        if self.loss is None:
            return None
        return math.exp(self.loss) if math.isfinite(self.loss) else math.inf

    @property
    def bits_per_token(self) -> float | None:
        return self.loss / math.log(2) if self.ok else None

    @property
    def ppl_ci95(self) -> list[float] | None:
        """exp(loss ± Z95 se): the 95% interval of the perplexity."""
        if not self.ok or self.stderr is None:
            return None
        return [math.exp(self.loss - Z95 * self.stderr), math.exp(self.loss + Z95 * self.stderr)]

    @property
    def window_rel_diff(self) -> float | None:
        """|ppl - exact ppl| / exact ppl on the same scored tokens."""
        if not self.ok or self.exact_ppl is None:
            return None
        return abs(self.ppl - self.exact_ppl) / self.exact_ppl

    def to_json(self) -> dict:
        """Strict JSON: a failed length has null loss, ppl and bits, and its ``error``."""
        ok = self.ok
        out = {
            "length": self.length,
            "loss": self.loss if ok else None,
            "loss_stderr": self.stderr if ok else None,
            "ppl": self.ppl if ok else None,
            "ppl_ci95": self.ppl_ci95,
            "bits_per_token": self.bits_per_token,
            "tokens": self.tokens,
            "seconds": self.seconds,
            "window": self.window,
        }
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.error:
            out["error"] = self.error
        if ok and self.exact_error is not None:
            out.update(exact_ppl=None, window_rel_diff=None, exact_error=self.exact_error)
        elif ok and self.exact_ppl is not None:
            out.update(exact_ppl=self.exact_ppl, window_rel_diff=self.window_rel_diff)
        if ok and self.ratio is not None:
            out.update(ratio=self.ratio, ratio_stderr=self.ratio_stderr, ratio_paired=self.ratio_paired)
        return out

    @classmethod
    def from_json(cls, d: Mapping) -> LengthResult:
        """A length as any version wrote it: without a finite loss, the log of its ppl; a non-finite one: None."""
        d = as_mapping(d)
        loss = finite_number(d.get("loss"))
        if loss is None and (ppl := finite_number(d.get("ppl"))) is not None and ppl > 0:
            loss = math.log(ppl)
        return cls(
            length=d.get("length"),
            loss=loss,
            tokens=d.get("tokens"),
            seconds=d.get("seconds"),
            window=d.get("window"),
            error=d.get("error"),
            exact_ppl=d.get("exact_ppl"),
            temperature=d.get("temperature"),
            exact_error=d.get("exact_error"),
            stderr=d.get("loss_stderr"),
            ratio=finite_number(d.get("ratio")),
            ratio_stderr=finite_number(d.get("ratio_stderr")),
            ratio_paired=d.get("ratio_paired"),
        )


@dataclass(frozen=True)
class Provenance:
    """What a result records so that it can be reproduced (``Run.provenance()``), at the top of its JSON.

    ``source`` holds what the run's source adds (an extrap run's ``rope``; an hf: model's ``hf_path``,
    ``config_hash``, ``dtype``, ``rope`` and ``corpus``) and any other key of the JSON object that its
    record does not declare, as read.
    """

    seed: int | None = None
    corpus_hash: str | None = None
    extrap_version: str | None = None
    command: str | None = None
    source: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        head = {"seed": self.seed, "corpus_hash": self.corpus_hash, "extrap_version": self.extrap_version}
        return {**head, "command": self.command, **self.source}

    @classmethod
    def from_json(cls, d: Mapping, skip: Collection[str] = ()) -> Provenance:
        """The provenance at the top of ``d``; ``skip``: the keys that belong to the record holding it."""
        d, own = as_mapping(d), {f.name for f in fields(cls)} - {"source"}
        rest = {k: v for k, v in d.items() if k not in own and k not in skip}
        return cls(**{k: d.get(k) for k in own}, source=rest)


@dataclass(frozen=True)
class TemperatureInfo:
    """How the softmax τ was set (004): ``none``, ``fixed`` (one τ, or one per layer) or ``auto``.

    ``auto`` aligns τ at every length by ``align_mode`` on ``segments`` segments of the evaluation
    stream; ``tau`` then maps each length (its string) to the τ chosen there.
    """

    mode: str
    tau: Tau | dict[str, Tau] | None = None
    per_layer: bool | None = None
    align_mode: str | None = None
    segments: int | None = None

    def to_json(self) -> dict:
        keys = ("mode", "align_mode", "per_layer", "segments", "tau")
        return {k: v for k in keys if (v := getattr(self, k)) is not None}

    @classmethod
    def from_json(cls, d: Mapping) -> TemperatureInfo:
        d = as_mapping(d)
        return cls(d.get("mode"), d.get("tau"), d.get("per_layer"), d.get("align_mode"), d.get("segments"))


# The report's plain JSON values, in the order of its JSON (the window, results and provenance follow).
_HEAD = (
    "run",
    "pe",
    "protocol",
    "split",
    "train_length",
    "delta",
    "extrapolates",
    "worst_ratio",
    "worst_ratio_stderr",
    "verdict_reason",
    "within_noise",
    "noise",
)


@dataclass(frozen=True)
class EvalReport:
    """One protocol's evaluation of one run at several lengths, with 000 Definition 0.1's verdict.

    ``extrapolates`` None: no verdict (``verdict_reason`` says why).  ``worst_ratio`` is the largest
    |Δppl| / ppl(L_tr) over the lengths above L_tr, ``worst_ratio_stderr`` its standard error, and
    ``within_noise`` whether a comparison within noise could flip the verdict (``noise`` says which).
    ``temperature`` is None when no τ was asked for; ``error`` is set (by older studies) when the
    evaluation failed as a whole.
    """

    run: str | None = None
    pe: str | None = None
    protocol: str | None = None
    split: str | None = None
    train_length: int | None = None
    delta: float | None = None
    extrapolates: bool | None = None
    worst_ratio: float | None = None
    worst_ratio_stderr: float | None = None
    verdict_reason: str | None = None
    within_noise: bool | None = None
    noise: str | None = None
    window: WindowInfo | None = None
    results: tuple[LengthResult, ...] = ()
    step: int | None = None
    provenance: Provenance = field(default_factory=Provenance)
    temperature: TemperatureInfo | None = None
    error: str | None = None

    def result_at(self, length: int) -> LengthResult | None:
        return next((r for r in self.results if r.length == length), None)

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in _HEAD}
        out["window"] = self.window.to_json() if self.window is not None else None
        out["results"] = [r.to_json() for r in self.results]
        out.update(step=self.step, **self.provenance.to_json())
        if self.temperature is not None:
            out["temperature"] = self.temperature.to_json()
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_json(cls, d: Mapping) -> EvalReport:
        d = as_mapping(d)
        plain = {k: d.get(k) for k in _HEAD}
        results = d.get("results") if isinstance(d.get("results"), list) else []
        return cls(
            **plain,
            window=WindowInfo.from_json(d["window"]) if isinstance(d.get("window"), Mapping) else None,
            results=tuple(LengthResult.from_json(r) for r in results),
            step=d.get("step"),
            provenance=Provenance.from_json(d, skip=_REPORT_KEYS),
            temperature=TemperatureInfo.from_json(d["temperature"]) if d.get("temperature") is not None else None,
            error=d.get("error"),
        )


_REPORT_KEYS = {f.name for f in fields(EvalReport)} - {"provenance"}


@dataclass(frozen=True)
class FileScore:
    """``extrap eval --file``: one text file scored as a single sequence, streamed with the window."""

    run: str | None = None
    pe: str | None = None
    file: str | None = None
    file_sha256: str | None = None
    tokens: int | None = None  # scored tokens: the file's tokens minus one
    loss: float | None = None  # mean -log p per scored token, nats
    stderr: float | None = None  # batch-means standard error of ``loss``
    window: WindowInfo | None = None
    seconds: float | None = None
    step: int | None = None
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def ppl(self) -> float | None:
        return math.exp(self.loss) if self.loss is not None else None

    def to_json(self) -> dict:
        head = {"run": self.run, "pe": self.pe, "file": self.file, "file_sha256": self.file_sha256}
        score = {"tokens": self.tokens, "loss": self.loss, "loss_stderr": self.stderr, "ppl": self.ppl}
        window = self.window.to_json() if self.window is not None else None
        return {
            **head,
            **score,
            "window": window,
            "seconds": self.seconds,
            "step": self.step,
            **self.provenance.to_json(),
        }

    @classmethod
    def from_json(cls, d: Mapping) -> FileScore:
        d = as_mapping(d)
        return cls(
            **{k: d.get(k) for k in ("run", "pe", "file", "file_sha256", "tokens", "seconds", "step")},
            loss=finite_number(d.get("loss")),
            stderr=d.get("loss_stderr"),
            window=WindowInfo.from_json(d["window"]) if isinstance(d.get("window"), Mapping) else None,
            provenance=Provenance.from_json(d, skip=_FILE_KEYS),
        )


_FILE_KEYS = {"run", "pe", "file", "file_sha256", "tokens", "loss", "loss_stderr", "ppl", "window", "seconds", "step"}
