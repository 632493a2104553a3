"""The theory of a trained bias: 000 Theorem 0.4 and Eq. 22 at the learned values, every layer and head.

000 computes the TRF "without training", from a scheme's formula; a scheme with learnable
bias parameters (KERPLE's r1, r2, T5's bucket table, FIRE's MLP) ends training with other
values in every layer and head.  The extrapolation study analyses both: the initial rows (its own
``measure.initial_rows``) and, for such schemes, the trained rows and TRF of each run
(:func:`trained_theory`), so the report can show the two side by side and rank the measured
ERFs against the TRF of the model that was measured.

The trained values are read exactly as ``extrap theory --checkpoint RUN`` reads them: the
stored tensors of the run's latest checkpoint (:func:`extrap.run.parameters.read_checkpoint_bias`)
in float64, mapped by the scheme to the values its bias uses, and analysed by
:func:`extrap.theory.analyse_checkpoint`.  The study's rows are therefore the command's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from extrap.results import TRAINED
from extrap.run.parameters import head_values, read_checkpoint_bias
from extrap.theory import STUDY_TRF, HeadResult, analyse_checkpoint, receptive_field
from extrap.theory.results import ParamValues


def learns_bias(scheme) -> bool:
    """Whether training changes the scheme's bias (a bias with learnable parameters)."""
    return bool(scheme.adds_bias and scheme.learned)


@dataclass(frozen=True)
class TrainedHead:
    """One head of one layer of a trained run: its analysis at the learned values, and those values."""

    pe: str  # the study's spelling of the spec
    layer: int  # the block's index
    result: HeadResult
    values: ParamValues  # the head's learned parameter values
    initial_values: ParamValues  # the same parameters before training

    def to_json(self) -> dict:
        row = {**self.result.to_json(), "pe": self.pe, "params": TRAINED, "layer": self.layer}
        return {**row, "values": dict(self.values), "initial_values": dict(self.initial_values)}

    @classmethod
    def from_json(cls, d: dict) -> TrainedHead:
        own = ("params", "layer", "values", "initial_values")
        result = HeadResult.from_json({k: v for k, v in d.items() if k not in own})
        return cls(d.get("pe"), d.get("layer"), result, d.get("values") or {}, d.get("initial_values") or {})


@dataclass(frozen=True)
class TrainedTheory:
    """A run's theory at its trained bias: a row per layer and head, and n(ε) of :data:`STUDY_TRF`
    over every layer and head (``trf`` None: there is none, ``trf_reason`` says why).

    ``learns_bias`` False: the scheme's bias learns nothing, so there is nothing trained to
    analyse (no rows, no TRF; its JSON is ``{}``).
    """

    rows: tuple[TrainedHead, ...] = ()
    trf: int | float | None = None
    trf_reason: str | None = None
    learns_bias: bool = True

    def to_json(self) -> dict:
        if not self.learns_bias:
            return {}
        return {"rows": [r.to_json() for r in self.rows], "trf": self.trf, "trf_reason": self.trf_reason}

    @classmethod
    def from_json(cls, d: dict) -> TrainedTheory:
        if "trf" not in d:
            return cls(learns_bias=False)
        return cls(tuple(TrainedHead.from_json(r) for r in d.get("rows") or ()), d["trf"], d.get("trf_reason"))


def trained_theory(run_dir: str | Path, pe: str, eps, lengths: list[int], train_length: int) -> TrainedTheory:
    """For a run whose bias has learned parameters: its theory rows per layer and head, and its TRF.

    Rows are in layer order (blocks.0.attn, blocks.1.attn, ...), with the head's learned values and
    its initial ones; a scheme whose bias learns nothing gives ``TrainedTheory(learns_bias=False)``.
    """
    from extrap import positional

    ckpt = read_checkpoint_bias(run_dir)
    scheme = positional.get(ckpt.spec)
    if not learns_bias(scheme):
        return TrainedTheory(learns_bias=False)
    H = ckpt.heads
    res = analyse_checkpoint(
        ckpt.layers, ckpt.spec, H, eps=list(eps), lengths=lengths, train_length=train_length or ckpt.train_length
    )
    init = scheme.init_values(H)
    layers, rows = [], []
    for index, layer in enumerate(res.layers):
        stored = {k: torch.as_tensor(v).detach().double() for k, v in ckpt.layers[layer.name].items()}
        values = scheme.values(stored, H)
        layers.append(values)
        for r in layer.heads:
            rows.append(TrainedHead(pe, index, r, head_values(values, r.head), head_values(init, r.head)))
    trf = receptive_field(scheme, layers, eps=STUDY_TRF.eps, reduce=STUDY_TRF.reduce, num_heads=H)
    return TrainedTheory(tuple(rows), trf.value, trf.reason)
