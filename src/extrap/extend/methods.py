"""Training-free RoPE extension methods: one definition each, as pure functions over index blocks.

A method says, for a query at absolute position i and a key at j (t = i - j), which **branch** scores
the pair (or that the key is masked), and every branch rotates the query by q(i) and the key by k(j):
the relative distance RoPE sees is d(i, j) = q(i) - k(j).  Attention (:mod:`extrap.extend.attention`),
the theory (:mod:`extrap.extend.theory`) and the tests all read these functions, so the distance map
that is analysed is the one that runs.  ``relative`` branches have q(i) - k(j) = f(i - j): their
positions may be shifted by a common offset (a stream's in-cache positions) without changing d.

Shapes: i (Lq,) and j (Lk,) integer tensors of absolute positions; :meth:`Method.select` returns
(Lq, Lk) int8 with the branch index, -1 where masked.  Every method defines it once, as the elementwise
:meth:`Method.rule` on broadcastable (i, j): the blockwise kernel reads ``select``, FlexAttention's
mask_mod of branch b is ``rule(q_idx, kv_idx) == b`` (:mod:`extrap.extend.branches`).  L is the training
length L_tr.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from extrap.errors import ExtrapError

MASKED = -1
MAX_LENGTH = 2**64  # the longest training or analysed length: its closed forms stay exact in float64's range


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
    always: bool = True  # named in the spec even at its default (False: an authors'-code option, off by default)


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
        if not 2 <= self.L <= MAX_LENGTH:
            raise ExtrapError(f"{self.name}: the training length must be in [2, 2^64], got {short(train_length)}")
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

    def rule(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """int8 branch index of each pair (i, j), MASKED (-1) for a hidden key; i and j broadcast elementwise.

        Tensor operations only (no Python branching on values): FlexAttention calls it on 0-d tensors
        under vmap and inside its kernel."""
        raise NotImplementedError

    def select(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """(Lq, Lk) int8: the branch that scores (i, j), MASKED (-1) for a hidden key."""
        return self.rule(i[:, None], j[None, :])

    def usable_length(self) -> float:
        """The longest L' whose distances all stay <= L_tr - 1 (math.inf: any length), in exact arithmetic."""
        raise NotImplementedError

    def max_distance(self, length: int) -> float:
        """The largest d(i, j) over attended pairs with j <= i < length (closed form, Python numbers, any length).

        Every branch has q increasing in i and k increasing in j, so the maximum sits at the largest i and
        the smallest j a branch scores; it is evaluated with the branch's own operations, in the same order,
        so it equals the float64 distance map's maximum bit for bit (tests: every length against the map).
        """
        raise NotImplementedError

    def keys_per_query(self, i: int) -> int:
        """How many keys the query at position i attends to (closed form, non-decreasing in i)."""
        return i + 1

    def keys_total(self, length: int) -> int:
        """Σ_{i < length} keys_per_query(i), exactly (closed form)."""
        return length * (length + 1) // 2

    def query_scale(self, i: torch.Tensor, length: int) -> torch.Tensor | None:
        """(Lq,) float64 factors on the query at positions i of a sequence of ``length`` (the log-length
        scalings the authors' code ships; None: 1).  Rotation is linear, so it multiplies every score of row i."""
        return None

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
        hidden = {o.name for o in self.OPTIONS if not o.always and self.opts[o.name] == o.kind(o.default(self.L))}
        return f"{self.name}:" + ",".join(f"{k}={_fmt(v)}" for k, v in self.opts.items() if k not in hidden)

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


def short(x) -> str:
    """A number as text, at most ~40 characters (a 400-digit length in one line)."""
    text = str(x)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"


def sum_min(m: int, k: int) -> int:
    """Σ_{x=1}^{m} min(x, k) for m, k >= 0, exactly."""
    if m <= k:
        return m * (m + 1) // 2
    return k * (k + 1) // 2 + (m - k) * k


def scale_queries(method: Method, q: torch.Tensor, i: torch.Tensor, length: int) -> torch.Tensor:
    """q (B, H, Lq, D) times the method's per-query factor at positions i (:meth:`Method.query_scale`)."""
    f = method.query_scale(i, length)
    return q if f is None else q * f.to(device=q.device, dtype=q.dtype)[:, None]


def log_scale(i: torch.Tensor, base: float) -> torch.Tensor | None:
    """max(1, ln(i + 1)/ln(base)) per position (bojone/rerope, LongLM's scale_base); None when base is 0 (off)."""
    if not base:
        return None
    return (torch.log1p(i.double()) / math.log(base)).clamp(min=1.0)


def _fmt(v) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def causal(i, j):
    """t = i - j and whether the key is visible (t >= 0), elementwise on broadcastable i and j."""
    t = i - j
    return t, t >= 0


def pick(cond_first: torch.Tensor, visible: torch.Tensor, second: torch.Tensor | None = None) -> torch.Tensor:
    """Branch 0 where ``cond_first``, else branch 1 where ``second`` (all when None), MASKED where not visible."""
    sel = torch.where(cond_first, 0, 1 if second is None else torch.where(second, 1, MASKED))
    return torch.where(visible, sel, MASKED).to(torch.int8)


def need(cond: bool, what: str) -> None:
    if not cond:
        raise ExtrapError(what)
