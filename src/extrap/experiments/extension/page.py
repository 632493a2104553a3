"""What extension.html.j2 shows: the extension study's settings, tables, goal line and figure."""

from __future__ import annotations

from extrap.experiments.extension.claims import goal_line
from extrap.experiments.extension.figures import CAPTION
from extrap.experiments.extension.results import block
from extrap.experiments.extension.tables import passkey_table, ppl_table, prediction_rows
from extrap.report.contents import figure_or_section, missing_results
from extrap.report.values import fmt
from extrap.report.view import figure_ref, table
from extrap.results import StudyResults

SECTIONS = (("runs", "Training runs"), ("extension", "Training-free extension of a RoPE model"))
anchor = figure_or_section("extension", "extension figure", SECTIONS[1])


def block_settings(b, names: tuple[str, ...]) -> dict:
    """A methods block's settings for a page: its methods, its PE and the named settings, formatted."""
    return {"methods": list(b.methods), "pe": b.pe or "–", **{n: fmt(getattr(b, n)) for n in names}}


def context(results: StudyResults, figures: dict, notes: dict) -> dict:
    """The section's settings, tables, goal line and figure (``methods`` empty: the section says what is missing)."""
    b = block(results)
    headers, rows = prediction_rows(results)
    return {
        **block_settings(b, ("train_length", "targets", "delta", "passkey_n", "fall_fraction")),
        "goal": goal_line(results),
        "predictions": table(headers, rows),
        "figure": figure_ref(figures, notes, "extension", CAPTION),
        "ppl": ppl_table(results),
        "passkey": passkey_table(results),
    }


def missing(results: StudyResults) -> list[str]:
    return missing_results("extension", block(results).methods, results.settings.get("methods", []))
