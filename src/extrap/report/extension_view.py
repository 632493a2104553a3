"""The extension study's figure (perplexity and passkey accuracy against length, one curve per method) and
what templates/extension.html.j2 shows, built from the results."""

from __future__ import annotations

import math

from extrap.plotting import new_figure
from extrap.report.extension import block, goal_line, passkey_table, ppl_table, prediction_rows
from extrap.report.values import fmt
from extrap.report.view import figure_ref, table
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
        hit = next((r for r in pts if r.length == m.measured_break), None)
        if hit is not None:
            ax.plot([hit.length], [hit.ppl], marker="^", ms=7, color=style.color, ls="none")
    ax.set_xscale("log", base=2)
    if every and min(every) > 0 and max(every) / min(every) >= 10:
        ax.set_yscale("log")
    if isinstance(b.train_length, int):
        ax.axvline(b.train_length, color="grey", ls="--", lw=1)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("last-token perplexity")
    ax.set_title("PPL vs length per method", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)


def passkey_panel(ax, results: StudyResults) -> None:
    for k, (name, m) in enumerate(block(results).methods.items()):
        style = curve_style(k)
        pts = [(p.length, p.accuracy) for p in m.passkey if p.accuracy is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=3, color=style.color, ls=style.ls, label=name)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("passkey accuracy")
    ax.set_title("passkey accuracy vs length per method", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)


def extension_figure(results: StudyResults):
    """The two panels, or None when no method was measured."""
    if results.extension is None or not results.extension.methods:
        return None
    fig = new_figure(12.0, 4.6)
    ppl_panel(fig.add_subplot(1, 2, 1), results)
    passkey_panel(fig.add_subplot(1, 2, 2), results)
    return fig


def extension_context(results: StudyResults, figures: dict, notes: dict) -> dict:
    """The section's settings, tables, goal line and figure (``methods`` empty: the section says what is missing)."""
    b = block(results)
    headers, rows = prediction_rows(results)
    return {
        "methods": list(b.methods),
        "pe": b.pe or "–",
        "train_length": fmt(b.train_length),
        "targets": fmt(b.targets),
        "delta": fmt(b.delta),
        "passkey_n": fmt(b.passkey_n),
        "fall_fraction": fmt(b.fall_fraction),
        "goal": goal_line(results),
        "predictions": table(headers, rows),
        "figure": figure_ref(figures, notes, "extension", CAPTION),
        "ppl": ppl_table(results),
        "passkey": passkey_table(results),
    }
