"""Experiments ``extrapolation`` (000: which relative encodings extrapolate, and their TRF against the ERF) and
``alibi-slopes`` (003 §4: ALiBi's slopes shifted, shared and windowed), one plan with two specs.

:mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.records` (a worker's
job and output), :mod:`.measure` (theory rows, TRF against ERF, timing), :mod:`.claims` (with :mod:`.lookup`
and :mod:`.values`), :mod:`.tables`, :mod:`.figures` and :mod:`.shapes`, :mod:`.page` (the HTML fragment, with
``extrapolation.html.j2``; :mod:`.paper`: 003 Table 1 beside it).  Their sections of results.json (theory, erf,
spearman, slopes, timing) are the file's own top-level keys, so :class:`~extrap.results.StudyResults` keeps
them as fields (see its docstring); their README block is the main study block, which the alignment
experiment shares (:func:`extrap.report.readme.study_markdown`).
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.extrapolation import page, plan
from extrap.experiments.extrapolation.claims import extrapolation_claims, slope_study_claims
from extrap.experiments.extrapolation.figures import extrapolation_figures
from extrap.experiments.extrapolation.presets import PRESETS
from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock
from extrap.report.readme import BEGIN, END, study_markdown

README = ReadmeBlock(BEGIN, END, study_markdown)
HERE = Path(__file__).parent


def _spec(name: str, citation: str, timed: bool, claims) -> ExperimentSpec:
    return ExperimentSpec(
        name=name,
        citation=citation,
        presets=PRESETS,
        plan=plan.build,
        claims=claims,
        missing=page.missing(timed, slopes=name == "alibi-slopes"),
        figures=extrapolation_figures,
        page=Page("extrapolation.html.j2", HERE, page.extrapolation_context, page.toc(timed), page.anchor, runs=False),
        readme=README,
        timed=timed,
        options=frozenset({"delta"}),
    )


EXTRAPOLATION = _spec("extrapolation", "000 Figs. 3-7, Table 1", True, extrapolation_claims)
ALIBI_SLOPES = _spec("alibi-slopes", "003 §4, Table 1, Fig. 4", False, slope_study_claims)

__all__ = ["ALIBI_SLOPES", "EXTRAPOLATION", "README"]
