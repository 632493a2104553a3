"""What an extension method feeds RoPE, before anything runs: closed forms of the same distance maps attention uses.

:func:`analyse_extension` reports the largest relative distance RoPE sees (:meth:`Method.max_distance`),
whether every distance stays within training (d <= L_tr - 1), the longest length for which that holds
(:meth:`Method.usable_length`, checked against ``max_distance`` at its edge so the two never disagree), and
the keys each query attends to (:meth:`Method.keys_total`): O(1) at any length up to 2^64.  :func:`scan`
walks the map itself block by block; the tests hold every closed form to it, length by length.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from extrap.errors import ExtrapError
from extrap.extend.catalog import parse
from extrap.extend.methods import MAX_LENGTH, Method, short

BLOCK = 1024


@dataclass(frozen=True)
class ExtensionTheory:
    """The closed-form facts of one extension method at one length."""

    method: str  # the full spec, defaults filled in
    citation: str
    train_length: int
    length: int
    max_distance: float  # the largest d(i, j) over attended pairs, i < length
    in_distribution: bool  # max_distance <= train_length - 1
    in_distribution_up_to: int | None  # the longest length that stays in distribution (None: any length)
    keys_per_query_max: int
    keys_per_query_mean: float  # the closed form's mean over queries 0..length-1
    bounded: bool  # keys per query bounded whatever the length: the method streams through a rolling cache
    head_dim: int | None = None  # with a head dimension: RoPE's pairs θ_i = base^(-2i/d) (Su et al. 2021, Eq. 15)
    base: float | None = None
    new_angle_pairs: int | None = None  # pairs turned past the angles training covered: d_max·θ_i > (L_tr - 1)·θ_i
    # while (L_tr - 1)·θ_i < 2π (a pair that turned a full period in training has seen every angle)

    def to_json(self) -> dict:
        return {"extension": asdict(self)}

    @classmethod
    def from_json(cls, d: dict) -> ExtensionTheory:
        return cls(**d["extension"])


def scan(method: Method, length: int, first: int = 0, block: int = BLOCK) -> tuple[float, torch.Tensor]:
    """(largest distance, keys attended per query (length - first,)) over queries first..length-1, block by block."""
    top, counts = -math.inf, torch.zeros(length - first, dtype=torch.long)
    for q0 in range(first, length, block):
        q1 = min(length, q0 + block)
        i = torch.arange(q0, q1)
        for r0, r1 in method.key_spans(q0, q1):
            for k0 in range(r0, r1, block):
                j = torch.arange(k0, min(r1, k0 + block))
                d = method.distance(i, j)
                seen = ~torch.isnan(d)
                counts[q0 - first : q1 - first] += seen.sum(1)
                if seen.any():
                    top = max(top, float(d[seen].max()))
    return top, counts


def new_angle_pairs(max_distance: float, train_length: int, head_dim: int, base: float) -> int:
    """Pairs i whose largest angle max_distance·θ_i passes the (L_tr - 1)·θ_i of training, which was < 2π."""
    from extrap.positional.rope_scaling import default_inv_freq

    theta = default_inv_freq(head_dim, base, dtype=torch.float64)
    trained = (train_length - 1) * theta
    return int(((max_distance * theta > trained) & (trained < 2 * math.pi)).sum())


def analyse_extension(
    spec: str | Method, train_length: int, length: int, head_dim: int | None = None, base: float = 10000.0
) -> ExtensionTheory:
    """The facts of ``spec`` (parsed for ``train_length``) at evaluation length ``length``; with ``head_dim``,
    also how many of RoPE's pairs (base ``base``) turn past the angles training covered."""
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_LENGTH:
        raise ExtrapError(f"extension theory: the length must be an integer in [1, 2^64], got {short(length)}")
    method = spec if isinstance(spec, Method) else parse(spec, train_length)
    if head_dim is not None and (head_dim < 2 or head_dim % 2 or not 1 < base < math.inf):
        raise ExtrapError(f"extension theory: head_dim must be even >= 2 and base > 1, got {head_dim}, {base}")
    top = method.max_distance(length)
    pairs = None if head_dim is None else new_angle_pairs(top, method.L, head_dim, base)
    return ExtensionTheory(
        method=method.spec,
        citation=method.citation,
        train_length=method.L,
        length=length,
        max_distance=top,
        in_distribution=top <= method.L - 1,
        in_distribution_up_to=usable_length(method),
        keys_per_query_max=method.keys_per_query(length - 1),
        keys_per_query_mean=method.keys_total(length) / length,
        bounded=method.bounded is not None,
        head_dim=head_dim,
        base=None if head_dim is None else float(base),
        new_angle_pairs=pairs,
    )


def usable_length(method: Method) -> int | None:
    """The longest L' with max_distance(L') <= L_tr - 1 (None: any length), from the method's closed form.

    max_distance is non-decreasing in L', so the edge is where it passes L_tr - 1; the closed form is
    exact in integers, and a float64 branch (Leaky ReRoPE's slope 1/k, Self-Extend's W - W/G) is checked at
    the edge so the bound and the reported ``in_distribution`` agree bit for bit.
    """
    up_to = method.usable_length()
    if math.isinf(up_to):
        return None
    top, edge = method.L - 1, int(up_to)
    if edge > MAX_LENGTH:  # past any length analysed: nothing to disagree with
        return edge
    for _ in range(64):  # float64 rounding moves the edge by an ulp's worth of lengths at most
        if edge >= 1 and method.max_distance(edge) > top:
            edge -= 1
        elif method.max_distance(edge + 1) <= top:
            edge += 1
        else:
            return edge
    raise ExtrapError(f"{method.spec}: the closed-form bound {up_to} disagrees with the distance map")
