"""The tables of the rope-base study (HTML page and README): every model's measurements beside the theory."""

from __future__ import annotations

from extrap.experiments.rope_base.results import block
from extrap.report.values import fmt
from extrap.report.view import Cell, table
from extrap.results import StudyResults


def model_name(results: StudyResults, pe: str) -> str:
    return pe + (" (did not learn)" if results.learned(pe) is False else "")


def ppl_cell(row) -> str | Cell:
    text = fmt(row.ppl, 4)
    if row.ratio is None:
        return text
    mark = {True: " ▲", False: "", None: " ?"}[row.above_delta]
    return Cell(text + mark, f"|Δppl|/ppl {fmt(row.ratio, 3)} ± {fmt(row.ratio_stderr, 2)} (one standard error)")


def ppl_table(results: StudyResults):
    b = block(results)
    body = []
    for pe, m in b.models.items():
        rows = {r.length: r for r in m.ppl}
        body.append([model_name(results, pe)] + [ppl_cell(rows[L]) if L in rows else "–" for L in b.lengths])
    return table(["model"] + [f"{L}{' (L_tr)' if L == b.train_length else ''}" for L in b.lengths], body, "ppl")


def passkey_table(results: StudyResults):
    b = block(results)
    body = []
    for pe, m in b.models.items():
        by = {p.length: p for p in m.passkey}
        body.append([model_name(results, pe)] + [by[L].accuracy if L in by else None for L in b.lengths])
    return table(["model"] + [str(L) for L in b.lengths], body)


def distance_table(results: StudyResults):
    b = block(results)
    edges = next((m.by_distance for m in b.models.values() if m.by_distance), ())
    body = []
    for pe, m in b.models.items():
        cells = [Cell(fmt(x.accuracy, 2), f"{x.correct} of {x.n}") if x.n else "–" for x in m.by_distance]
        body.append([model_name(results, pe)] + cells)
    return table(["model"] + [f"({x.lo}, {x.hi}]" for x in edges], body)


def prediction_rows(results: StudyResults) -> tuple[list[str], list[list]]:
    """Per model: the theory's numbers beside the measured ones (shared by the HTML and README tables)."""
    headers = [
        "model",
        "in-distribution length",
        "L_tr·β^(2/d)",
        "measured break",
        "Men first negative m",
        "retrieval falls off at",
    ]
    rows = []
    for pe, m in block(results).models.items():
        p = m.prediction
        rows.append(
            [
                model_name(results, pe),
                p.in_distribution_length if p.error is None else "–",
                fmt(p.scratch_bound, 4) if p.scratch_bound is not None else "–",
                m.measured_break if m.measured_break is not None else "none",
                p.first_negative if p.first_negative is not None else "–",
                m.falloff_distance if m.falloff_distance is not None else "none",
            ]
        )
    return headers, rows
