"""The fine-tuned extension study's figure: perplexity and passkey accuracy against length, one curve per method."""

from __future__ import annotations

from extrap.experiments.finetune_extension.results import block
from extrap.report.panels import accuracy_axes, mark_break, ppl_axes, two_panels
from extrap.results import StudyResults

CAPTION = (
    "Left: last-token perplexity against evaluation length (log₂ axis), one curve per method (dashed, square "
    "markers: approximate attention), ▲ the measured break; dashed vertical: L_tr. Right: passkey exact match "
    "(greedy) against length."
)


def method_style(k: int, approximate: bool) -> dict:
    """The k-th method's line: tab20's ten dark hues, then its light ones (12 methods, no colour twice), and
    dashed with square markers for approximate attention."""
    from matplotlib import colormaps

    color = colormaps["tab20"](2 * k if k < 10 else 2 * (k - 10) + 1)
    return {"color": color, "ls": "--" if approximate else "-", "marker": "s" if approximate else "o", "ms": 3}


def ppl_panel(ax, results: StudyResults) -> None:
    b, every = block(results), []
    for k, (name, m) in enumerate(b.methods.items()):
        pts = [r for r in m.ppl if r.ppl is not None]
        if pts:
            style = method_style(k, m.approximate)
            ax.plot([r.length for r in pts], [r.ppl for r in pts], lw=1, label=name, **style)
            every += [r.ppl for r in pts]
            mark_break(ax, pts, m.measured_break, style["color"], 7)
    ppl_axes(ax, every, b.train_length, "PPL vs length per method", fontsize=6, ncol=2)


def passkey_panel(ax, results: StudyResults) -> None:
    for k, (name, m) in enumerate(block(results).methods.items()):
        pts = [(p.length, p.accuracy) for p in m.passkey if p.accuracy is not None]
        if pts:
            ax.plot(*zip(*pts), label=name, **method_style(k, m.approximate))
    accuracy_axes(ax, "prompt length (tokens)", "passkey accuracy vs length per method", fontsize=6, ncol=2)


def finetune_figure(results: StudyResults):
    """The two panels, or None when no method was measured."""
    if not block(results).methods:
        return None
    return two_panels(4.6, lambda ax: ppl_panel(ax, results), lambda ax: passkey_panel(ax, results))


def figures(results: StudyResults, notes: dict, out_dir) -> list:
    """The experiment's one figure, drawn when the report asks for it."""
    return [("finetune-extension", lambda: finetune_figure(results))]
