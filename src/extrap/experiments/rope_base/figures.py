"""The rope-base study's figure: perplexity against length with each model's predicted bounds, and
passkey accuracy against the needle's distance with Men et al.'s first negative distance."""

from __future__ import annotations

import math

from extrap.experiments.rope_base.results import block
from extrap.experiments.rope_base.tables import model_name
from extrap.report.panels import accuracy_axes, mark_break, ppl_axes, two_panels
from extrap.results import StudyResults
from extrap.theory.plots import curve_style

CAPTION = (
    "Left: last-token perplexity per token against evaluation length (log₂ axis), one curve per model, bands "
    "one standard error, exp(loss ± se); the perplexity axis is logarithmic when the curves span a factor of 10. "
    "Dotted vertical line in a model's colour: Liu et al.'s from-scratch bound L_tr·β^(2/d); ▲ the measured "
    "break (first length with |Δppl|/ppl > δ beyond its noise); dashed: L_tr. Right: passkey exact match "
    "(greedy) against the needle's distance from the query, pooled over lengths, plotted at each bin's upper "
    "edge; dotted vertical line: Men et al.'s first distance where B(m) < 0."
)


def ppl_panel(ax, results: StudyResults) -> None:
    b, every = block(results), []
    for k, (pe, m) in enumerate(b.models.items()):
        style = curve_style(k)
        pts = [r for r in m.ppl if r.ppl is not None]
        if not pts:
            continue
        xs, ys = [r.length for r in pts], [r.ppl for r in pts]
        ax.plot(xs, ys, marker="o", ms=3, color=style.color, ls=style.ls, label=model_name(results, pe))
        if all(r.stderr is not None for r in pts):  # exp(loss ± se): one standard error of the mean loss
            lo, hi = [r.ppl * math.exp(-r.stderr) for r in pts], [r.ppl * math.exp(r.stderr) for r in pts]
            ax.fill_between(xs, lo, hi, color=style.color, alpha=0.12, lw=0)
        every += ys
        if m.prediction.scratch_bound is not None:
            ax.axvline(m.prediction.scratch_bound, color=style.color, ls=":", lw=1)
        mark_break(ax, pts, m.measured_break, style.color, 8)
    ppl_axes(ax, every, b.train_length, "PPL vs length, predicted bounds dotted", fontsize=7)


def passkey_panel(ax, results: StudyResults) -> None:
    for k, (pe, m) in enumerate(block(results).models.items()):
        style = curve_style(k)
        pts = [(x.hi, x.accuracy) for x in m.by_distance if x.n]
        if not pts:
            continue
        ax.plot([d for d, _ in pts], [a for _, a in pts], marker="o", ms=3, color=style.color, ls=style.ls, label=pe)
        if m.prediction.first_negative is not None:
            ax.axvline(m.prediction.first_negative, color=style.color, ls=":", lw=1)
    title = "retrieval vs distance, Men's first negative dotted"
    accuracy_axes(ax, "needle distance from the query (tokens)", title, fontsize=7)


def rope_base_figure(results: StudyResults):
    """The two panels, or None when no model was measured."""
    if not block(results).models:
        return None
    return two_panels(4.4, lambda ax: ppl_panel(ax, results), lambda ax: passkey_panel(ax, results))
