"""Figures, the claims checklist and a self-contained HTML report for ``extrap study``.

Input is the ``results.json`` dict written by :mod:`extrap.study`; every section
of it may be missing or partial (a run that failed, a study without ERF), and the
report then says what is missing instead of failing.

* :func:`compute_claims` checks the papers' claims against our numbers (000 =
  Qin et al. 2024, 003 = Chi et al. 2023).  A claim is ``True`` only when the
  data reproduce it, ``False`` when they contradict it, ``None`` when the data
  needed are missing: nothing is forced.
* :func:`write_figures` draws the analogues of 000 Figs. 3/4 (PPL vs length),
  5 (ERF), 6 (normalised TRF curves), 7 (exp(RPE) heatmaps) and 003 Fig. 4
  (cumulative normalised gradient) as PNG and SVG.
* :func:`write_report` writes the figures and ``report.html`` (inline CSS, no
  external resources; images by relative path).

Modules: :mod:`.results` reads results.json, :mod:`.claims` judges the claims,
:mod:`.figures` draws, :mod:`.page` renders the HTML, and :mod:`.alignment`
holds the same three for ``--experiment alignment`` (004).
"""

from extrap.report.claims import compute_claims, sliding_relative
from extrap.report.figures import write_figures
from extrap.report.page import missing_summary, render_html, write_report
from extrap.report.results import PAPER_003_TABLE1, load_results, num_heads, pe_verdict, theory_rows

__all__ = ["PAPER_003_TABLE1", "compute_claims", "load_results", "missing_summary", "num_heads", "pe_verdict",
           "render_html", "sliding_relative", "theory_rows", "write_figures", "write_report"]
