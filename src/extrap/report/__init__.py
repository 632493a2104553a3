"""Figures, the claims checklist and a self-contained HTML report for ``extrap study``.

Input is a :class:`extrap.results.StudyResults` (:func:`load_results` reads ``results.json``,
also one written by an earlier version); every section of it may be missing or partial
(a run that failed, a study without ERF), and the report then says what is missing instead
of failing.

* :func:`compute_claims` checks the papers' claims against our numbers (000 =
  Qin et al. 2024, 003 = Chi et al. 2023, 004 = Chi et al.'s attention alignment).
  A claim is ``True`` only when the data reproduce it, ``False`` when they contradict
  it, ``None`` when the data needed are missing: nothing is forced.  Claims about trained
  models use only the models that learned (:mod:`.gate`); when none did, the claim is
  "not tested" with the losses and the unigram entropy.
* :func:`write_figures` draws the analogues of 000 Figs. 3/4 (PPL vs length),
  5 (ERF), 6 (TRF curves in tokens), 7 (exp(RPE) heatmaps) and 003 Fig. 4
  (cumulative normalised gradient) as PNG and SVG.
* :func:`write_report` writes the figures and ``report.html`` (inline CSS, no
  external resources; images by relative path), rendered from ``templates/*.j2``.

Modules: :mod:`.claims` judges the claims, :mod:`.figures` and :mod:`.shapes` draw,
:mod:`.sections` and :mod:`.page` build and render the page; an experiment's own claims, figures
and tables are in its package (``--experiment alignment``, 004: :mod:`extrap.experiments.alignment`).
"""

from extrap.report.claims import compute_claims, sliding_relative
from extrap.report.figures import write_figures
from extrap.report.lookup import num_heads, pe_verdict
from extrap.report.page import missing_summary, render_html, write_report
from extrap.report.paper import PAPER_003_TABLE1
from extrap.results import StudyResults, load_results

__all__ = [
    "PAPER_003_TABLE1",
    "StudyResults",
    "compute_claims",
    "load_results",
    "missing_summary",
    "num_heads",
    "pe_verdict",
    "render_html",
    "sliding_relative",
    "write_figures",
    "write_report",
]
