"""The one matplotlib entry point: figures on their own Agg canvas, saved as PNG and SVG.

Figures are ``matplotlib.figure.Figure`` objects, never pyplot state, so drawing one never
changes the caller's backend or leaks memory between figures.  Saved files carry no timestamp
or version string: the same data gives byte-identical files.
"""

from __future__ import annotations

import io
from pathlib import Path

from extrap.io import atomic_write_bytes, check_file_target

FORMATS = ("png", "svg")


def new_figure(width: float = 6.4, height: float = 4.8, dpi: int = 100):
    """An empty ``Figure`` with constrained layout on an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _metadata(ext: str) -> dict:
    return {"Software": None} if ext == "png" else {"Date": None, "Creator": None}


def save_figure(fig, out_dir: str | Path, stem: str, dpi: int = 150) -> list[Path]:
    """``out_dir/stem.png`` and ``out_dir/stem.svg``, each written atomically; their paths.

    Every figure extrap saves passes here: matplotlib draws into memory and :func:`atomic_write_bytes`
    writes the file, so a symbolic link (or a FIFO, a folder) at either name is refused before either
    file is written, and never followed.
    """
    paths = [check_file_target(Path(out_dir) / f"{stem}.{ext}") for ext in FORMATS]
    images = []
    for ext in FORMATS:
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=dpi if ext == "png" else None, metadata=_metadata(ext))
        images.append(buf.getvalue())
    for path, data in zip(paths, images, strict=True):
        atomic_write_bytes(path, data)
    return paths
