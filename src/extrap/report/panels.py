"""Axes that several experiments' figures share: perplexity and passkey accuracy against a log₂ length axis."""

from __future__ import annotations

from collections.abc import Callable

from extrap.plotting import new_figure


def two_panels(height: float, left: Callable, right: Callable):
    """A 12-inch-wide figure of two panels side by side, ``left(ax)`` and ``right(ax)`` drawing them."""
    fig = new_figure(12.0, height)
    left(fig.add_subplot(1, 2, 1))
    right(fig.add_subplot(1, 2, 2))
    return fig


def mark_break(ax, points, length: int | None, color, size: float) -> None:
    """▲ on the point (with ``length`` and ``ppl``) at the measured break, if one was measured."""
    hit = next((r for r in points if r.length == length), None)
    if hit is not None:
        ax.plot([hit.length], [hit.ppl], marker="^", ms=size, color=color, ls="none")


def ppl_axes(ax, values: list[float], train_length, title: str, **legend) -> None:
    """The perplexity panel's axes: log₂ lengths, L_tr dashed, and a log perplexity axis when the curves
    span a factor of 10 (exploding models would flatten the rest)."""
    ax.set_xscale("log", base=2)
    if values and min(values) > 0 and max(values) / min(values) >= 10:
        ax.set_yscale("log")
    if isinstance(train_length, int):
        ax.axvline(train_length, color="grey", ls="--", lw=1)
    labels(ax, "evaluation length (tokens)", "last-token perplexity", title, **legend)


def accuracy_axes(ax, xlabel: str, title: str, **legend) -> None:
    """The passkey panel's axes: log₂ ``xlabel`` against accuracy in [0, 1]."""
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    labels(ax, xlabel, "passkey accuracy", title, **legend)


def labels(ax, xlabel: str, ylabel: str, title: str, **legend) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(**legend)
    ax.grid(alpha=0.3)
