"""The README's extension block: the model, the two claims, the goal line and the methods × lengths table."""

from __future__ import annotations

from extrap.experiments.extension.claims import goal_line
from extrap.experiments.extension.results import block
from extrap.experiments.extension.tables import length_header, prediction_rows
from extrap.report.readme import experiment_markdown
from extrap.report.values import fmt
from extrap.results import StudyResults

BEGIN = "<!-- extension:begin: rendered from an extension study's results by python -m extrap.report.readme -->"
END = "<!-- extension:end -->"


def markdown(results: StudyResults) -> str:
    """The README's extension section: the model, the two claims, the goal line and the methods × lengths table."""
    note = "Cells: last-token perplexity ± its standard error / passkey accuracy."
    table = [note, "", *markdown_table(results)]
    return experiment_markdown(results, "", [goal_line(results) + ".", ""], table)


def markdown_rows(headers: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(str(fmt(c)).replace("|", "\\|") for c in row) + " |" for row in rows]


def markdown_table(results: StudyResults) -> list[str]:
    """Methods × lengths (ppl ± se / passkey accuracy) and the predictions, as Markdown (the README's block)."""
    b = block(results)
    body = []
    for name, m in b.methods.items():
        rows = {r.length: r for r in m.ppl}
        cells = []
        for L in b.lengths:
            r, acc = rows.get(L), m.passkey_at(L)
            ppl = "–" if r is None or r.ppl is None else f"{r.ppl:.2f}"
            ppl += f" ± {r.ppl * r.stderr:.2f}" if r is not None and r.ppl and r.stderr is not None else ""
            cells.append(f"{ppl} / {fmt(acc, 2) if acc is not None else '–'}")
        body.append([name, *cells])
    return markdown_rows(["method", *length_header(b)], body) + [""] + markdown_rows(*prediction_rows(results))
