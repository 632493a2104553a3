"""Axes that several experiments' figures share: perplexity and passkey accuracy against a log₂ length axis."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from extrap.plotting import new_figure
from extrap.theory.plots import curve_style


def two_panels(height: float, left: Callable, right: Callable):
    """A 12-inch-wide figure of two panels side by side, ``left(ax)`` and ``right(ax)`` drawing them."""
    fig = new_figure(12.0, height)
    left(fig.add_subplot(1, 2, 1))
    right(fig.add_subplot(1, 2, 2))
    return fig


@dataclass(frozen=True)
class Curve:
    """One curve of a perplexity panel: ``points`` have ``length``, ``ppl`` (None: not measured) and ``stderr``
    (of the mean loss); ``measured_break``: the length marked ▲; ``bound``: a dotted line in its colour."""

    label: str
    points: Sequence[Any]
    measured_break: int | None = None
    bound: float | None = None


def ppl_curves(ax, curves: Sequence[Curve], train_length, title: str, *, bars: bool, size: float, **legend) -> None:
    """Perplexity against length, one ``curve_style`` per curve (a curve with no point keeps its style), one
    standard error exp(loss ± se) drawn as a band or, with ``bars`` (many curves would hide each other's
    bands), as error bars; then :func:`ppl_axes`."""
    every: list[float] = []
    for k, c in enumerate(curves):
        style = curve_style(k)
        pts = [r for r in c.points if r.ppl is not None]
        if not pts:
            continue
        xs, ys = [r.length for r in pts], [r.ppl for r in pts]
        se = [r.stderr for r in pts] if all(r.stderr is not None for r in pts) else None
        line = {"marker": "o", "ms": 3, "color": style.color, "ls": style.ls, "label": c.label}
        if bars:
            err = None if se is None else [[y - y * math.exp(-s) for y, s in zip(ys, se)],
                                           [y * math.exp(s) - y for y, s in zip(ys, se)]]  # fmt: skip
            ax.errorbar(xs, ys, yerr=err, lw=1, elinewidth=0.7, **line)
        else:
            ax.plot(xs, ys, **line)
            if se is not None:
                lo, hi = [y * math.exp(-s) for y, s in zip(ys, se)], [y * math.exp(s) for y, s in zip(ys, se)]
                ax.fill_between(xs, lo, hi, color=style.color, alpha=0.12, lw=0)
        every += ys
        if c.bound is not None:
            ax.axvline(c.bound, color=style.color, ls=":", lw=1)
        mark_break(ax, pts, c.measured_break, style.color, size)
    ppl_axes(ax, every, train_length, title, **legend)


def accuracy_curves(ax, curves: Sequence[Curve], xlabel: str, title: str, **legend) -> None:
    """Passkey accuracy, one ``curve_style`` per curve: ``points`` are (x, accuracy); then :func:`accuracy_axes`."""
    for k, c in enumerate(curves):
        style = curve_style(k)
        if not c.points:
            continue
        xs, ys = zip(*c.points)
        ax.plot(xs, ys, marker="o", ms=3, color=style.color, ls=style.ls, label=c.label)
        if c.bound is not None:
            ax.axvline(c.bound, color=style.color, ls=":", lw=1)
    accuracy_axes(ax, xlabel, title, **legend)


def panel_pair(name: str, height: float, measured: bool, left: Callable, right: Callable) -> list:
    """An experiment's figure plan of one :func:`two_panels` figure, ``name``; it draws nothing (None) when
    nothing was ``measured``."""
    return [(name, lambda: two_panels(height, left, right) if measured else None)]


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
