"""Experiment ``alignment`` (004 §5.2): T5 and ALiBi models trained on retrieval tasks, their attention
alignment τ and accuracy by length, with and without 004's alignment modes.

:mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.measure` (τ and
accuracy of one model at one length), :mod:`.records` (a worker's job, one length's record, its output),
:mod:`.results` (its block of results.json, {task: block}), :mod:`.claims`, :mod:`.tables`, :mod:`.figures`,
:mod:`.text` (how settings and τ are named and printed) and :mod:`.page` (the HTML fragment, with
``alignment.html.j2``).  Its README block is the study block (:func:`extrap.report.readme.study_markdown`).
"""

from __future__ import annotations

from extrap.experiments.assemble import lazy, package_spec
from extrap.experiments.protocol import ExperimentSpec, ReadmeBlock


def _spec() -> ExperimentSpec:
    from extrap.report import readme

    return package_spec(
        __name__,
        name="alignment",
        citation="004 §5.2, Tables 4, 5, 9, Figs. 3-5",
        readme=ReadmeBlock(readme.BEGIN, readme.END, readme.study_markdown),  # the main study block
        gated=False,
    )


__getattr__ = lazy(__name__, SPEC=_spec)
