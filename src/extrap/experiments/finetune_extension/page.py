"""What finetune_extension.html.j2 shows: the settings, the goal line, the figure and the two tables."""

from __future__ import annotations

from extrap.experiments.extension.page import block_settings
from extrap.experiments.finetune_extension.claims import goal_line
from extrap.experiments.finetune_extension.figures import CAPTION
from extrap.experiments.finetune_extension.results import block
from extrap.experiments.finetune_extension.tables import CELL_NOTE, THEORY_HEADER, header, main_rows, theory_rows
from extrap.report.contents import figure_or_section, missing_results
from extrap.report.view import figure_ref, table
from extrap.results import StudyResults

SECTIONS = (("runs", "Training runs"), ("finetune-extension", "Fine-tuned extension of a RoPE model"))
anchor = figure_or_section(
    "finetune-extension", "finetune-extension figure", ("finetune-extension", "finetune-extension section")
)


def context(results: StudyResults, figures: dict, notes: dict) -> dict:
    b = block(results)
    return {
        **block_settings(b, ("train_length", "finetune_length", "budget", "targets", "passkey_n")),
        "goal": goal_line(results),
        "note": CELL_NOTE,
        "main": table(header(results), main_rows(results)),
        "theory": table(THEORY_HEADER, theory_rows(results)),
        "figure": figure_ref(figures, notes, "finetune-extension", CAPTION),
    }


def missing(results: StudyResults) -> list[str]:
    return missing_results("finetune-extension", block(results).methods, results.settings.get("methods", []))
