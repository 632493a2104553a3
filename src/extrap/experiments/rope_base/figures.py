"""The rope-base study's figure: perplexity against length with each model's predicted bounds, and
passkey accuracy against the needle's distance with Men et al.'s first negative distance."""

from __future__ import annotations

from extrap.experiments.rope_base.results import block
from extrap.experiments.rope_base.tables import model_name
from extrap.report.panels import Curve, accuracy_curves, panel_pair, ppl_curves
from extrap.results import StudyResults

CAPTION = (
    "Left: last-token perplexity per token against evaluation length (log₂ axis), one curve per model, bands "
    "one standard error, exp(loss ± se); the perplexity axis is logarithmic when the curves span a factor of 10. "
    "Dotted vertical line in a model's colour: Liu et al.'s from-scratch bound L_tr·β^(2/d); ▲ the measured "
    "break (first length with |Δppl|/ppl > δ beyond its noise); dashed: L_tr. Right: passkey exact match "
    "(greedy) against the needle's distance from the query, pooled over lengths, plotted at each bin's upper "
    "edge; dotted vertical line: Men et al.'s first distance where B(m) < 0."
)


def ppl_panel(ax, results: StudyResults) -> None:
    b = block(results)
    curves = [
        Curve(model_name(results, pe), m.ppl, m.measured_break, m.prediction.scratch_bound)
        for pe, m in b.models.items()
    ]
    ppl_curves(ax, curves, b.train_length, "PPL vs length, predicted bounds dotted", bars=False, size=8, fontsize=7)


def passkey_panel(ax, results: StudyResults) -> None:
    curves = [
        Curve(pe, [(x.hi, x.accuracy) for x in m.by_distance if x.n], bound=m.prediction.first_negative)
        for pe, m in block(results).models.items()
    ]
    title = "retrieval vs distance, Men's first negative dotted"
    accuracy_curves(ax, curves, "needle distance from the query (tokens)", title, fontsize=7)


def figures(results: StudyResults, notes: dict, out_dir) -> list:
    """The two panels (None when no model was measured)."""
    left, right = (lambda ax: ppl_panel(ax, results)), (lambda ax: passkey_panel(ax, results))
    return panel_pair("rope_base", 4.4, bool(block(results).models), left, right)
