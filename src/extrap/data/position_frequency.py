"""How often training shows each relative position: STRING's position frequency (An et al. 2025).

An et al. 2025 ("Why Does the Effective Context Length of LLMs Fall Short?", ICLR 2025) count, for
causal attention over training sequences s, the query-key pairs at relative distance i:

    f(i) = Σ_s max(|s| - i, 0),   i = 0 .. L - 1,

and trace a model's short effective context to this left-skewed f: distances near L_tr are trained on
few pairs.  :func:`position_frequency` computes f for any sequence lengths in O(L) (documents: suffix
sums over a histogram of lengths, no pair is enumerated).

What extrap's training sampler draws (:class:`extrap.data.BatchSampler`): packed windows of L_tr tokens at
random offsets of the concatenated split, document boundaries included, so every training sequence has
|s| = L_tr and f(i) = L_tr - i per window (closed form: :func:`window_frequency`).  The smallest distance
whose frequency falls below a fraction F of f(0) is then ⌊L_tr·(1 - F)⌋ + 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from extrap.errors import ExtrapError

DEFAULT_FRACTION = 0.5  # "falls below half of f(0)": half the training length for packed windows
PACKED = "packed-windows"
DEFINITION = "f(i) = Σ_s max(|s| - i, 0) over training sequences s (An et al. 2025)"
SAMPLER_NOTE = (
    "extrap's training sampler draws packed windows of L_tr tokens at random offsets of the concatenated "
    "training split (document boundaries inside a window are attended across), so f(i) = L_tr - i per window"
)


def check_length(train_length) -> int:
    if isinstance(train_length, bool) or not isinstance(train_length, int) or train_length <= 0:
        raise ExtrapError(f"position frequency: the training length must be a positive integer, got {train_length}")
    return train_length


def check_fraction(fraction) -> float:
    ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and 0 < fraction < 1
    if not ok:
        raise ExtrapError(f"position frequency: the fraction must be in (0, 1), got {fraction}")
    return float(fraction)


def position_frequency(lengths: Iterable[int], train_length: int) -> list[int]:
    """f(i) for i = 0..L-1 over sequences of the given lengths (An et al. 2025).

    A sequence longer than L = ``train_length`` is cut into consecutive pieces of at most L tokens, as a
    sampler that never crosses a sequence boundary would take it.
    """
    L = check_length(train_length)
    count = [0] * (L + 1)  # count[n]: pieces of n tokens
    for n in lengths:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ExtrapError(f"position frequency: sequence lengths must be integers >= 0, got {n}")
        full, rest = divmod(n, L)
        count[L] += full
        count[rest] += 1 if rest else 0
    out, above, weighted = [0] * L, 0, 0  # above: pieces longer than i; weighted: their total length
    for i in range(L - 1, -1, -1):
        above += count[i + 1]
        weighted += (i + 1) * count[i + 1]
        out[i] = weighted - i * above  # Σ_{n > i} (n - i)·count[n]
    return out


def window_frequency(train_length: int, i: int) -> int:
    """f(i) per packed window of L tokens: L - i pairs at distance i (0 beyond the window)."""
    return max(check_length(train_length) - i, 0)


def first_below(frequency: list[int], fraction: float) -> int | None:
    """The smallest i with f(i) < fraction·f(0), or None when none is."""
    bound = check_fraction(fraction) * frequency[0]
    return next((i for i, f in enumerate(frequency) if f < bound), None)


def summary_distances(train_length: int) -> tuple[int, ...]:
    """0, L/4, L/2, 3L/4 and L - 1 (floored, without repeats)."""
    L = check_length(train_length)
    return tuple(dict.fromkeys([0, L // 4, L // 2, 3 * L // 4, L - 1]))


@dataclass(frozen=True)
class PositionFrequency:
    """STRING's position frequency of the sequences a training run draws (module docstring)."""

    corpus: str
    train_length: int
    sequences: str  # what the sampler draws: packed-windows
    sequences_note: str
    definition: str
    distances: tuple[int, ...]  # i of the summary
    frequency: tuple[int, ...]  # f(i) per drawn sequence at those i
    relative: tuple[float, ...]  # f(i) / f(0)
    fraction: float  # F
    below_fraction_at: int | None  # smallest i with f(i) < F·f(0)
    windows: int | None = None  # sequences a run draws (steps × batch size): its totals are windows × f(i)
    stream_tokens: int | None = None  # tokens of the training split the windows are cut from

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(distances=list(self.distances), frequency=list(self.frequency), relative=list(self.relative))
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PositionFrequency:
        kw = {f.name: d.get(f.name) for f in fields(cls)}
        for key in ("distances", "frequency", "relative"):
            kw[key] = tuple(kw[key] or ())
        return cls(**kw)


def packed_windows(
    corpus: str,
    train_length: int,
    fraction: float = DEFAULT_FRACTION,
    *,
    windows: int | None = None,
    stream_tokens: int | None = None,
) -> PositionFrequency:
    """The position frequency of extrap's sampler: packed windows of L_tr tokens, f(i) = L_tr - i each."""
    L, F = check_length(train_length), check_fraction(fraction)
    if stream_tokens is not None and stream_tokens < L + 1:
        raise ExtrapError(
            f"position frequency: the training split has {stream_tokens:,} tokens, too few for windows of {L} (+1)"
        )
    grid = summary_distances(L)
    below = max(0, math.floor(L * (1 - F)) - 1)  # L - i < F·L  <=>  i > L·(1 - F): start just short of it
    while below < L and not window_frequency(L, below) < F * L:  # the comparison itself settles the boundary
        below += 1
    below = below if below < L else None
    return PositionFrequency(
        corpus, L, PACKED, SAMPLER_NOTE, DEFINITION, grid, tuple(window_frequency(L, i) for i in grid),
        tuple(window_frequency(L, i) / L for i in grid), F, below, windows, stream_tokens,
    )  # fmt: skip


__all__ = [
    "DEFAULT_FRACTION",
    "PositionFrequency",
    "check_fraction",
    "check_length",
    "first_below",
    "packed_windows",
    "position_frequency",
    "summary_distances",
    "window_frequency",
]
