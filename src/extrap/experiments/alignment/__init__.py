"""Experiment ``alignment`` (004 §5.2): T5 and ALiBi models trained on retrieval tasks, their attention
alignment τ and accuracy by length, with and without 004's alignment modes.

:mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.measure` (τ and
accuracy of one model at one length), :mod:`.records` (a worker's job, one length's record, its output),
:mod:`.results` (its block of results.json, {task: block}), :mod:`.claims`, :mod:`.tables`, :mod:`.figures`,
:mod:`.text` (how settings and τ are named and printed) and :mod:`.page` (the HTML fragment, with
``alignment.html.j2``).  Its README block is the study block (:func:`extrap.report.readme.study_markdown`).
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.alignment import plan
from extrap.experiments.alignment.claims import alignment_claims
from extrap.experiments.alignment.figures import alignment_figure_plan
from extrap.experiments.alignment.page import SECTIONS, alignment_context, anchor, missing
from extrap.experiments.alignment.presets import PRESETS
from extrap.experiments.alignment.results import RESULTS
from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock
from extrap.report.readme import BEGIN, END, study_markdown

SPEC = ExperimentSpec(
    name="alignment",
    citation="004 §5.2, Tables 4, 5, 9, Figs. 3-5",
    presets=PRESETS,
    plan=plan.build,
    claims=alignment_claims,
    missing=missing,
    figures=lambda results, notes, out_dir: alignment_figure_plan(results),
    page=Page("alignment.html.j2", Path(__file__).parent, alignment_context, lambda r, b: SECTIONS, anchor),
    readme=ReadmeBlock(BEGIN, END, study_markdown),
    results=RESULTS,
    options=frozenset({"tasks"}),
    gated=False,
)

__all__ = ["BEGIN", "END", "SPEC"]
