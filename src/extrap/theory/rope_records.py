"""The records of the RoPE analysis (:func:`extrap.theory.rope.analyse_rope`): ``extrap theory rope --json``.

Frozen dataclasses; each ``to_json()`` writes the JSON keys of the ``"rope"`` entries and ``from_json()``
reads them back (unknown keys are ignored, a missing key reads as None).  :class:`RopeTheory` writes
its parts flat: the per-pair table under ``pairs``, then Liu et al.'s and Men et al.'s fields and the
verdict side by side, so every named quantity is one key deep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extrap.data.position_frequency import PositionFrequency
from extrap.results.records import FlatRecord


@dataclass(frozen=True)
class FrequencyPair(FlatRecord):
    """One rotary pair (dimensions i and i + d/2, rotate-half layout) and what training showed it."""

    index: int  # i
    theta: float  # θ_i, the effective frequency at the analysed length, radians per token
    period: float | None  # 2π/θ_i in tokens; None where θ_i = 0 (the pair does not rotate)
    train_angle: float  # largest angle training reached: (L_tr - 1)·θ_i of pre-training (and of fine-tuning)
    full_period_seen: bool  # train_angle >= 2π: every angle of the circle was seen
    angle_at_length: float  # (L' - 1)·θ_i, the largest angle at the analysed length
    beyond_training: bool  # angle_at_length > train_angle and no full period seen


@dataclass(frozen=True)
class LiuBounds(FlatRecord):
    """Liu et al. 2024 (arXiv 2310.05209): critical dimension, extrapolation bound, critical base and regime."""

    pretrain_base: float  # β₀, the base of pre-training
    critical_dim: int  # d_extra = 2⌈(r/2)·log_β₀(T_train/2π)⌉ (Eq. 13) over the rotary dimension r, within [0, r]
    extrapolation_bound: float | None  # 2π/θ_k at pair k = d_extra/2 (Eq. 16a: 2π·β^(d_extra/d)); None if k = d/2
    tune_length: int | None = None  # T_tune, when the model was fine-tuned
    critical_base: float | None = None  # β₀^(log_{T_train/2π}(T_tune/2π)) (Eq. 16b)
    regime: str | None = None  # which case of Eq. 16 the base falls in (see extrap.theory.rope.REGIMES)
    liu_note: str | None = None


@dataclass(frozen=True)
class Aggregation(FlatRecord):
    """Men et al. 2024 (arXiv 2405.14591): where B(m) = Σ_i cos(m θ_i) first turns negative, and the least base."""

    aggregation_first_negative: int | None  # first m with B(m) < 0; None: none below aggregation_cap
    aggregation_cap: int  # distances 0..cap-1 were searched, exactly
    aggregation_method: str
    min_base_for_length: float | None  # least grid base with B(m) >= 0 for every m < L'
    min_base_length: int  # the L' it was asked for (distances 0..L'-1)
    min_base_grid: str  # the bases searched and the resolution
    min_base_note: str | None = None  # why it is None, or what else to know
    paper_min_base: float | None = None  # Men et al.'s table entry for this d and L', where there is one
    paper_note: str | None = None  # how this value compares with the table, and why they differ
    identity_pairs: int | None = None  # pairs with θ = 0 (p-RoPE, partial rotary): each adds cos(0) = 1 to B(m)
    aggregation_terms: str | None = None  # how the pairs (θ = 0 ones, xPos's ζ weights) enter B(m)


_SETTING = ("pe", "head_dim", "rotary_dim", "train_length", "length", "base", "scaling", "attention_factor")
_VERDICT = ("in_distribution_length", "decided_by", "limiting_pair", "pairs_beyond_training", "explanation")


@dataclass(frozen=True)
class RopeTheory:
    """The RoPE analysis of one rotary scheme at one head dimension, training length and length L'."""

    pe: str
    head_dim: int
    train_length: int  # L_tr (T_train)
    length: int  # L', the length analysed
    base: float  # the scheme's base β
    scaling: str  # the scheme's interpolation (none, linear, ...)
    attention_factor: float
    pairs: tuple[FrequencyPair, ...]
    liu: LiuBounds
    men: Aggregation
    in_distribution_length: int | None  # every length up to it stays within the angles training saw; None: all
    decided_by: str  # rotation-angles | full-periods | search-cap
    limiting_pair: int | None  # the pair that set in_distribution_length
    pairs_beyond_training: int  # pairs whose angle at L' lies beyond training
    explanation: str
    rotary_dim: int | None = None  # r = int(partial·head_dim), the dimensions that rotate
    position_frequency: PositionFrequency | None = None  # a trained run's f(i) (An et al. 2025); written when set

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in _SETTING}
        out["pairs"] = [p.to_json() for p in self.pairs]
        out.update(self.liu.to_json())
        out.update(self.men.to_json())
        out.update({k: getattr(self, k) for k in _VERDICT})
        if self.position_frequency is not None:  # only on `theory --checkpoint RUN_DIR`
            out["position_frequency"] = self.position_frequency.to_json()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RopeTheory:
        return cls(
            **{k: d.get(k) for k in _SETTING + _VERDICT},
            pairs=tuple(FrequencyPair.from_json(p) for p in d.get("pairs") or ()),
            liu=LiuBounds.from_json(d),
            men=Aggregation.from_json(d),
            position_frequency=PositionFrequency.from_json(d["position_frequency"])
            if d.get("position_frequency")
            else None,
        )


__all__ = ["Aggregation", "FrequencyPair", "LiuBounds", "RopeTheory"]
