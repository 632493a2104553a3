"""The tables of the extension study (HTML page and README): every method's measurements beside the theory."""

from __future__ import annotations

from extrap.experiments.extension.results import ExtensionBlock, block
from extrap.report.values import fmt
from extrap.report.view import Cell, table
from extrap.results import StudyResults


def ppl_cell(row) -> str | Cell:
    text = fmt(row.ppl, 4) + (f" ± {fmt(row.ppl * row.stderr, 2)}" if row.ppl and row.stderr is not None else "")
    if row.ratio is None:
        return text
    mark = {True: " ▲", False: "", None: " ?"}[row.above_delta]
    return Cell(text + mark, f"|Δppl|/ppl {fmt(row.ratio, 3)} ± {fmt(row.ratio_stderr, 2)} (one standard error)")


def length_header(b: ExtensionBlock) -> list[str]:
    return [f"{L}{' (L_tr)' if L == b.train_length else ''}" for L in b.lengths]


def ppl_table(results: StudyResults):
    b = block(results)
    body = []
    for name, m in b.methods.items():
        rows = {r.length: r for r in m.ppl}
        body.append([name] + [ppl_cell(rows[L]) if L in rows else "–" for L in b.lengths])
    return table(["method"] + length_header(b), body, "ppl")


def passkey_table(results: StudyResults):
    b = block(results)
    body = [[name] + [m.passkey_at(L) for L in b.lengths] for name, m in b.methods.items()]
    return table(["method"] + length_header(b), body)


def prediction_rows(results: StudyResults) -> tuple[list[str], list[list]]:
    """Per method: the predicted in-distribution length beside the measured break and passkey fall-off."""
    headers = ["method", "as run", "in distribution up to", "measured break", "passkey falls at"]
    rows, b = [], block(results)
    for name, m in b.methods.items():
        up_to = "any length" if m.predicted_length is None else m.predicted_length
        retrieves = bool(m.passkey_at(b.train_length))  # no fall-off can be read from 0 at L_tr
        falls = m.passkey_falloff or ("none" if retrieves else "no retrieval at L_tr")
        rows.append([name, m.spec or "–", f"{up_to} ({m.basis})", m.measured_break or "none", falls])
    return headers, rows
