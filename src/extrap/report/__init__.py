"""Figures, the claims checklist and a self-contained HTML report for ``extrap study``.

Input is a :class:`extrap.results.StudyResults` (:func:`load_results` reads ``results.json``,
also one written by an earlier version); every section of it may be missing or partial
(a run that failed, a study without ERF), and the report then says what is missing instead
of failing.

* :func:`compute_claims` checks the papers' claims against our numbers (each experiment's own claims,
  in its package ``extrap.experiments.<name>``).  A claim is ``True`` only when the data reproduce it,
  ``False`` when they contradict it, ``None`` when the data needed are missing: nothing is forced.
  Claims about trained models use only the models that learned (:mod:`.gate`); when none did, the claim
  is "not tested" with the losses and the unigram entropy.
* :func:`write_figures` draws the experiment's figures (its spec plans them) as PNG and SVG.
* :func:`write_report` writes the figures and ``report.html`` (inline CSS, no
  external resources; images by relative path), rendered from ``templates/*.j2``.

Modules: :mod:`.claims` (the checklist through the registry), :mod:`.figures` (draw and save),
:mod:`.page` (the page shell) with :mod:`.runs` (the training-runs table) and :mod:`.contents`;
:mod:`.readme` (the README blocks). An experiment's own claims, figures and tables are in its package
(:mod:`extrap.experiments`).
"""

from extrap.report.claims import compute_claims
from extrap.report.figures import write_figures
from extrap.report.page import missing_summary, render_html, write_report
from extrap.results import StudyResults, load_results

__all__ = [
    "StudyResults",
    "compute_claims",
    "load_results",
    "missing_summary",
    "render_html",
    "write_figures",
    "write_report",
]
