"""Experiment ``rope-base``: does RoPE break where its theory says?  Models at five bases, p-RoPE, partial
rotary and NoPE, measured up to 16 × L_tr beside ``extrap theory rope``'s predictions.

:mod:`.presets` (what each preset trains), :mod:`.plan` (its jobs, worker and results.json), :mod:`.measure`
(a model's numbers), :mod:`.results` (its results.json block), :mod:`.claims`, :mod:`.tables`, :mod:`.figures`,
:mod:`.page` (its HTML fragment, with ``rope_base.html.j2``) and :mod:`.readme`.
"""

from __future__ import annotations

from extrap.experiments.assemble import lazy_spec

__getattr__ = lazy_spec(__name__, "rope-base", "Liu et al. 2024 (arXiv 2310.05209), Men et al. 2024")
