"""RULER-style synthetic tasks (Hsieh et al. 2024) and BABILong-style qa1/qa2, offline and deterministic.

Generators (:func:`make_ruler_example`), scoring with the effective length (:func:`score_ruler`), and the
needle heatmap (:func:`extrap.tasks.ruler.heatmap.plot_heatmaps`)::

    from extrap.tasks.ruler import make_ruler_example, score_ruler, RulerSettings
    ex = make_ruler_example("vt", tokenizer, 1024, seed=0, depth=0.3)
    report = score_ruler(model, tokenizer, RulerSettings(["niah_single", "vt"], [256, 512], train_length=256))
"""

from extrap.tasks.ruler.haystack import HAYSTACKS, NOISE, get_haystack
from extrap.tasks.ruler.metrics import effective_length, parse_threshold, string_match_all, string_match_part
from extrap.tasks.ruler.records import (
    DepthCell,
    EffectiveLength,
    LengthMean,
    RulerExample,
    RulerLength,
    RulerReport,
    RulerRun,
    RulerScore,
    RulerSettings,
    RulerTaskReport,
)
from extrap.tasks.ruler.registry import (
    RULER_TASKS,
    check_ruler_task,
    has_depth,
    make_ruler_example,
    ruler_min_length,
    ruler_params,
)
from extrap.tasks.ruler.score import score_ruler

__all__ = [
    "HAYSTACKS",
    "NOISE",
    "RULER_TASKS",
    "DepthCell",
    "EffectiveLength",
    "LengthMean",
    "RulerExample",
    "RulerLength",
    "RulerReport",
    "RulerRun",
    "RulerScore",
    "RulerSettings",
    "RulerTaskReport",
    "check_ruler_task",
    "effective_length",
    "get_haystack",
    "has_depth",
    "make_ruler_example",
    "parse_threshold",
    "ruler_min_length",
    "ruler_params",
    "score_ruler",
    "string_match_all",
    "string_match_part",
]
