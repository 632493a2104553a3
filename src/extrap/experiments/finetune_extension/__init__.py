"""Experiment ``finetune-extension``: the extension experiment's RoPE base extended by a short fine-tune per method
under one budget (LCEG, Lu et al. 2024), beside approximate-attention methods.

:mod:`.presets` (the base and the budget), :mod:`.methods` (how each method is made), :mod:`.plan` (the job, its
worker, results.json), :mod:`.measure` (one method's numbers), :mod:`.records`, :mod:`.results` (its block of
results.json), :mod:`.claims` (LCEG's (a), (b), (c) and the goal line), :mod:`.tables`, :mod:`.figures`,
:mod:`.page` (with ``finetune_extension.html.j2``) and :mod:`.readme`.  It trains the base with rope-base's code.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.finetune_extension import plan
from extrap.experiments.finetune_extension.claims import finetune_claims
from extrap.experiments.finetune_extension.figures import finetune_figure
from extrap.experiments.finetune_extension.page import finetune_context, finetune_missing
from extrap.experiments.finetune_extension.presets import PRESETS
from extrap.experiments.finetune_extension.readme import BEGIN, END, finetune_markdown
from extrap.experiments.finetune_extension.results import FinetuneBlock
from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock, ResultsBlock
from extrap.report.contents import figure_or_section

SECTIONS = (("runs", "Training runs"), ("finetune-extension", "Fine-tuned extension of a RoPE model"))
ANCHOR = figure_or_section(
    "finetune-extension", "finetune-extension figure", ("finetune-extension", "finetune-extension section")
)

SPEC = ExperimentSpec(
    name="finetune-extension",
    citation="LCEG (Lu et al. 2024): PI, NTK, YaRN, llama3, ABF, PoSE, dynamic NTK; S²-Attn, LM-Infinite, Self-Extend",
    presets=PRESETS,
    plan=plan.build,
    claims=finetune_claims,
    missing=finetune_missing,
    figures=lambda results, notes, out_dir: [("finetune-extension", lambda: finetune_figure(results))],
    page=Page("finetune_extension.html.j2", Path(__file__).parent, finetune_context, lambda r, b: SECTIONS, ANCHOR),
    readme=ReadmeBlock(BEGIN, END, finetune_markdown),
    results=ResultsBlock("finetune_extension", FinetuneBlock),
    options=frozenset({"methods"}),
)

__all__ = ["BEGIN", "END", "SPEC", "finetune_markdown"]
