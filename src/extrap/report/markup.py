"""HTML building blocks shared by the report's pages: escaped cells, tables, figures, claim marks."""

from __future__ import annotations

import html
from typing import Any

from extrap.report.results import _fmt


class Raw(str):
    """Already-escaped HTML for a table cell."""


def _esc(x: Any) -> str:
    return x if isinstance(x, Raw) else html.escape(x if isinstance(x, str) else _fmt(x))


def _table(headers: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _missing(text: str) -> str:
    return f'<p class="missing">Missing: {html.escape(text)}</p>'


def _figure_html(figures: dict, notes: dict, name: str, caption: str) -> str:
    err = notes.get(f"error:{name}")
    if err:
        return f'<p class="missing">Figure {html.escape(name)} could not be drawn: {html.escape(err)}</p>'
    if name not in figures:
        return ""
    f = figures[name]
    cap = html.escape(notes.get(name, caption))
    return (f'<figure><img src="{html.escape(f["png"])}" alt="{cap}" loading="eager">'
            f'<figcaption>{cap} <a href="{html.escape(f["svg"])}">SVG</a></figcaption></figure>')


_STATUS = {True: ("✔", "ok"), False: ("✘", "bad"), None: ("–", "na")}
