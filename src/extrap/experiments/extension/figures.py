"""The extension study's figure: perplexity and passkey accuracy against length, one curve per method."""

from __future__ import annotations

import math

from extrap.experiments.extension.results import block
from extrap.report.panels import accuracy_axes, mark_break, ppl_axes, two_panels
from extrap.results import StudyResults
from extrap.theory.plots import curve_style

CAPTION = (
    "Left: last-token perplexity against evaluation length (log₂ axis), one curve per method, bars one "
    "standard error, exp(loss ± se); the perplexity axis is logarithmic when the curves span a factor of 10; "
    "▲ the measured break (first length with |Δppl|/ppl > δ beyond its noise); dashed: L_tr. Right: passkey "
    "exact match (greedy) against length."
)


def ppl_panel(ax, results: StudyResults) -> None:
    b, every = block(results), []
    for k, (name, m) in enumerate(b.methods.items()):
        style = curve_style(k)
        pts = [r for r in m.ppl if r.ppl is not None]
        if not pts:
            continue
        xs, ys = [r.length for r in pts], [r.ppl for r in pts]
        err = None
        if all(r.stderr is not None for r in pts):  # exp(loss ± se) as bars: 14 bands would hide each other
            err = [
                [y - y * math.exp(-r.stderr) for y, r in zip(ys, pts)],
                [y * math.exp(r.stderr) - y for y, r in zip(ys, pts)],
            ]
        ax.errorbar(
            xs, ys, yerr=err, marker="o", ms=3, color=style.color, ls=style.ls, lw=1, elinewidth=0.7, label=name
        )
        every += ys
        mark_break(ax, pts, m.measured_break, style.color, 7)
    ppl_axes(ax, every, b.train_length, "PPL vs length per method", fontsize=6, ncol=2)


def passkey_panel(ax, results: StudyResults) -> None:
    for k, (name, m) in enumerate(block(results).methods.items()):
        style = curve_style(k)
        pts = [(p.length, p.accuracy) for p in m.passkey if p.accuracy is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=3, color=style.color, ls=style.ls, label=name)
    accuracy_axes(ax, "prompt length (tokens)", "passkey accuracy vs length per method", fontsize=6, ncol=2)


def extension_figure(results: StudyResults):
    """The two panels, or None when no method was measured."""
    if not block(results).methods:
        return None
    return two_panels(4.6, lambda ax: ppl_panel(ax, results), lambda ax: passkey_panel(ax, results))
