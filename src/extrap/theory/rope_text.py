"""The one-paragraph explanation of a RoPE analysis (:func:`explain`), as the bias verdicts have theirs."""

from __future__ import annotations

import math

from extrap.theory.rope_records import RopeTheory

_DECIDED = {
    "rotation-angles": "the rotation angles",
    "full-periods": "every pair having turned a full period",
    "search-cap": "the lengths searched",
}


def _n(x: float | None) -> str:
    return "-" if x is None else (f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}")


def _verdict(r: RopeTheory, stage: str | None) -> str:
    if r.decided_by == "rotation-angles":
        p = r.pairs[r.limiting_pair]
        return (
            f"Every length up to {r.in_distribution_length:,} stays within the angles training covered; one "
            f"token more and pair {p.index} (period {_n(p.period)} tokens) turns past the {p.train_angle:.4g} rad "
            f"it reached in {stage}, never having seen a full period."
        )
    if r.decided_by == "full-periods":
        return (
            "Every pair that rotates turned a full period in training, so no length brings an angle it has "
            "not seen (Liu et al.'s small-base case: no bound from the rotation angles)."
        )
    return "The frequencies depend on the length, and no length searched brought an angle beyond training."


def _liu(r: RopeTheory) -> str:
    liu = r.liu
    text = f"Liu et al. 2024: critical dimension {liu.critical_dim} of {r.head_dim}"
    if liu.extrapolation_bound is not None:
        text += f", extrapolation bound {_n(liu.extrapolation_bound)} tokens"
    if liu.regime is not None:
        text += f"; fine-tuned at {liu.tune_length:,}, critical base {liu.critical_base:.4g}, regime {liu.regime}"
    return text + (f" ({liu.liu_note})." if liu.liu_note else ".")


def _men(r: RopeTheory) -> str:
    m = r.men
    if m.aggregation_first_negative is None:
        text = f"Men et al. 2024: B(m) stays >= 0 at every distance below {m.aggregation_cap:,}"
    else:
        text = f"Men et al. 2024: B(m) first turns negative at m = {m.aggregation_first_negative:,}"
        if m.aggregation_first_negative < r.length:
            text += f", inside L' = {r.length:,}, so long-range aggregation is not assured there"
    if m.identity_pairs:
        text += f"; its {m.identity_pairs} pairs with θ = 0 never rotate and add cos(0) = 1 each to B(m)"
    if m.min_base_for_length is not None:
        side = "above" if r.base >= m.min_base_for_length else "below"
        text += f"; the least base keeping it >= 0 below L' is {m.min_base_for_length:.4g} ({r.base:g} is {side} it)"
    return text + "."


def explain(r: RopeTheory, stage: str | None) -> str:
    """One paragraph: what training covered, where that ends, and what Liu et al. and Men et al. add.

    ``stage`` names where the limiting pair's largest angle was reached (pre-training or fine-tuning).
    """
    seen = sum(p.full_period_seen for p in r.pairs)
    head = (
        f"{r.pe}, head dimension {r.head_dim}, trained at L_tr = {r.train_length:,}: {seen} of {len(r.pairs)} "
        f"pairs turned a full period in training."
    )
    at = (
        f"At L' = {r.length:,}, {r.pairs_beyond_training} pair{'s' if r.pairs_beyond_training != 1 else ''} "
        "turn beyond training."
    )
    parts = [head, _verdict(r, stage), at, _liu(r), _men(r)]
    if not math.isclose(r.attention_factor, 1.0):
        parts.append(f"The attention factor {r.attention_factor:.4g} scales every logit and leaves these signs alone.")
    return " ".join(parts)


__all__ = ["explain"]
