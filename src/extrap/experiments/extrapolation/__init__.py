"""Experiments ``extrapolation`` (000: which relative encodings extrapolate, and their TRF against the ERF) and
``alibi-slopes`` (003 §4: ALiBi's slopes shifted, shared and windowed), one plan with two specs.

The plan and its workers are :mod:`extrap.study.extrapolation`; claims :mod:`extrap.report.claims`;
figures :mod:`extrap.report.figures`; the page's context :mod:`extrap.report.sections`; here the page's
sections (:mod:`.page`), its template.
"""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.extrapolation import page
from extrap.experiments.protocol import ExperimentSpec, Page, ReadmeBlock
from extrap.report.claims import extrapolation_claims, slope_study_claims
from extrap.report.figures import extrapolation_figures
from extrap.report.readme import BEGIN, END, study_markdown
from extrap.report.sections import extrapolation_context
from extrap.study import extrapolation as plan
from extrap.study.presets import STUDY_PRESETS

README = ReadmeBlock(BEGIN, END, study_markdown)
HERE = Path(__file__).parent


def _spec(name: str, citation: str, timed: bool, claims) -> ExperimentSpec:
    return ExperimentSpec(
        name=name,
        citation=citation,
        presets=STUDY_PRESETS,
        plan=plan.build,
        claims=claims,
        missing=page.missing(timed, slopes=name == "alibi-slopes"),
        figures=extrapolation_figures,
        page=Page("extrapolation.html.j2", HERE, extrapolation_context, page.toc(timed), page.anchor, runs=False),
        readme=README,
        timed=timed,
    )


EXTRAPOLATION = _spec("extrapolation", "000 Figs. 3-7, Table 1", True, extrapolation_claims)
ALIBI_SLOPES = _spec("alibi-slopes", "003 §4, Table 1, Fig. 4", False, slope_study_claims)

__all__ = ["ALIBI_SLOPES", "EXTRAPOLATION", "README"]
