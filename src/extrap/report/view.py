"""What the templates render: tables of text cells and figure references, built from the results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extrap.report.values import fmt


@dataclass(frozen=True)
class Cell:
    """A table cell with hover text (``title``)."""

    text: str
    title: str | None = None


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str | Cell]]
    css: str = ""


def cell(x: Any, digits: int = 4) -> str | Cell:
    return x if isinstance(x, (str, Cell)) else fmt(x, digits)


def table(headers: list[str], rows: list[list[Any]], css: str = "") -> Table:
    """A table whose values are printed with :func:`extrap.report.values.fmt` (strings and cells as they are)."""
    return Table([str(h) for h in headers], [[cell(c) for c in row] for row in rows], css)


@dataclass(frozen=True)
class FigureRef:
    """A drawn figure (PNG shown, SVG linked, paths relative to the report), or why it could not be drawn."""

    name: str
    caption: str = ""
    png: str | None = None
    svg: str | None = None
    error: str | None = None


def figure_ref(figures: dict, notes: dict, name: str, caption: str = "") -> FigureRef | None:
    """The figure ``name`` if it was drawn (its caption from ``notes`` when the drawing wrote one), else None."""
    err = notes.get(f"error:{name}")
    if err:
        return FigureRef(name, error=err)
    if name not in figures:
        return None
    f = figures[name]
    return FigureRef(name, notes.get(name, caption), f["png"], f["svg"])
