"""Experiment ``effective-length``: RULER-style effective length of models trained on a task mix, beside their TRF.

:mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.measure` (one
model's numbers), :mod:`.results` (its block of results.json), :mod:`.claims`, :mod:`.tables`,
:mod:`.figures`, :mod:`.page` (the HTML fragment, with ``effective_length.html.j2``) and :mod:`.readme`.
"""

from __future__ import annotations

from extrap.experiments.assemble import lazy_spec

__getattr__ = lazy_spec(
    __name__, "effective-length", "RULER (Hsieh et al. 2024), NoLiMa's relative threshold, 000's TRF"
)
