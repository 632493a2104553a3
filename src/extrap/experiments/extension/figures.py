"""The extension study's figure: perplexity and passkey accuracy against length, one curve per method."""

from __future__ import annotations

from extrap.experiments.extension.results import block
from extrap.report.panels import Curve, accuracy_curves, panel_pair, ppl_curves
from extrap.results import StudyResults

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
    curves = [
        Curve(name, [(p.length, p.accuracy) for p in m.passkey if p.accuracy is not None])
        for name, m in block(results).methods.items()
    ]
    accuracy_curves(ax, curves, "prompt length (tokens)", "passkey accuracy vs length per method", fontsize=6, ncol=2)


def figures(results: StudyResults, notes: dict, out_dir) -> list:
    """The two panels (None when no method was measured)."""
    left, right = (lambda ax: ppl_panel(ax, results)), (lambda ax: passkey_panel(ax, results))
    return panel_pair("extension", 4.6, bool(block(results).methods), left, right)
