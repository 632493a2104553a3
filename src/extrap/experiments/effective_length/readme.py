"""The README's effective-length block: the models, the claims and the ranking beside the TRF."""

from __future__ import annotations

from extrap.experiments.effective_length.tables import ranking_rows
from extrap.report.readme import experiment_markdown
from extrap.report.view import Cell
from extrap.results import StudyResults

BEGIN = "<!-- effective-length:begin: rendered from its study's results by python -m extrap.report.readme -->"
END = "<!-- effective-length:end -->"


def markdown(results: StudyResults) -> str:
    """The README's effective-length section: the models, the claims, the ranking beside the TRF."""
    tasks = f"; tasks {', '.join(results.tasks or [])}"
    return experiment_markdown(results, tasks, [], markdown_table(results))


def markdown_table(results: StudyResults) -> list[str]:
    """The ranking as a Markdown table (the README's effective-length section)."""
    headers, rows = ranking_rows(results)
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(c.text if isinstance(c, Cell) else str(c) for c in row) + " |" for row in rows]
    return out
