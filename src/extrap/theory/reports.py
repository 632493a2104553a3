"""What ``extrap theory`` reports: :class:`TheoryReport` for PEs, :class:`CheckpointTheory` for ``--checkpoint``
(each with the RoPE analyses, :class:`~extrap.theory.rope_records.RopeTheory`, of its rotary schemes).

Each ``to_json`` writes the object the command prints with ``--json``; ``from_json`` reads it back,
as written by this or an earlier version.
"""

from __future__ import annotations

from dataclasses import dataclass

from extrap.theory.compare import Comparison
from extrap.theory.results import HeadResult, ParamValues
from extrap.theory.rope_records import RopeTheory

_PLACE = ("checkpoint", "part", "layer")
_EXTRA = ("slope", "press_slope", "params", "slope_note")


@dataclass(frozen=True)
class CheckpointHead:
    """One head of a checkpoint's own bias: where it sits, its analysis and its parameter values.

    ``layer`` is the block index (None where one set of values serves every layer: BLOOM/MPT).
    A BLOOM/MPT head also records the ALiBi ``slope`` its model computes, Press et al.'s slope
    for that head (``press_slope``) and, when the config asks for other slopes, ``slope_note``.
    """

    checkpoint: str
    part: str  # encoder | decoder
    layer: int | str | None
    result: HeadResult
    params: ParamValues | None = None
    slope: float | None = None
    press_slope: float | None = None
    slope_note: str | None = None

    def to_json(self) -> dict:
        out = {"checkpoint": self.checkpoint, "part": self.part, "layer": self.layer, **self.result.to_json()}
        if self.slope is not None:
            out.update(slope=self.slope, press_slope=self.press_slope)
        if self.params is not None:
            out["params"] = dict(self.params)
        if self.slope_note is not None:
            out["slope_note"] = self.slope_note
        return out

    @classmethod
    def from_json(cls, d: dict) -> CheckpointHead:
        result = HeadResult.from_json({k: v for k, v in d.items() if k not in _PLACE + _EXTRA})
        return cls(**{k: d.get(k) for k in _PLACE + _EXTRA}, result=result)


def _plots_and_rope(plots: tuple[str, ...], rope: tuple[RopeTheory, ...]) -> dict:
    """The optional tail of a theory report's JSON: the figures written and the RoPE analysis, when there are any."""
    out: dict = {}
    if plots:
        out["plots"] = list(plots)
    if rope:
        out["rope"] = [r.to_json() for r in rope]
    return out


@dataclass(frozen=True)
class CheckpointTheory:
    """``extrap theory --checkpoint``: every head of a run's learned bias or of an hf: checkpoint's."""

    checkpoint: str
    results: tuple[CheckpointHead, ...]
    plots: tuple[str, ...] = ()  # T5 bucket-table heatmaps written
    rope: tuple[RopeTheory, ...] = ()  # the RoPE analysis of a rotary checkpoint (its config)

    def to_json(self) -> dict:
        out = {"checkpoint": self.checkpoint, "results": [r.to_json() for r in self.results]}
        return {**out, **_plots_and_rope(self.plots, self.rope)}

    @classmethod
    def from_json(cls, d: dict) -> CheckpointTheory:
        results = tuple(CheckpointHead.from_json(r) for r in d.get("results") or ())
        rope = tuple(RopeTheory.from_json(r) for r in d.get("rope") or ())
        return cls(checkpoint=d.get("checkpoint"), results=results, plots=tuple(d.get("plots") or ()), rope=rope)


@dataclass(frozen=True)
class TheoryReport:
    """``extrap theory PE ...``: every head's analysis, the Theorem 0.5 comparisons and the figures written."""

    results: tuple[HeadResult, ...]
    comparisons: tuple[Comparison, ...] = ()
    plots: tuple[str, ...] = ()
    rope: tuple[RopeTheory, ...] = ()  # the RoPE analysis of the rotary PEs (with --head-dim)

    def to_json(self) -> dict:
        out = {"results": [r.to_json() for r in self.results]}
        if self.comparisons:
            out["comparisons"] = [c.to_json() for c in self.comparisons]
        return {**out, **_plots_and_rope(self.plots, self.rope)}

    @classmethod
    def from_json(cls, d: dict) -> TheoryReport:
        return cls(
            results=tuple(HeadResult.from_json(r) for r in d.get("results") or ()),
            comparisons=tuple(Comparison.from_json(c) for c in d.get("comparisons") or ()),
            plots=tuple(d.get("plots") or ()),
            rope=tuple(RopeTheory.from_json(r) for r in d.get("rope") or ()),
        )
