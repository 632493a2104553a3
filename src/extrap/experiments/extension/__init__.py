"""Experiment ``extension``: one RoPE model, trained as rope-base trains it, read with each training-free
extension method (PI, NTK, YaRN, ReRoPE, Self-Extend, windows with sinks, ...).

Plan and workers: :mod:`extrap.study.extension`; claims and tables: :mod:`extrap.report.extension`; figure and
page context: :mod:`extrap.report.extension_view`.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock
from extrap.report.contents import figure_or_section
from extrap.report.extension import extension_claims, extension_missing, goal_line, markdown_table
from extrap.report.extension_view import extension_context, extension_figure
from extrap.report.readme import experiment_markdown
from extrap.results import StudyResults
from extrap.study import extension as plan
from extrap.study.presets import EXTENSION_PRESETS

BEGIN = "<!-- extension:begin: rendered from an extension study's results by python -m extrap.report.readme -->"
END = "<!-- extension:end -->"
SECTIONS = (("runs", "Training runs"), ("extension", "Training-free extension of a RoPE model"))


def extension_markdown(results: StudyResults) -> str:
    """The README's extension section: the model, the two claims, the goal line and the methods × lengths table."""
    note = "Cells: last-token perplexity ± its standard error / passkey accuracy."
    table = [note, "", *markdown_table(results)]
    return experiment_markdown(results, "", [goal_line(results) + ".", ""], table)


ANCHOR = figure_or_section("extension", "extension figure", ("extension", "extension section"))

SPEC = ExperimentSpec(
    name="extension",
    citation="PI, NTK, YaRN, Llama 3, ReRoPE, Self-Extend, DCA, LM-Infinite, STRING, StreamingLLM",
    presets=EXTENSION_PRESETS,
    plan=plan.build,
    claims=extension_claims,
    missing=extension_missing,
    figures=lambda results, notes, out_dir: [("extension", lambda: extension_figure(results))],
    page=Page("extension.html.j2", Path(__file__).parent, extension_context, lambda r, b: SECTIONS, ANCHOR),
    readme=ReadmeBlock(BEGIN, END, extension_markdown),
    options=frozenset({"methods"}),
)
