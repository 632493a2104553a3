"""The README's rope-base block: the models, the two claims, the predictions beside the measurements."""

from __future__ import annotations

from extrap.experiments.rope_base.tables import prediction_rows
from extrap.report.readme import experiment_markdown
from extrap.report.values import fmt
from extrap.results import StudyResults

BEGIN = "<!-- rope-base:begin: rendered from a rope-base study's results by python -m extrap.report.readme -->"
END = "<!-- rope-base:end -->"


def markdown(results: StudyResults) -> str:
    """The README's rope-base section: the models, the two claims, the predictions beside the measurements."""
    return experiment_markdown(results, "", [], markdown_table(results))


def markdown_table(results: StudyResults) -> list[str]:
    """The predictions beside the measurements, as a Markdown table (the README's rope-base section)."""
    headers, rows = prediction_rows(results)
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(fmt(c)) for c in row) + " |" for row in rows]
    return out
