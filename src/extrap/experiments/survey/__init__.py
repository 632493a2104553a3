"""The survey table: last-token perplexity by length of an extrapolation study of other encodings.

Not an experiment of its own: a README block (``python -m extrap.report.readme --section survey``, rendered by
:mod:`.readme`) that shows the results of ``extrap study --pe ...`` (experiment extrapolation) run on the
survey's encodings.
"""

from __future__ import annotations

from extrap.experiments.protocol import ReadmeBlock, ReadmeSection
from extrap.experiments.survey.readme import BEGIN, END, survey_markdown

SECTION = ReadmeSection("survey", "extrapolation", ReadmeBlock(BEGIN, END, survey_markdown))

__all__ = ["BEGIN", "END", "SECTION", "survey_markdown"]
