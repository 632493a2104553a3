"""Experiment ``effective-length``: RULER-style effective length of models trained on a task mix, beside their TRF.

:mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.measure` (one
model's numbers), :mod:`.results` (its block of results.json), :mod:`.claims`, :mod:`.tables`,
:mod:`.figures`, :mod:`.page` (the HTML fragment, with ``effective_length.html.j2``) and :mod:`.readme`.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.effective_length import plan
from extrap.experiments.effective_length.claims import effective_length_claims
from extrap.experiments.effective_length.figures import effective_length_plan
from extrap.experiments.effective_length.page import effective_length_context, effective_length_missing
from extrap.experiments.effective_length.presets import PRESETS
from extrap.experiments.effective_length.readme import BEGIN, END, effective_length_markdown
from extrap.experiments.effective_length.results import EffectiveLengthBlock
from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock, ResultsBlock

SECTIONS = (("runs", "Training runs"), ("effective-length", "Effective length beside the TRF"))

SPEC = ExperimentSpec(
    name="effective-length",
    citation="RULER (Hsieh et al. 2024), NoLiMa's relative threshold, 000's TRF",
    presets=PRESETS,
    plan=plan.build,
    claims=effective_length_claims,
    missing=effective_length_missing,
    figures=lambda results, notes, out_dir: effective_length_plan(results, notes),
    page=Page(
        "effective_length.html.j2",
        Path(__file__).parent,
        effective_length_context,
        lambda r, b: SECTIONS,
        lambda r, c, f: SECTIONS[1],
    ),
    readme=ReadmeBlock(BEGIN, END, effective_length_markdown),
    results=ResultsBlock("effective_length", EffectiveLengthBlock),
    options=frozenset({"tasks"}),
)

__all__ = ["BEGIN", "END", "SPEC", "effective_length_markdown"]
