"""Experiment ``extension``: one RoPE model, trained as rope-base trains it, read with each training-free
extension method (PI, NTK, YaRN, ReRoPE, Self-Extend, windows with sinks, ...).

:mod:`.presets` (the model and the methods per preset), :mod:`.plan` (the job, its worker, results.json),
:mod:`.methods` (each method as the study applies it), :mod:`.measure` (one method's numbers),
:mod:`.records` (the worker's job and output), :mod:`.results` (its block of results.json), :mod:`.claims`
(with the goal line), :mod:`.tables`, :mod:`.figures`, :mod:`.page` (with ``extension.html.j2``) and
:mod:`.readme`.  It trains and measures with rope-base's code (:mod:`extrap.experiments.rope_base`).
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.extension import plan
from extrap.experiments.extension.claims import extension_claims
from extrap.experiments.extension.figures import extension_figure
from extrap.experiments.extension.page import extension_context, extension_missing
from extrap.experiments.extension.presets import PRESETS
from extrap.experiments.extension.readme import BEGIN, END, extension_markdown
from extrap.experiments.extension.results import ExtensionBlock
from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock, ResultsBlock
from extrap.report.contents import figure_or_section

SECTIONS = (("runs", "Training runs"), ("extension", "Training-free extension of a RoPE model"))
ANCHOR = figure_or_section("extension", "extension figure", ("extension", "extension section"))

SPEC = ExperimentSpec(
    name="extension",
    citation="PI, NTK, YaRN, Llama 3, ReRoPE, Self-Extend, DCA, LM-Infinite, STRING, StreamingLLM",
    presets=PRESETS,
    plan=plan.build,
    claims=extension_claims,
    missing=extension_missing,
    figures=lambda results, notes, out_dir: [("extension", lambda: extension_figure(results))],
    page=Page("extension.html.j2", Path(__file__).parent, extension_context, lambda r, b: SECTIONS, ANCHOR),
    readme=ReadmeBlock(BEGIN, END, extension_markdown),
    results=ResultsBlock("extension", ExtensionBlock),
    options=frozenset({"methods"}),
)

__all__ = ["BEGIN", "END", "SPEC", "extension_markdown"]
