"""The README's finetune-extension block: the claims, the goal line and the methods × lengths table."""

from __future__ import annotations

from extrap.experiments.extension.readme import markdown_rows
from extrap.experiments.finetune_extension.claims import goal_line
from extrap.experiments.finetune_extension.tables import CELL_NOTE, THEORY_HEADER, header, main_rows, theory_rows
from extrap.report.readme import experiment_markdown
from extrap.results import StudyResults

BEGIN = "<!-- finetune-extension:begin: rendered from its results by python -m extrap.report.readme -->"
END = "<!-- finetune-extension:end -->"


def markdown(results: StudyResults) -> str:
    table = [CELL_NOTE, "", *markdown_rows(header(results), main_rows(results)), ""]
    table += markdown_rows(THEORY_HEADER, theory_rows(results))
    return experiment_markdown(results, "", [goal_line(results) + ".", ""], table)
