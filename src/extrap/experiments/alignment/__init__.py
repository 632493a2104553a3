"""Experiment ``alignment`` (004 §5.2): T5 and ALiBi models trained on retrieval tasks, their attention
alignment τ and accuracy by length, with and without 004's alignment modes.

Plan and workers: :mod:`extrap.study.alignment`; claims, figures and tables: :mod:`extrap.report.alignment`;
here its page template and spec.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock
from extrap.report.alignment import alignment_claims, alignment_context, alignment_figure_plan, missing
from extrap.report.readme import BEGIN, END, study_markdown
from extrap.results import Claim, StudyResults
from extrap.study import alignment as plan
from extrap.study.presets import ALIGNMENT_PRESETS

SECTIONS = (("runs", "Training runs"), ("alignment", "Attention alignment on retrieval"))


def anchor(results: StudyResults, claim: Claim, figures: dict) -> tuple[str, str]:
    """The τ figure decides the τ claims, the accuracy figure the others (the section where a figure is missing)."""
    fig, title = ("alignment_tau", "τ figure") if "τ" in claim.claim else ("alignment_accuracy", "accuracy figure")
    return (f"fig-{fig}", title) if fig in figures else ("alignment", dict(SECTIONS)["alignment"])


SPEC = ExperimentSpec(
    name="alignment",
    citation="004 §5.2, Tables 4, 5, 9, Figs. 3-5",
    presets=ALIGNMENT_PRESETS,
    plan=plan.build,
    claims=alignment_claims,
    missing=missing,
    figures=lambda results, notes, out_dir: alignment_figure_plan(results),
    page=Page("alignment.html.j2", Path(__file__).parent, alignment_context, lambda r, b: SECTIONS, anchor),
    readme=ReadmeBlock(BEGIN, END, study_markdown),
    options=frozenset({"tasks"}),
    gated=False,
)
