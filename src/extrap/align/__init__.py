"""Attention alignment by softmax temperature (004: Chi, Fan, Rudnicky).

Longer inputs flatten attention: more keys compete for the same unit of softmax mass, so the
average maximum probability P_max falls and the average entropy H rises ("dispersed attention",
004 Table 1). 004 sharpens every softmax at L_ex with a temperature τ < 1,
softmax((q k / sqrt(d) + r) / τ), chosen so that the sharpness at L_ex matches the sharpness at L_tr
with τ = 1. Nothing is fine-tuned; τ is applied only through the model's temperature
(:class:`extrap.model.protocol.ExtrapLM`).

What each module owns:

* :mod:`~extrap.align.formulas`: the model-free part (Props. 1-2, the log-length rule, the τ
  search over a grid, the checks of modes, grids and lengths);
* :mod:`~extrap.align.probe`: probing a model (P_max / entropy statistics over every softmax row,
  averaged layer-0 logits, evaluation segments);
* :mod:`~extrap.align.search`: Algorithm 1, global or layer by layer;
* :mod:`~extrap.align.temperature`: the temperature request (``--temperature``) read into a
  :class:`TemperatureSpec`;
* :mod:`~extrap.align.records`: what they return, as frozen records with ``to_json`` / ``from_json``
  (:class:`Stats`, :class:`Algorithm1`, :class:`ClosedForms`, :class:`AlignReport`), and the request
  :class:`AlignSettings`;
* :mod:`~extrap.align.report`: the entry points on a model: :func:`closed_forms`,
  :func:`aligned_temperature` (``--temperature auto``) and :func:`align_report` (``extrap align``).

The model is an :class:`extrap.model.protocol.ExtrapLM`, or the encoder of an
:class:`extrap.model.protocol.Seq2SeqLM` (T5, 004's setting): both have the probes and the temperature.

The names below are the public entry points; everything else is imported from its module.
"""

from extrap.align.formulas import DEFAULT_GRID, MAX_PROBE_LENGTH, MODES, SEARCH_MODES
from extrap.align.probe import DEFAULT_SEGMENTS, segments_of
from extrap.align.records import Algorithm1, AlignReport, AlignSettings, ClosedForms, LengthReport, Stats
from extrap.align.report import align_report, aligned_temperature, closed_forms
from extrap.align.search import algorithm1
from extrap.align.temperature import TemperatureSpec, check_layer_taus, parse_temperature_spec

__all__ = [
    "DEFAULT_GRID",
    "DEFAULT_SEGMENTS",
    "MAX_PROBE_LENGTH",
    "MODES",
    "SEARCH_MODES",
    "AlignReport",
    "AlignSettings",
    "Algorithm1",
    "ClosedForms",
    "LengthReport",
    "Stats",
    "TemperatureSpec",
    "algorithm1",
    "align_report",
    "aligned_temperature",
    "check_layer_taus",
    "closed_forms",
    "parse_temperature_spec",
    "segments_of",
]
