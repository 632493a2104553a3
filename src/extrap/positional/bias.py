"""Bias RPEs: the schemes that add r(t) to the attention logits (ALiBi, KERPLE, Sandwich, T5, FIRE).

The parameter-free biases shared by all heads (Qin et al.'s, the window, NoPE) are
in :mod:`extrap.positional.fixed`.

Each class has one method ``fn(xp, t, p, i=None)``: the only definition of its
bias.  ``t`` is the distance (see :mod:`extrap.positional.conventions`), ``p``
maps parameter names to values (tensors of shape (H, ...) on the torch backend,
one head's scalars on the sympy and mpmath backends), and ``xp`` is the math
backend.  Nothing else in extrap re-implements these formulas.
"""

from __future__ import annotations

import functools
import math

from extrap.errors import ExtrapError
from extrap.positional.base import BiasRPE, Option, Param
from extrap.positional.registry import register


# ---------------------------------------------------------------------------
# ALiBi and its variants
# ---------------------------------------------------------------------------
def alibi_slopes(num_heads: int) -> list[float]:
    """Press et al. (2022) head slopes, as their reference computes them.

    For a power of two H the slopes are the geometric sequence that starts at
    and has ratio 2^(-8/H).  Otherwise they take all H' = 2^floor(log2 H) slopes
    of H' heads, then every other slope of 2H' heads (the odd-indexed powers)
    until H are collected.
    """
    if num_heads <= 0:
        raise ExtrapError(f"number of heads must be positive, got {num_heads}")

    def power_of_two(h: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(h) - 3)))
        return [start * start**k for k in range(h)]

    if math.log2(num_heads).is_integer():
        return power_of_two(num_heads)
    base = 2 ** math.floor(math.log2(num_heads))
    return power_of_two(base) + alibi_slopes(2 * base)[0::2][: num_heads - base]


@register
class ALiBi(BiasRPE):
    name = "alibi"
    summary = "linear bias -m_h*t with Press et al.'s geometric head slopes"
    reference = "Press et al. 2022 (ALiBi); shift/same-h variants: Chi et al. 2023 §4 (003)"
    OPTIONS = (
        Option("shift", float, 0.0, "add Δ to every head's h, i.e. slope × 2^-Δ (003 §4.1)"),
        Option("h", float, None, "same slope 2^-h for all heads (003 §4.2)"),
    )

    def params(self, num_heads):
        import torch  # here, not at the top: the registry loads without torch

        def init(h):
            if self.opts["h"] is not None:
                slopes = [2.0 ** -self.opts["h"]] * h
            else:
                slopes = [s * 2.0 ** -self.opts["shift"] for s in alibi_slopes(h)]
            return torch.tensor(slopes, dtype=torch.float64)

        return [Param("slope", init, doc="m_h; r(t) = -m_h t")]

    def validate(self):
        if self.opts["h"] is not None and self.opts["shift"] != 0.0:
            raise ExtrapError("alibi: use either shift=Δ or h=..., not both")

    def fn(self, xp, t, p, i=None):
        return -xp.per_head(p["slope"], t) * t  # Press et al. 2022, Eq. in §3; 003 Eq. 3


# ---------------------------------------------------------------------------
# KERPLE (Chi et al. 2022)
# ---------------------------------------------------------------------------
def _linspace(lo: float, hi: float):
    import torch

    return lambda h: (
        torch.linspace(lo, hi, h, dtype=torch.float64) if h > 1 else torch.tensor([lo], dtype=torch.float64)
    )


def _fill(v: float):
    import torch

    return lambda h: torch.full((h,), float(v), dtype=torch.float64)


def _positive(x):
    return x is None or x > 0


@register
class KerpleLog(BiasRPE):
    name = "kerple-log"
    summary = "learnable -r1*log(1 + r2*t), r1, r2 > 0 per head"
    reference = "Chi et al. 2022 (KERPLE), logarithmic variant"
    OPTIONS = (
        Option(
            "r1",
            float,
            None,
            "initial r1 for all heads (default: linspace 1.5..3 over heads)",
            _positive,
            "must be > 0",
        ),
        Option("r2", float, 1.0, "initial r2 for all heads", _positive, "must be > 0"),
        Option("learn", bool, True, "learn r1, r2 (false: keep them fixed)"),
    )

    def params(self, num_heads):
        # r = softplus(raw) keeps r1, r2 positive without clamping.  r1 starts in
        # [1.5, 3] so every head starts convergent (Σ n^-r1 < ∞ needs r1 > 1).
        r1 = _fill(self.opts["r1"]) if self.opts["r1"] is not None else _linspace(1.5, 3.0)
        learn = self.opts["learn"]
        return [
            Param("r1", r1, learnable=learn, positive=True, doc="decay power"),
            Param("r2", _fill(self.opts["r2"]), learnable=learn, positive=True, doc="distance scale"),
        ]

    def fn(self, xp, t, p, i=None):
        r1, r2 = xp.per_head(p["r1"], t), xp.per_head(p["r2"], t)
        return -r1 * xp.log(1 + r2 * t)  # KERPLE log kernel, constant c absorbed by softmax


@register
class KerplePower(BiasRPE):
    name = "kerple-power"
    summary = "learnable -r1*t^r2, r1 > 0, 0 < r2 <= 2 per head"
    reference = "Chi et al. 2022 (KERPLE), power variant"
    OPTIONS = (
        Option("r1", float, None, "initial r1 for all heads (default: the ALiBi slopes)", _positive, "must be > 0"),
        Option("r2", float, 1.0, "initial r2 for all heads", lambda x: 0 < x <= 2, "must be in (0, 2]"),
        Option("learn", bool, True, "learn r1, r2 (false: keep them fixed)"),
    )

    def params(self, num_heads):
        # Starts exactly at ALiBi (r2 = 1, r1 = ALiBi slopes) unless told otherwise.
        import torch

        r1 = (
            _fill(self.opts["r1"])
            if self.opts["r1"] is not None
            else (lambda h: torch.tensor(alibi_slopes(h), dtype=torch.float64))
        )
        learn = self.opts["learn"]
        return [
            Param("r1", r1, learnable=learn, positive=True, doc="scale"),
            Param("r2", _fill(self.opts["r2"]), learnable=learn, positive=True, doc="power, clipped at 2"),
        ]

    def fn(self, xp, t, p, i=None):
        r1 = xp.per_head(p["r1"], t)
        r2 = xp.minimum(xp.per_head(p["r2"], t), 2)  # the kernel is conditionally p.d. only for r2 <= 2
        return -r1 * xp.safe_pow(t, r2)


# ---------------------------------------------------------------------------
# Sandwich (Chi, Fan, Rudnicky, Ramadge 2023 = 003)
# ---------------------------------------------------------------------------
@register
class Sandwich(BiasRPE):
    name = "sandwich"
    summary = "(Σ_i cos(t/10000^(2i/d̄)) - d̄/2) / (8k/H): inner products of sinusoids"
    reference = "Chi et al. 2023 (003) Eq. 6 and Appendix E"
    flex_table = True  # d̄/2 cosines per pair: FlexAttention reads the r(t) table unless told otherwise
    OPTIONS = (
        Option(
            "dbar",
            int,
            128,
            "d̄, dimension of the sinusoidal embedding",
            lambda d: d >= 2 and d % 2 == 0,
            "must be an even integer >= 2",
        ),
        Option("base", float, 10000.0, "sinusoid base", lambda b: b > 1, "must be > 1"),
    )

    def params(self, num_heads):
        # compression ratio h_k = k * 8 / H, k = 1..H (003 Appendix E)
        import torch

        return [
            Param("ratio", lambda h: torch.arange(1, h + 1, dtype=torch.float64) * 8 / h, doc="compression ratio k*8/H")
        ]

    def fn(self, xp, t, p, i=None):
        dbar, base = self.opts["dbar"], self.opts["base"]
        base = int(base) if float(base).is_integer() else base
        # p_m^T p_n = Σ_{i=0}^{d̄/2-1} cos(t / base^(2i/d̄))   (003 Eq. 5, Appendix E's i range)
        b = xp.const(base, t)  # one constant for all d̄/2 terms
        s = xp.add_all(xp.cos(t / b ** xp.ratio(2 * k, dbar)) for k in range(dbar // 2))
        return (s - xp.ratio(dbar, 2)) / xp.per_head(p["ratio"], t)  # 003 Eq. 6


@register
class SandwichSmooth(BiasRPE):
    name = "sandwich-smooth"
    summary = "the log curve fitted to Sandwich: -a*log(1+t) + c"
    reference = "Chi et al. 2023 (003) §6.2, fitted a = 0.825, c = -0.8"
    OPTIONS = (
        Option("a", float, 0.825, "log slope", _positive, "must be > 0"),
        Option("c", float, -0.8, "offset (softmax-invariant)"),
    )

    def fn(self, xp, t, p, i=None):
        return -xp.const(self.opts["a"], t) * xp.log(1 + t) + xp.const(self.opts["c"], t)  # 003 §6.2


# ---------------------------------------------------------------------------
# T5 buckets (Raffel et al. 2020; 004 §3.2)
# ---------------------------------------------------------------------------
def t5_bucket(t, bidirectional: bool, num_buckets: int, max_distance: int, xp=None):
    """T5's relative-position bucket for distance t = i - j (key j, query i).

    The arithmetic follows T5's float32 reference step by step (log of
    ``t / max_exact`` in float32, then truncation), so buckets agree exactly.
    A bidirectional table gives past keys (t >= 0) its first half and future keys
    (t < 0) its second half.  On the sympy backend it returns the same rule as a
    step function of t (a Piecewise), its steps where the float32 arithmetic puts them.
    """
    import torch

    from extrap.positional import ops

    xp = xp or ops.TORCH
    if xp is ops.MPMATH:  # a numeric index: compute it exactly as the torch path does
        return int(t5_bucket(torch.tensor([int(t)]), bidirectional, num_buckets, max_distance)[0])
    if not xp.tensors:
        return _t5_bucket_piecewise(t, bidirectional, num_buckets, max_distance)
    nb = num_buckets
    rel = -t.long()  # T5's relative_position = memory - query = j - i
    ret = torch.zeros_like(rel)
    if bidirectional:
        nb //= 2
        ret = ret + (rel > 0).long() * nb
        rel = rel.abs()
    else:
        rel = -torch.minimum(rel, torch.zeros_like(rel))
    max_exact = nb // 2
    is_small = rel < max_exact
    # Raffel et al. 2020 (T5): buckets log-spaced between max_exact and max_distance
    large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact)).to(
        torch.long
    )
    large = torch.minimum(large, torch.full_like(large, nb - 1))
    return ret + torch.where(is_small, rel, large)


@functools.lru_cache(maxsize=64)
def t5_bucket_steps(bidirectional: bool, num_buckets: int, max_distance: int) -> tuple[tuple[int, int], ...]:
    """((first distance, bucket), ...) for past keys t >= 0, in order of t: every bucket they reach
    and the smallest t that reaches it.  The last one holds for every larger t."""
    import torch

    past = num_buckets // 2 if bidirectional else num_buckets
    if max_distance <= past // 2:  # T5's log buckets would run backwards from max_exact = past // 2
        raise ExtrapError(f"t5: max_distance {max_distance} must exceed the exact-bucket range {past // 2}")
    wanted = torch.arange(1, past)
    lo = torch.zeros_like(wanted)  # bucket(lo) < wanted
    hi = torch.full_like(wanted, max_distance)  # bucket(hi) >= wanted: from max_distance on, the last bucket
    while bool((hi - lo > 1).any()):  # bisection on the nondecreasing bucket(t), all buckets at once
        mid = (lo + hi) // 2
        reached = t5_bucket(mid, bidirectional, num_buckets, max_distance) >= wanted
        hi, lo = torch.where(reached, mid, hi), torch.where(reached, lo, mid)
    starts = sorted(set(hi.tolist()))
    buckets = t5_bucket(torch.tensor(starts), bidirectional, num_buckets, max_distance).tolist()
    return ((0, 0), *zip(starts, buckets))


def _t5_bucket_piecewise(t, bidirectional: bool, num_buckets: int, max_distance: int):
    """The bucket of a symbolic distance t: a sympy Piecewise with integer steps."""
    import sympy

    # built unevaluated: the conditions are already in order and exclusive, and sympy's checks of
    # each one (assumptions on t) cost more than everything the theory engine does with the result
    return sympy.Piecewise(*_t5_bucket_pairs(t, bidirectional, num_buckets, max_distance), evaluate=False)


def _t5_bucket_pairs(t, bidirectional: bool, num_buckets: int, max_distance: int) -> list:
    """(bucket, condition on t) of each step of :func:`_t5_bucket_piecewise`, in order (the last one True)."""
    import sympy

    steps = t5_bucket_steps(bidirectional, num_buckets, max_distance)
    past = [(b, sympy.Lt(t, nxt, evaluate=False)) for (_, b), (nxt, _) in zip(steps, steps[1:])]
    past.append((steps[-1][1], True))
    if not bidirectional:  # a future key (t < 0) falls in bucket 0, as t = 0 does
        return past
    half = num_buckets // 2  # future keys: the second half of the table, at the same |t|
    future = [(half + b, sympy.Le(t, -s, evaluate=False)) for s, b in reversed(steps) if s > 0]
    return future + past


@register
class T5(BiasRPE):
    name = "t5"
    summary = "learned scalar per (head, log-spaced distance bucket)"
    reference = "Raffel et al. 2020 (T5) relative position buckets; 004 §3.2"
    bidirectional_ok = True
    OPTIONS = (
        Option("num_buckets", int, 32, "number of buckets", lambda v: v >= 4, "must be >= 4"),
        Option("max_distance", int, 128, "distance where the last bucket starts", lambda v: v >= 2, "must be >= 2"),
        Option("bidirectional", bool, False, "encoder-style buckets for both signs of t"),
    )

    def validate(self):
        nb = self.opts["num_buckets"] // (2 if self.opts["bidirectional"] else 1)
        if self.opts["max_distance"] <= nb // 2:
            raise ExtrapError("t5: max_distance must exceed the exact-bucket range num_buckets/2")

    def params(self, num_heads):
        # zero init: the model starts position-agnostic and learns the table
        import torch

        return [
            Param(
                "table",
                lambda h: torch.zeros(h, self.opts["num_buckets"], dtype=torch.float64),
                learnable=True,
                doc="bias per bucket",
            )
        ]

    def fn(self, xp, t, p, i=None):
        o = self.opts
        if xp.name != "sympy":
            return xp.lookup(p["table"], t5_bucket(t, o["bidirectional"], o["num_buckets"], o["max_distance"], xp))
        import sympy

        # the bucket's steps, each with its table entry (the Piecewise of t5_bucket's pairs is not built first);
        # past keys from the last step on share one bucket (the last of the past half): that tail first, its
        # condition built as the steps' are (t >= start holds at t = start and fails at t = 0, so sympy's
        # evaluation, ~0.5 ms of assumption queries, returns this very relation)
        start, last = t5_bucket_steps(o["bidirectional"], o["num_buckets"], o["max_distance"])[-1]
        pairs = _t5_bucket_pairs(t, o["bidirectional"], o["num_buckets"], o["max_distance"])
        steps = [(xp.lookup(p["table"], b), cond) for b, cond in pairs]
        tail = (xp.lookup(p["table"], last), sympy.Ge(t, start, evaluate=False))
        return sympy.Piecewise(tail, *steps, evaluate=False)


# ---------------------------------------------------------------------------
# FIRE (Li et al. 2023)
# ---------------------------------------------------------------------------
@register
class FIRE(BiasRPE):
    name = "fire"
    summary = "learned MLP of the progressively normalised log distance ψ(t)/ψ(max(L, i))"
    reference = "Li et al. 2023 (FIRE), ψ(x) = log(c x + 1)"
    toeplitz = False
    flex_query = True  # FlexAttention's q_idx gives i: its MLP runs in the kernel (no r(t) table holds it)
    OPTIONS = (
        Option("hidden", int, 32, "MLP width", lambda v: v >= 1, "must be >= 1"),
        Option("c", float, 1.0, "initial c of ψ", _positive, "must be > 0"),
        Option("L", float, 512.0, "initial threshold L", _positive, "must be > 0"),
    )

    def params(self, num_heads):
        import torch

        k = self.opts["hidden"]
        g = torch.Generator().manual_seed(0)  # deterministic init independent of the global RNG

        def uniform(*shape, fan_in):
            return (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) / math.sqrt(fan_in)

        # Shapes: w1, b1 (1, hidden) shared; w2 (H, hidden) and b2 (H,) per head; c, L (1,) shared.
        return [
            Param("w1", lambda h: uniform(1, k, fan_in=1), learnable=True),
            Param("b1", lambda h: uniform(1, k, fan_in=1), learnable=True),
            Param("w2", lambda h: uniform(h, k, fan_in=k), learnable=True),
            Param("b2", lambda h: torch.zeros(h, dtype=torch.float64), learnable=True),
            Param("c", lambda h: torch.tensor([self.opts["c"]], dtype=torch.float64), learnable=True, positive=True),
            Param("L", lambda h: torch.tensor([self.opts["L"]], dtype=torch.float64), learnable=True, positive=True),
        ]

    def toeplitz_until(self, values):
        return float(values["L"].detach().reshape(-1)[0])  # i <= L: ψ(max(L, i)) = ψ(L), a function of t alone

    def fn(self, xp, t, p, i=None):
        if not xp.tensors:
            raise ExtrapError("fire: the bias depends on the query position i, not on t alone")
        if i is None:
            raise ExtrapError("fire: needs query positions i")
        import torch

        one = xp.name == "flex"  # one (head, query, key) entry: each parameter is already this head's value
        c, L = (p["c"], p["L"]) if one else (p["c"][0], p["L"][0])
        psi = lambda x: torch.log(c * x + 1)  # noqa: E731  FIRE's ψ
        u = psi(t.clamp_min(0).to(c.dtype)) / psi(torch.maximum(i.to(c.dtype), L))  # progressive interpolation
        if one:  # a score_mod is pointwise: the MLP unrolled over its hidden units (w1, b1, w2: this head's rows)
            units = [torch.relu(u * p["w1"][k] + p["b1"][k]) * p["w2"][k] for k in range(self.opts["hidden"])]
            return xp.add_all(units) + p["b2"]
        hidden = torch.relu(u.unsqueeze(-1) * p["w1"][0] + p["b1"][0])  # (*t, hidden)
        out = hidden @ p["w2"].T + p["b2"]  # (*t, H)
        return out.movedim(-1, 0)
