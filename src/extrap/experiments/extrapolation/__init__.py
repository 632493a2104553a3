"""Experiments ``extrapolation`` (000: which relative encodings extrapolate, and their TRF against the ERF) and
``alibi-slopes`` (003 §4: ALiBi's slopes shifted, shared and windowed), one plan with two specs.

:mod:`.about` (their ``--help`` lines and default PEs), :mod:`.spec` (the two specs, built from here on first
use), :mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.records` (a worker's
job and output), :mod:`.measure` (theory rows, TRF against ERF, timing), :mod:`.claims` (with :mod:`.lookup`
and :mod:`.values`), :mod:`.tables`, :mod:`.figures` and :mod:`.shapes`, :mod:`.page` (the HTML fragment, with
``extrapolation.html.j2``; :mod:`.paper`: 003 Table 1 beside it).  :mod:`.results` holds their block of
results.json (theory, erf, spearman, slopes, timing: five top-level keys of the file, each where it always
stood); their README block is the main study block, which the alignment
experiment shares (:func:`extrap.report.readme.study_markdown`).
"""

from __future__ import annotations

from importlib import import_module

from extrap.experiments.assemble import lazy


def _part(name: str):
    """``.spec``'s ``name``, loaded on first use: importing this package (for :mod:`.about`) loads nothing."""
    return lambda: getattr(import_module(f"{__name__}.spec"), name)


__getattr__ = lazy(__name__, **{name: _part(name) for name in ("EXTRAPOLATION", "ALIBI_SLOPES", "README")})

__all__ = ["ALIBI_SLOPES", "EXTRAPOLATION", "README"]
