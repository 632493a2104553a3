"""The records of an evaluation window: how W was chosen, and what it costs (bound and measurement).

:class:`WindowInfo` is the ``window`` object of ``extrap eval --json``; its ``error`` holds the
theory's bound (:class:`WindowBound`, 000 Eq. 22) and a measurement against exact attention
(:class:`WindowMeasure`), both made by :mod:`extrap.evaluate.window_error`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from extrap.results.records import FlatRecord, as_mapping


@dataclass(frozen=True)
class WindowBound(FlatRecord):
    """The bias weight beyond W as a fraction of each head's series sum B (000 Eq. 22)."""

    window: int
    worst_tail: float | None  # max over layers and heads of Σ_{t>=W} e^{r(t)} / B; None: no bound
    where: str | None = None  # the head with that tail
    eps: float | None = None  # the ε whose TRF chose W (window auto), which bounds every tail
    reduce: str | None = None
    reason: str | None = None  # why there is no bound


@dataclass(frozen=True)
class WindowMeasure:
    """Exact against windowed attention on the same tokens, at one length."""

    length: int
    exact_ppl: float | None = None
    window_ppl: float | None = None
    rel_diff: float | None = None  # |window ppl - exact ppl| / exact ppl
    dropped_mass: tuple[float, ...] = ()  # per layer: mean over sampled rows and heads
    dropped_mass_max: float | None = None  # max over layers, sampled rows and heads
    rows: int = 0
    note: str | None = None  # what could not be measured, and why

    def __post_init__(self):
        object.__setattr__(self, "dropped_mass", tuple(self.dropped_mass))

    def to_json(self) -> dict:
        return {**asdict(self), "dropped_mass": list(self.dropped_mass)}

    @classmethod
    def from_json(cls, d: Mapping) -> WindowMeasure:
        d = as_mapping(d)
        values = {f.name: d[f.name] for f in fields(cls) if d.get(f.name) is not None}
        return cls(**{"length": d.get("length"), **values})


@dataclass(frozen=True)
class WindowError:
    """What a window W costs, stated twice: the theory's bound and a measurement."""

    bound: WindowBound
    measured: WindowMeasure

    def to_json(self) -> dict:
        return {"bound": self.bound.to_json(), "measured": self.measured.to_json()}

    @classmethod
    def from_json(cls, d: Mapping) -> WindowError:
        d = as_mapping(d)
        return cls(WindowBound.from_json(d.get("bound")), WindowMeasure.from_json(d.get("measured")))


@dataclass(frozen=True)
class WindowInfo:
    """The attention window of an evaluation: ``none`` (exact attention), ``fixed`` W or ``auto``.

    ``auto`` is TRF(``trf_eps``) of the trained bias, reduced over heads by ``trf_reduce``
    (:data:`extrap.theory.WINDOW_AUTO_TRF`); ``size`` None: no window (``reason`` says why).
    ``error``: the window's bound and measured effect, when it cut keys at some length.
    """

    mode: str
    size: int | None = None
    reason: str | None = None
    trf_eps: float | None = None
    trf_reduce: str | None = None
    error: WindowError | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"mode": self.mode, "size": self.size}
        if self.mode == "auto":
            out.update(trf_eps=self.trf_eps, trf_reduce=self.trf_reduce)
        out["reason"] = self.reason
        if self.error is not None:
            out["error"] = self.error.to_json()
        return out

    @classmethod
    def from_json(cls, d: Mapping) -> WindowInfo:
        """Also as the first versions wrote it, with ``eps`` for ``trf_eps``."""
        d = as_mapping(d)
        error = WindowError.from_json(d["error"]) if isinstance(d.get("error"), Mapping) else None
        eps = d.get("trf_eps", d.get("eps"))
        return cls(d.get("mode"), d.get("size"), d.get("reason"), eps, d.get("trf_reduce"), error)
