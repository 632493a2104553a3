"""RULER's string-match metrics and the effective length (relative, NoLiMa; or absolute, RULER).

Scores are fractions in [0, 1] here (RULER prints them × 100).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from extrap.errors import ExtrapError
from extrap.tasks.ruler.records import EffectiveLength

FORMS = {"rel": "relative", "abs": "absolute"}


def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """RULER's string_match_all for one example: the share of references found in the prediction (any case)."""
    pred = prediction.lower()
    return sum(r.lower() in pred for r in references) / len(references)


def string_match_part(prediction: str, references: Sequence[str]) -> float:
    """RULER's string_match_part for one example: 1 if any reference is in the prediction (any case), else 0."""
    pred = prediction.lower()
    return float(any(r.lower() in pred for r in references))


def parse_threshold(spec: str) -> tuple[str, float]:
    """``rel:R`` (R × the score at L_tr; NoLiMa) or ``abs:S`` (a fixed score; RULER) -> (form, value in (0, 1])."""
    form, _, value = str(spec).partition(":")
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if form not in FORMS or not 0 < x <= 1:
        raise ExtrapError(f"threshold must be rel:R or abs:S with a number in (0, 1], got {spec!r}")
    return FORMS[form], x


def effective_length(
    lengths: Sequence[int], scores: Sequence[float | None], threshold: str, train_length: int | None
) -> EffectiveLength:
    """The largest tested length up to which every score stays >= the cutoff (None: the shortest fails).

    Relative (NoLiMa, Modarressi et al. 2025): cutoff = R × score(L_tr), which needs L_tr among ``lengths``
    and a score above 0 there.  Absolute (RULER, Hsieh et al. 2024, which uses Llama-2-7B's 85.6% at 4K):
    cutoff = S.  A failed length (score None) fails the threshold.
    """
    form, ratio = parse_threshold(threshold)
    pairs = sorted(zip(lengths, scores))
    ref_len = ref = None
    if form == "relative":
        ref_len = train_length
        ref = dict(pairs).get(train_length)
        if ref is None or ref <= 0:
            why = "L_tr was not scored" if train_length not in dict(pairs) else f"the score at L_tr is {ref}"
            return EffectiveLength(form, ratio, None, ref_len, ref, None, (), f"no relative cutoff: {why}")
    cutoff = ratio * ref if form == "relative" else ratio
    passing = tuple(L for L, s in pairs if s is not None and s >= cutoff)
    best = None
    for L, s in pairs:
        if s is None or s < cutoff:
            break
        best = L
    note = None if best is not None else f"the shortest length, {pairs[0][0]}, scores below the cutoff"
    return EffectiveLength(form, ratio, cutoff, ref_len, ref, best, passing, note)
