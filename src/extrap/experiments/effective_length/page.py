"""What effective_length.html.j2 shows: the ranking, the heatmaps and perplexity beside LongPPL."""

from __future__ import annotations

from extrap.experiments.effective_length.figures import PPL_CAPTION, heatmap_name
from extrap.experiments.effective_length.results import block
from extrap.experiments.effective_length.tables import ppl_table, ranking_rows, score_table, threshold_text
from extrap.report.contents import missing_results
from extrap.report.values import fmt
from extrap.report.view import figure_ref, table
from extrap.results import StudyResults

SECTIONS = (("runs", "Training runs"), ("effective-length", "Effective length beside the TRF"))


def context(results: StudyResults, figures: dict, notes: dict) -> dict:
    """The section's settings, tables and figures (``models`` empty: the section says what is missing)."""
    b = block(results)
    headers, rows = ranking_rows(results)
    heatmaps = [(pe, [f for t in b.tasks if (f := figure_ref(figures, notes, heatmap_name(pe, t)))]) for pe in b.models]
    return {
        "models": list(b.models),
        "train_length": fmt(b.train_length),
        "tasks": ", ".join(b.tasks),
        "n": fmt(b.n),
        "buckets": fmt(b.buckets),
        "threshold": threshold_text(b),
        "eval_tokens": fmt(b.eval_tokens),
        "ranking": table(headers, rows),
        "scores": [score_table(results, t) for t in b.tasks],
        "ppl": ppl_table(results),
        "ppl_figure": figure_ref(figures, notes, "efflen_ppl", PPL_CAPTION),
        "heatmaps": [(pe, figs) for pe, figs in heatmaps if figs],
    }


def missing(results: StudyResults) -> list[str]:
    return missing_results("effective-length", block(results).models, results.pes)
