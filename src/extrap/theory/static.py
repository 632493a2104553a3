"""The static part of a content-reading bias RPE (CAPE): its base RPE's bias b, analysed as that RPE.

CAPE's logits are q·k/√Dh + b + f(q·k/√Dh, b) (Zheng et al. 2024).  Only b depends on positions alone,
so Theorem 0.4 (000) is applied to b; the learned f depends on the content and is left out, which
each row's explanation says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from extrap.positional.content import ContentBias
from extrap.theory.results import HeadResult


def static_values(scheme: ContentBias, values):
    """The base RPE's values out of the scheme's: of one layer (a mapping), of each layer (a list), or None."""
    if values is None:
        return None
    if isinstance(values, Mapping):
        return scheme.static_values(values)
    return [scheme.static_values(v) for v in values]


def static_part(scheme: ContentBias, analyse: Callable, num_heads: int, values, *args) -> list[HeadResult]:
    """``analyse(base, num_heads, base values, *args)`` (the engine's, its eps, lengths, train_length, heads)
    on ``scheme.static``, the rows named after ``scheme``."""
    base_values = static_values(scheme, values)
    note = f"static part b = {scheme.static.spec} only; the learned part is not analysed: {scheme.content_reason}"
    rows = analyse(scheme.static, num_heads, base_values, *args)
    return [replace(r, pe=scheme.spec, explanation=f"{r.explanation}; {note}") for r in rows]
