"""The report of ``extrap study --experiment alignment`` (004 Tables 4, 5, 9; Figs. 3-5).

:mod:`.claims` judges 004's claims per task, :mod:`.figures` draws τ and accuracy against
length, :mod:`.tables` builds the tables (HTML and :func:`markdown_tables`).
"""

from extrap.report.alignment.claims import MIN_TRAIN_ACC, TAU_TOL, alignment_claims
from extrap.report.alignment.figures import alignment_figure_plan
from extrap.report.alignment.tables import alignment_context, markdown_tables, missing
from extrap.report.alignment.text import LABELS

__all__ = [
    "LABELS",
    "MIN_TRAIN_ACC",
    "TAU_TOL",
    "alignment_claims",
    "alignment_context",
    "alignment_figure_plan",
    "markdown_tables",
    "missing",
]
