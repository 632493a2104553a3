"""Experiment ``rope-base``: does RoPE break where its theory says?  Models at five bases, p-RoPE, partial
rotary and NoPE, measured up to 16 × L_tr beside ``extrap theory rope``'s predictions.

:mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.measure` (one
model's numbers), :mod:`.results` (its block of results.json), :mod:`.claims`, :mod:`.tables`,
:mod:`.figures`, :mod:`.page` (the HTML fragment, with ``rope_base.html.j2``) and :mod:`.readme`.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock, ResultsBlock
from extrap.experiments.rope_base import plan
from extrap.experiments.rope_base.claims import rope_base_claims
from extrap.experiments.rope_base.figures import rope_base_figure
from extrap.experiments.rope_base.page import rope_base_context, rope_base_missing
from extrap.experiments.rope_base.presets import PRESETS
from extrap.experiments.rope_base.readme import BEGIN, END, rope_base_markdown
from extrap.experiments.rope_base.results import RopeBaseBlock
from extrap.report.contents import figure_or_section

SECTIONS = (("runs", "Training runs"), ("rope-base", "RoPE base: theory against measurement"))
ANCHOR = figure_or_section("rope_base", "rope-base figure", ("rope-base", "RoPE base section"))

SPEC = ExperimentSpec(
    name="rope-base",
    citation="Liu et al. 2024 (arXiv 2310.05209), Men et al. 2024",
    presets=PRESETS,
    plan=plan.build,
    claims=rope_base_claims,
    missing=rope_base_missing,
    figures=lambda results, notes, out_dir: [("rope_base", lambda: rope_base_figure(results))],
    page=Page("rope_base.html.j2", Path(__file__).parent, rope_base_context, lambda r, b: SECTIONS, ANCHOR),
    readme=ReadmeBlock(BEGIN, END, rope_base_markdown),
    results=ResultsBlock("rope_base", RopeBaseBlock),
)

__all__ = ["BEGIN", "END", "SPEC", "rope_base_markdown"]
