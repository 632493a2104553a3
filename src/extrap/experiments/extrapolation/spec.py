"""The specs of experiments ``extrapolation`` and ``alibi-slopes`` (the package's ``__init__`` builds them from
here on first use)."""

from __future__ import annotations

from pathlib import Path

from extrap.experiments.extrapolation import about, page, plan
from extrap.experiments.extrapolation.claims import extrapolation_claims, slope_study_claims
from extrap.experiments.extrapolation.figures import extrapolation_figures
from extrap.experiments.extrapolation.presets import PRESETS
from extrap.experiments.extrapolation.results import RESULTS
from extrap.experiments.protocol import About, ExperimentSpec, Page, ReadmeBlock
from extrap.report.readme import BEGIN, END, study_markdown

README = ReadmeBlock(BEGIN, END, study_markdown)
HERE = Path(__file__).parent


def _spec(name: str, citation: str, timed: bool, claims, told: About) -> ExperimentSpec:
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
        results=RESULTS,
        timed=timed,
        options=told.options,
        about=told,
    )


EXTRAPOLATION = _spec("extrapolation", "000 Figs. 3-7, Table 1", True, extrapolation_claims, about.EXTRAPOLATION)
ALIBI_SLOPES = _spec("alibi-slopes", "003 §4, Table 1, Fig. 4", False, slope_study_claims, about.ALIBI_SLOPES)

__all__ = ["ALIBI_SLOPES", "EXTRAPOLATION", "README"]
