"""The fine-tuned extension study's figure: perplexity and passkey accuracy against length, one curve per method."""

from __future__ import annotations

from extrap.experiments.finetune_extension.results import block
from extrap.report.panels import accuracy_axes, mark_break, ppl_axes, two_panels
from extrap.results import StudyResults
from extrap.theory.plots import curve_style

CAPTION = (
    "Left: last-token perplexity against evaluation length (log₂ axis), one curve per method (dashed: approximate "
    "attention), ▲ the measured break; dashed vertical: L_tr. Right: passkey exact match (greedy) against length."
)


def ppl_panel(ax, results: StudyResults) -> None:
    b, every = block(results), []
    for k, (name, m) in enumerate(b.methods.items()):
        pts = [r for r in m.ppl if r.ppl is not None]
        if pts:
            color = curve_style(k).color
            ax.plot([r.length for r in pts], [r.ppl for r in pts], marker="o", ms=3, color=color,
                    ls="--" if m.approximate else "-", lw=1, label=name)  # fmt: skip
            every += [r.ppl for r in pts]
            mark_break(ax, pts, m.measured_break, color, 7)
    ppl_axes(ax, every, b.train_length, "PPL vs length per method", fontsize=6, ncol=2)


def passkey_panel(ax, results: StudyResults) -> None:
    for k, (name, m) in enumerate(block(results).methods.items()):
        pts = [(p.length, p.accuracy) for p in m.passkey if p.accuracy is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=3, color=curve_style(k).color, ls="--" if m.approximate else "-",
                    label=name)  # fmt: skip
    accuracy_axes(ax, "prompt length (tokens)", "passkey accuracy vs length per method", fontsize=6, ncol=2)


def finetune_figure(results: StudyResults):
    """The two panels, or None when no method was measured."""
    if not block(results).methods:
        return None
    return two_panels(4.6, lambda ax: ppl_panel(ax, results), lambda ax: passkey_panel(ax, results))


def figures(results: StudyResults, notes: dict, out_dir) -> list:
    """The experiment's one figure, drawn when the report asks for it."""
    return [("finetune-extension", lambda: finetune_figure(results))]
