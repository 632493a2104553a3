"""What rope_base.html.j2 shows: the rope-base study's tables and figure, built from the results."""

from __future__ import annotations

from extrap.experiments.rope_base.figures import CAPTION
from extrap.experiments.rope_base.results import block
from extrap.experiments.rope_base.tables import distance_table, passkey_table, ppl_table, prediction_rows
from extrap.report.contents import figure_or_section, missing_results
from extrap.report.values import fmt
from extrap.report.view import figure_ref, table
from extrap.results import StudyResults

SECTIONS = (("runs", "Training runs"), ("rope-base", "RoPE base: theory against measurement"))
anchor = figure_or_section("rope_base", "rope-base figure", SECTIONS[1])


def context(results: StudyResults, figures: dict, notes: dict) -> dict:
    """The section's settings, tables and figure (``models`` empty: the section says what is missing)."""
    b = block(results)
    dims = {m.prediction.head_dim for m in b.models.values() if m.prediction.head_dim is not None}
    headers, rows = prediction_rows(results)
    return {
        "models": list(b.models),
        "train_length": fmt(b.train_length),
        "targets": fmt(b.targets),
        "delta": fmt(b.delta),
        "passkey_n": fmt(b.passkey_n),
        "fall_fraction": fmt(b.fall_fraction),
        "head_dim": ", ".join(map(str, sorted(dims))) or "–",
        "predictions": table(headers, rows),
        "figure": figure_ref(figures, notes, "rope_base", CAPTION),
        "ppl": ppl_table(results),
        "passkey": passkey_table(results),
        "distance": distance_table(results),
    }


def missing(results: StudyResults) -> list[str]:
    return missing_results("rope-base", block(results).models, results.pes)
