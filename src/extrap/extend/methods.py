"""Training-free RoPE extension methods: one definition each, as pure functions over index blocks.

A method says, for a query at absolute position i and a key at j (t = i - j), which **branch** scores
the pair (or that the key is masked), and every branch rotates the query by q(i) and the key by k(j):
the relative distance RoPE sees is d(i, j) = q(i) - k(j).  Attention (:mod:`extrap.extend.attention`),
the theory (:mod:`extrap.extend.theory`) and the tests all read these functions, so the distance map
that is analysed is the one that runs.  ``relative`` branches have q(i) - k(j) = f(i - j): their
positions may be shifted by a common offset (a stream's in-cache positions) without changing d.

Shapes: i (Lq,) and j (Lk,) integer tensors of absolute positions; :meth:`Method.select` returns
(Lq, Lk) int8 with the branch index, -1 where masked.  L is the training length L_tr.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from extrap.errors import ExtrapError

MASKED = -1


@dataclass(frozen=True)
class Branch:
    """One rotation of a piecewise map: query position q(i), key position k(j)."""

    name: str
    q: Callable[[torch.Tensor], torch.Tensor]
    k: Callable[[torch.Tensor], torch.Tensor]
    relative: bool  # q(i) - k(j) depends on i - j only: a common shift of i and j changes nothing


@dataclass(frozen=True)
class Option:
    name: str
    kind: type  # int or float
    default: Callable[[int], float]  # of L_tr
    doc: str


def plain(i: torch.Tensor) -> torch.Tensor:
    return i


def zero(i: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(i)


class Method:
    """A registry entry: its options (defaults scaled to L_tr), branches, selection and closed forms."""

    name = ""
    summary = ""
    citation = ""
    OPTIONS: tuple[Option, ...] = ()
    sinks_kept = 0  # bounded methods: the first keys a stream keeps (attention sinks, global keys)

    def __init__(self, train_length: int, **opts):
        self.L = int(train_length)
        if self.L < 2:
            raise ExtrapError(f"{self.name}: the training length must be >= 2, got {train_length}")
        known = {o.name: o for o in self.OPTIONS}
        unknown = sorted(set(opts) - set(known))
        if unknown:
            raise ExtrapError(f"{self.name}: unknown option {', '.join(unknown)} (options: {', '.join(known)})")
        self.opts = {}
        for o in self.OPTIONS:
            value = opts.get(o.name)
            self.opts[o.name] = o.kind(o.default(self.L) if value is None else value)
        self.validate()

    # ---- what each method defines -------------------------------------------------
    def validate(self) -> None:
        raise NotImplementedError

    def branches(self) -> tuple[Branch, ...]:
        raise NotImplementedError

    def select(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """(Lq, Lk) int8: the branch that scores (i, j), MASKED (-1) for a hidden key."""
        raise NotImplementedError

    def usable_length(self) -> float:
        """The longest L' whose distances all stay below L_tr (math.inf: any length)."""
        raise NotImplementedError

    def keys_per_query(self, i: int) -> int:
        """How many keys the query at position i attends to (closed form)."""
        return i + 1

    @property
    def bounded(self) -> int | None:
        """Keys the most recent window keeps for a bounded method (it streams through a rolling cache), else None."""
        return None

    def key_spans(self, q0: int, q1: int) -> list[tuple[int, int]]:
        """Key index ranges that queries [q0, q1) of a whole sequence can see (the rest is masked)."""
        return [(0, q1)]

    # ---- derived, the same for every method ---------------------------------------
    @property
    def spec(self) -> str:
        return f"{self.name}:" + ",".join(f"{k}={_fmt(v)}" for k, v in self.opts.items())

    def distance(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """(Lq, Lk) float64 distance d(i, j) = q_b(i) - k_b(j) of the selected branch; NaN where masked."""
        sel = self.select(i, j)
        d = torch.full(sel.shape, math.nan, dtype=torch.float64)
        for b, br in enumerate(self.branches()):
            db = br.q(i.double())[:, None] - br.k(j.double())[None, :]
            d = torch.where(sel == b, db, d)
        return d

    def mask(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """(Lq, Lk) bool: True where the query attends to the key."""
        return self.select(i, j) != MASKED

    def no_op(self, length: int) -> bool:
        """Whether the map is d = t with the causal mask for every pair of a sequence of ``length``."""
        return False


def _fmt(v) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def causal(i, j):
    t = i[:, None] - j[None, :]
    return t, t >= 0


def pick(cond_first: torch.Tensor, visible: torch.Tensor, second: torch.Tensor | None = None) -> torch.Tensor:
    """Branch 0 where ``cond_first``, else branch 1 where ``second`` (all when None), MASKED where not visible."""
    other = torch.ones_like(cond_first) if second is None else second
    sel = torch.where(cond_first, 0, torch.where(other, 1, MASKED)).to(torch.int8)
    return torch.where(visible, sel, torch.full_like(sel, MASKED))


def need(cond: bool, what: str) -> None:
    if not cond:
        raise ExtrapError(what)
