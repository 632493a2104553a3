"""The extension study's figure: perplexity and passkey accuracy against length, one curve per method."""

from __future__ import annotations

from extrap.experiments.extension.results import block
from extrap.report.panels import Curve, accuracy_axes, ppl_curves, two_panels
from extrap.results import StudyResults
from extrap.theory.plots import curve_style

CAPTION = (
    "Left: last-token perplexity against evaluation length (log₂ axis), one curve per method, bars one "
    "standard error, exp(loss ± se); the perplexity axis is logarithmic when the curves span a factor of 10; "
    "▲ the measured break (first length with |Δppl|/ppl > δ beyond its noise); dashed: L_tr. Right: passkey "
    "exact match (greedy) against length."
)


def ppl_panel(ax, results: StudyResults) -> None:
    b = block(results)
    curves = [Curve(name, m.ppl, m.measured_break) for name, m in b.methods.items()]
    ppl_curves(ax, curves, b.train_length, "PPL vs length per method", bars=True, size=7, fontsize=6, ncol=2)


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
