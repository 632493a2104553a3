"""Experiment ``effective-length``: RULER-style effective length of models trained on a task mix, beside their TRF.

Plan and workers: :mod:`extrap.study.effective_length`; claims and tables: :mod:`extrap.report.effective_length`;
figures: :mod:`extrap.report.effective_length_figures`; page context: :mod:`extrap.report.effective_length_page`.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock, ResultsBlock
from extrap.report.effective_length import effective_length_claims, markdown_table
from extrap.report.effective_length_figures import effective_length_plan
from extrap.report.effective_length_page import effective_length_context, effective_length_missing
from extrap.report.readme import experiment_markdown
from extrap.results import StudyResults
from extrap.results.effective_length import EffectiveLengthBlock
from extrap.study import effective_length as plan
from extrap.study.presets import EFFECTIVE_LENGTH_PRESETS

BEGIN = "<!-- effective-length:begin: rendered from its study's results by python -m extrap.report.readme -->"
END = "<!-- effective-length:end -->"
SECTIONS = (("runs", "Training runs"), ("effective-length", "Effective length beside the TRF"))


def effective_length_markdown(results: StudyResults) -> str:
    """The README's effective-length section: the models, the claims, the ranking beside the TRF."""
    tasks = f"; tasks {', '.join(results.tasks or [])}"
    return experiment_markdown(results, tasks, [], markdown_table(results))


SPEC = ExperimentSpec(
    name="effective-length",
    citation="RULER (Hsieh et al. 2024), NoLiMa's relative threshold, 000's TRF",
    presets=EFFECTIVE_LENGTH_PRESETS,
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
