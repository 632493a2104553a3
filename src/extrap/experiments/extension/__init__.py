"""Experiment ``extension``: one RoPE model, trained as rope-base trains it, read with each training-free
extension method (PI, NTK, YaRN, ReRoPE, Self-Extend, windows with sinks, ...).

:mod:`.presets` (the model and the methods per preset), :mod:`.plan` (the job, its worker, results.json),
:mod:`.methods` (each method as the study applies it), :mod:`.measure` (one method's numbers),
:mod:`.records` (the worker's job and output), :mod:`.results` (its block of results.json), :mod:`.claims`
(with the goal line), :mod:`.tables`, :mod:`.figures`, :mod:`.page` (with ``extension.html.j2``) and
:mod:`.readme`.  It trains and measures with rope-base's code (:mod:`extrap.experiments.rope_base`).
"""

from __future__ import annotations

from extrap.experiments.assemble import lazy_spec

__getattr__ = lazy_spec(
    __name__, "extension", "PI, NTK, YaRN, Llama 3, ReRoPE, Self-Extend, DCA, LM-Infinite, STRING, StreamingLLM"
)
