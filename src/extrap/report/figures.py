"""The report's figures as PNG and SVG: each experiment's spec plans them, this module draws and saves them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extrap.experiments import registry
from extrap.plotting import save_figure
from extrap.results import StudyResults


def figure_plan(results: StudyResults, notes: dict, out_dir: Path) -> list[tuple[str, Callable[[], Any]]]:
    """(name, draw) for every figure of the results' experiment; draw returns None when there is no data."""
    return registry.get(results.experiment).figures(results, notes, out_dir)


def write_figures(results: StudyResults, out_dir: str | os.PathLike, notes: dict | None = None) -> dict[str, dict]:
    """Draw every figure the data allow: {name: {"png": rel, "svg": rel}} (paths relative to out_dir).

    A figure whose data are missing is skipped; one that fails to draw is skipped
    too, with the error in ``notes["error:<name>"]`` so the report can show it.
    """
    out_dir = Path(out_dir)
    notes = notes if notes is not None else {}
    written = {}
    for name, build in figure_plan(results, notes, out_dir):
        try:
            fig = build()
            if fig is not None:
                save_figure(fig, out_dir / "figures", name, dpi=110)
                written[name] = {ext: f"figures/{name}.{ext}" for ext in ("png", "svg")}
        except Exception as e:  # one broken figure must not cost the whole report
            notes[f"error:{name}"] = f"{type(e).__name__}: {e}"
    return written
