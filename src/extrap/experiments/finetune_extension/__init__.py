"""Experiment ``finetune-extension``: the extension experiment's RoPE base extended by a short fine-tune per method
under one budget (LCEG, Lu et al. 2024), beside approximate-attention methods.

:mod:`.presets` (the base and the budget), :mod:`.methods` (how each method is made), :mod:`.plan` (the job, its
worker, results.json), :mod:`.measure` (one method's numbers), :mod:`.records`, :mod:`.results` (its block of
results.json), :mod:`.claims` (LCEG's (a), (b), (c) and the goal line), :mod:`.tables`, :mod:`.figures`,
:mod:`.page` (with ``finetune_extension.html.j2``) and :mod:`.readme`.  It trains the base with rope-base's code.
"""

from __future__ import annotations

from extrap.experiments.assemble import lazy_spec

__getattr__ = lazy_spec(
    __name__,
    "finetune-extension",
    "LCEG (Lu et al. 2024): PI, NTK, YaRN, llama3, ABF, PoSE, dynamic NTK; S²-Attn, LM-Infinite, Self-Extend",
)
