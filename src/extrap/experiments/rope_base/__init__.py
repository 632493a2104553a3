"""Experiment ``rope-base``: does RoPE break where its theory says?  Models at five bases, p-RoPE, partial
rotary and NoPE, measured up to 16 × L_tr beside ``extrap theory rope``'s predictions.

Plan and workers: :mod:`extrap.study.rope_base`; claims and tables: :mod:`extrap.report.rope_base`; figure:
:mod:`extrap.report.rope_base_figures`; page context: :mod:`extrap.report.rope_base_page`.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock
from extrap.report.contents import figure_or_section
from extrap.report.readme import experiment_markdown
from extrap.report.rope_base import markdown_table, rope_base_claims
from extrap.report.rope_base_figures import rope_base_figure
from extrap.report.rope_base_page import rope_base_context, rope_base_missing
from extrap.results import StudyResults
from extrap.study import rope_base as plan
from extrap.study.presets import ROPE_BASE_PRESETS

BEGIN = "<!-- rope-base:begin: rendered from a rope-base study's results by python -m extrap.report.readme -->"
END = "<!-- rope-base:end -->"
SECTIONS = (("runs", "Training runs"), ("rope-base", "RoPE base: theory against measurement"))


def rope_base_markdown(results: StudyResults) -> str:
    """The README's rope-base section: the models, the two claims, the predictions beside the measurements."""
    return experiment_markdown(results, "", [], markdown_table(results))


ANCHOR = figure_or_section("rope_base", "rope-base figure", ("rope-base", "RoPE base section"))

SPEC = ExperimentSpec(
    name="rope-base",
    citation="Liu et al. 2024 (arXiv 2310.05209), Men et al. 2024",
    presets=ROPE_BASE_PRESETS,
    plan=plan.build,
    claims=rope_base_claims,
    missing=rope_base_missing,
    figures=lambda results, notes, out_dir: [("rope_base", lambda: rope_base_figure(results))],
    page=Page("rope_base.html.j2", Path(__file__).parent, rope_base_context, lambda r, b: SECTIONS, ANCHOR),
    readme=ReadmeBlock(BEGIN, END, rope_base_markdown),
)
