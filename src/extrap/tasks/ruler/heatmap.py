"""The needle heatmap: a task's score by needle depth (rows) and length (columns), saved as PNG and SVG.

Drawn on its own Agg canvas through :mod:`extrap.plotting` (no pyplot state); a cell with no example (or a
failed length) is left blank.  One figure per task that has a depth (cwe and fwe have none).
"""

from __future__ import annotations

import math
from pathlib import Path

from extrap.errors import ExtrapError
from extrap.io import make_folder
from extrap.plotting import new_figure, save_figure
from extrap.tasks.ruler.records import RulerReport, RulerTaskReport


def depth_matrix(task: RulerTaskReport) -> tuple[list[int], list[str], list[list[float]]]:
    """(lengths, depth bucket labels, rows of scores by depth then length; NaN where there is none)."""
    lengths = [r.length for r in task.results]
    cells = next((r.by_depth for r in task.results if r.by_depth), ())
    labels = [f"{c.lo:.2g}-{c.hi:.2g}" for c in cells]
    rows = []
    for b in range(len(cells)):
        row = []
        for r in task.results:
            s = r.by_depth[b].score if r.by_depth else None
            row.append(math.nan if s is None else s)
        rows.append(row)
    return lengths, labels, rows


def heatmap_figure(task: RulerTaskReport, train_length: int | None = None):
    """The figure of one task (a ``matplotlib.figure.Figure``)."""
    lengths, labels, rows = depth_matrix(task)
    fig = new_figure(1.2 + 0.9 * len(lengths), 1.4 + 0.45 * len(labels))
    ax = fig.add_subplot()
    im = ax.imshow(rows, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(lengths)), [str(L) for L in lengths])
    ax.set_yticks(range(len(labels)), labels)
    if train_length in lengths:
        j = lengths.index(train_length)
        ax.axvline(j + 0.5, color="black", linestyle="--", linewidth=1)
    ax.set_xlabel("length (tokens)" + (" ; dashed: L_tr" if train_length in lengths else ""))
    ax.set_ylabel("needle depth")
    eff = task.effective_length.length
    ax.set_title(f"{task.task} ({task.metric}): effective length {eff if eff is not None else '-'}", fontsize=9)
    fig.colorbar(im, ax=ax, label="score")
    return fig


def plot_heatmaps(report: RulerReport, out_dir: str | Path, train_length: int | None = None) -> list[Path]:
    """``out_dir/heatmap_<task>.png`` and ``.svg`` for every task with a depth; the paths written."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExtrapError(f"{out} is not a folder: give a folder to write the figures to")
    make_folder(out)
    paths: list[Path] = []
    for task in report.tasks:
        if any(r.by_depth for r in task.results):
            paths += save_figure(heatmap_figure(task, train_length), out, f"heatmap_{task.task}")
    return paths
