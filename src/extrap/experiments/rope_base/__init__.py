"""Experiment ``rope-base``: does RoPE break where its theory says?  Models at five bases, p-RoPE, partial
rotary and NoPE, measured up to 16 × L_tr beside ``extrap theory rope``'s predictions.

:mod:`.presets` (settings per preset), :mod:`.plan` (jobs, worker, results.json), :mod:`.measure` (one
model's numbers), :mod:`.results` (its block of results.json), :mod:`.claims`, :mod:`.tables`,
:mod:`.figures`, :mod:`.page` (the HTML fragment, with ``rope_base.html.j2``) and :mod:`.readme`.
"""

from __future__ import annotations

from extrap.experiments.assemble import lazy, package_spec

__getattr__ = lazy(
    __name__,
    SPEC=lambda: package_spec(
        __name__, name="rope-base", citation="Liu et al. 2024 (arXiv 2310.05209), Men et al. 2024"
    ),
)
