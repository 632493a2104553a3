"""RoPE's length extrapolation in closed form, from the registry's one definition of its frequencies.

:func:`analyse_rope` takes a rotary scheme (``rope``, ``xpos``, with any scaling) and reports, from the
effective frequencies θ_i of :meth:`~extrap.positional.rotary.Rotary.frequencies` (float64):

* per pair i: θ_i, its period 2π/θ_i, the largest angle training reached, whether that was a full
  period, the largest angle at the analysed length L' (distances 0..L'-1), and whether it is new;
* Liu et al. 2024 ("Scaling Laws of RoPE-based Extrapolation", ICLR 2024, arXiv 2310.05209): the
  critical dimension, the extrapolation bound, and with a fine-tuning length the critical base and regime;
* Men et al. 2024 ("Base of RoPE Bounds Context Length", NeurIPS 2024, arXiv 2405.14591): the first
  distance where the aggregation sum B(m) turns negative, and the least base keeping it >= 0 below L'
  (:mod:`extrap.theory.aggregation`);
* the verdict: the length up to which every pair only turns through angles training covered.

The variants enter through their effective θ: partial rotary's pass-through dimensions and p-RoPE's dropped
frequencies are pairs with θ = 0, which never turn (no angle beyond training) and add cos(0) = 1 each to
B(m); Liu et al.'s critical dimension is taken over the rotary dimension r = int(partial·d).  For xPos,
B(m) carries its decay: Σ_i ζ_i^(m/scale_base) cos(m θ_i) (Sun et al. 2023, Eq. 11-12; Men et al.'s
Theorem 1 with every pair's term scaled as xPos scales it).

Training covers, on pair i, the angles 0..A_i with A_i = (L_tr - 1)·θ_i of pre-training (and
(T_tune - 1)·θ_i of fine-tuning when given): all of them once A_i >= 2π.  Pre-training uses plain
RoPE with the pre-training base (the scheme's base unless given), with the scheme's own partial, p and
resonance, unless the scheme itself was trained (a run directory), as a scaling is applied at inference.
"""

from __future__ import annotations

import math

import torch

from extrap.devices import one_thread
from extrap.errors import ExtrapError
from extrap.memory import check_head_dim as fits_head_dim
from extrap.positional.base import Scheme
from extrap.positional.registry import get as get_scheme
from extrap.positional.rope_scaling import default_inv_freq
from extrap.positional.rope_variants import rotary_dim
from extrap.positional.rotary_options import ONLY_FOR
from extrap.positional.rotation import xpos_scale
from extrap.theory import aggregation as agg
from extrap.theory.least_base import FLOOR, least_base, power_law
from extrap.theory.rope_records import Aggregation, FrequencyPair, LiuBounds, RopeTheory
from extrap.theory.rope_text import explain

TWO_PI = 2 * math.pi
MAX_LENGTH = 2**64  # the longest length analysed
EXACT_MAX_LENGTH = 2**14  # up to this L' the least base is found exactly (4 s at d = 128, L' = 2^14); beyond: a grid
MEN_TABLE = {128: {1024: 4.3e3, 8192: 8.4e4}}  # Men et al. 2024, table of the least base (d = 128; 1k, 8k)
REGIMES = {
    "above-critical": "β >= the critical base: the bound 2π·β^(d_extra/d) reaches past T_tune (Eq. 16a-b)",
    "below-critical": "2T_tune/π < β < the critical base: 2π·β^(d_extra/d) falls short of T_tune, "
    "so Eq. 16a does not bound the tuned model",
    "quarter-period": "T_tune/π < β <= β₁ = 2T_tune/π: every pair's angle reaches π/2 within T_tune (Eq. 16c)",
    "half-period": "T_tune/2π < β <= β₂ = T_tune/π: every pair's angle reaches π within T_tune (Eq. 16c)",
    "full-period": "β <= β₃ = T_tune/2π: every pair turns a full period within T_tune, no bound (Eq. 16d)",
}
"""Liu et al. 2024's cases of Eq. 16 for a model fine-tuned with base β at length T_tune."""


def rotary(scheme: Scheme | str) -> Scheme:
    """The registry's rotary scheme for ``scheme``; ExtrapError for any other."""
    s = get_scheme(scheme)
    if not s.rotates:
        raise ExtrapError(f"{s.spec} is not a rotary scheme: the RoPE analysis needs rope or xpos")
    return s


def check_head_dim(head_dim) -> int:
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2:
        raise ExtrapError(f"RoPE head dimension must be an even integer >= 2, got {head_dim}")
    return head_dim


def frequencies(scheme: Scheme, head_dim: int, seq_len: int | None = None) -> torch.Tensor:
    """θ_i (head_dim // 2,) in float64 from the scheme's one definition (``seq_len``: dynamic scalings)."""
    inv, _ = scheme.frequencies(head_dim, seq_len, dtype=torch.float64)
    return inv.detach().cpu().to(torch.float64)


def is_plain(scheme: Scheme) -> bool:
    """Plain RoPE θ_i = b^(-2i/d): no scaling, every dimension rotating, no dropped or rounded frequency."""
    o = scheme.opts
    return o["scaling"] == "none" and o["partial"] == 1 and o["p"] == 1 and not o["resonance"]


def xpos_rates(scheme: Scheme, head_dim: int) -> torch.Tensor | None:
    """xPos's decay per pair, ln(ζ_i)/scale_base (d/2,), 0 for pass-through pairs; None for RoPE (no decay).

    ζ_i from the one definition (:func:`~extrap.positional.rotation.xpos_scale` at distance scale_base),
    over the rotary dimension r, as the scheme applies it.  ζ_0 = 0 (γ = 0) gives a rate of -1e300:
    weight 1 at m = 0 and 0 beyond, as 0^(m/scale_base).
    """
    o = scheme.opts
    if "scale_base" not in o:
        return None
    r = rotary_dim(head_dim, o["partial"])
    one = torch.tensor([float(o["scale_base"])], dtype=torch.float64)
    zeta = xpos_scale(one, r, o["scale_base"], o["gamma"], 0.0, torch.float64)[0, : r // 2]  # ζ_i^1
    rates = (torch.log(zeta) / o["scale_base"]).clamp(min=-1e300)
    return torch.cat([rates, torch.zeros(head_dim // 2 - r // 2, dtype=torch.float64)])


def critical_dim(head_dim: int, pretrain_base: float, train_length: int) -> int:
    """d_extra = 2⌈(d/2)·log_β₀(T_train/2π)⌉, within [0, d]: the dimensions whose period fits in T_train."""
    x = (head_dim / 2) * math.log(train_length / TWO_PI) / math.log(pretrain_base)  # Liu et al. 2024, Eq. 13
    return min(head_dim, max(0, 2 * math.ceil(x)))


def critical_base(pretrain_base: float, train_length: int, tune_length: int) -> float:
    """β₀^(log_{T_train/2π}(T_tune/2π)): the base whose bound 2π·β^(d_extra/d) is T_tune."""
    return pretrain_base ** (math.log(tune_length / TWO_PI) / math.log(train_length / TWO_PI))  # Liu Eq. 16b


def liu_regime(base: float, tune_length: int, critical: float) -> str:
    """The case of Liu et al. 2024's Eq. 16 that a base fine-tuned at ``tune_length`` falls in (:data:`REGIMES`)."""
    if base >= critical:
        return "above-critical"
    for name, bound in (("full-period", tune_length / TWO_PI), ("half-period", tune_length / math.pi)):
        if base <= bound:  # Liu et al. 2024, Theorem 1 / Eq. 16c-d: β₃ = T/2π, β₂ = T/π, β₁ = 2T/π
            return name
    return "quarter-period" if base <= 2 * tune_length / math.pi else "below-critical"


def default_length(scheme: Scheme, train_length: int) -> int:
    """L' when none is given: the length the scaling targets, factor × original length (else L_tr)."""
    o = scheme.opts
    if o["scaling"] == "none":
        return train_length
    target = o["factor"] * (o["original_max_position"] or train_length)
    if not math.isfinite(target) or target > MAX_LENGTH:
        raise ExtrapError(f"RoPE analysis: factor x original length = {target:g} is past 2^64; give --length")
    return max(train_length, math.ceil(target))


def _liu(scheme, d: int, theta: torch.Tensor, beta0: float, train_length: int, tune: int | None) -> LiuBounds:
    r = rotary_dim(d, scheme.opts["partial"])  # θ_i = β^(-2i/r) over the rotary dimension
    dx = critical_dim(r, beta0, train_length)
    k = dx // 2  # the first pair whose period exceeds T_train in pre-training
    bound = TWO_PI / float(theta[k]) if k < r // 2 and float(theta[k]) > 0 else None  # Liu Eq. 16a generalised
    base, note = float(scheme.opts["base"]), None
    crit = regime = None
    if tune is not None:
        crit = critical_base(beta0, train_length, tune)
        regime = liu_regime(base, tune, crit)
        note = REGIMES[regime]
        if regime != "above-critical":
            bound = None
    elif base == beta0 and scheme.opts["scaling"] == "none" and bound is not None:
        # Eq. 13 rounds d_extra up: T_train <= 2π·β^(d_extra/r) < T_train·β^(2/r).  A range the bound lies in,
        # said as such, lest it read as a second bound beside extrapolation_bound (issue 28 §7).
        note = (
            f"trained from scratch with base {base:g}: the bound {bound:,.0f} is the period of pair {k}, "
            f"2π·β^(d_extra/d); Eq. 13's ceiling puts it at or just above T_train, in [T_train, T_train·β^(2/d)) = "
            f"[{train_length}, {train_length * base ** (2 / r):.6g}), a range and not a second bound"
        )
    if scheme.opts["scaling"] != "none":
        note = (note + "; " if note else "") + "the bound is the critical pair's period under the scaled θ"
    if bound is None and k >= r // 2:
        note = (note + "; " if note else "") + "every dimension completes a period within T_train: no bound"
    elif bound is None and regime is None:  # p-RoPE dropped the critical pair: the pairs left all turn a period
        note = (note + "; " if note else "") + (
            f"pair {k} and the slower ones do not rotate (θ = 0): every rotating pair completes a period within "
            "T_train, no bound"
        )
    if r < d:
        note = (note + "; " if note else "") + f"critical dimension of the rotary part, r = {r} of d = {d}"
    return LiuBounds(beta0, dx, bound, tune, crit, regime, note)


def _pretraining(scheme: Scheme, beta0: float) -> Scheme:
    """The scheme before an inference-time scaling: base β₀, no scaling, its own partial, p and resonance."""
    drop = {*ONLY_FOR, "scaling", "original_max_position"}
    opts = {k: v for k, v in scheme.opts.items() if v is not None and k not in drop}
    return type(scheme)(**{**opts, "base": float(beta0)})


def _seen(scheme, d, train_length, tune, pretrained, beta0) -> tuple[torch.Tensor, torch.Tensor]:
    """(A_i, 1 where fine-tuning reached the larger angle): the largest angle training reached per pair."""
    pre = frequencies(scheme if pretrained else _pretraining(scheme, beta0), d, train_length)
    seen = (train_length - 1) * pre
    tuned = torch.zeros_like(seen, dtype=torch.bool)
    if tune is not None:
        late = (tune - 1) * frequencies(scheme, d, tune)
        tuned = late > seen
        seen = torch.maximum(seen, late)
    return seen, tuned


def _static_limit(theta: torch.Tensor, seen: torch.Tensor) -> tuple[int | None, int | None]:
    """(length, pair): the longest L with (L - 1)·θ_i <= A_i for every pair short of a full period."""
    best = (None, None)
    for i in torch.nonzero((seen < TWO_PI) & (theta > 0)).flatten().tolist():
        t, a = float(theta[i]), float(seen[i])
        m = math.floor(a / t)
        while (m + 1) * t <= a:  # the float products decide, as the angles are formed
            m += 1
        while m > 0 and m * t > a:
            m -= 1
        if best[0] is None or m + 1 < best[0]:
            best = (m + 1, i)
    return best


def _passes(scheme, d: int, length: int, seen: torch.Tensor) -> bool:
    theta = frequencies(scheme, d, length)
    return bool((((length - 1) * theta <= seen) | (seen >= TWO_PI)).all())


def _dynamic_limit(scheme, d: int, seen: torch.Tensor, cap: int) -> tuple[int | None, int | None]:
    """The in-distribution length of a length-dependent scaling: θ depends on L, so lengths are checked in turn.

    Every L up to the original length + 64, then a grid 1% apart up to ``cap``; between the last
    length that passes and the first that fails, a bisection (one crossing assumed there).
    """
    original = scheme.opts["original_max_position"]
    length, pair = _static_limit(frequencies(scheme, d, original), seen)
    if length is not None and length < original:  # the lengths up to the original one share θ
        return length, pair
    grid = list(range(original + 1, original + 65))
    while grid[-1] < cap:
        grid.append(min(cap, math.ceil(grid[-1] * 1.01)))
    good = original
    for bad in grid:
        if not _passes(scheme, d, bad, seen):
            while bad - good > 1:
                mid = (good + bad) // 2
                good, bad = (mid, bad) if _passes(scheme, d, mid, seen) else (good, mid)
            return good, _static_limit(frequencies(scheme, d, bad), seen)[1]
        good = bad
    return None, None


def _with_base(scheme: Scheme, base: float) -> Scheme:
    return type(scheme)(**{**{k: v for k, v in scheme.opts.items() if v is not None}, "base": float(base)})


def _grid_frequencies(scheme: Scheme, d: int, length: int):
    """bases (G,) -> θ (G, K) of the scheme with only its base changed (plain RoPE: all bases at once)."""
    if is_plain(scheme):
        return lambda bases: default_inv_freq(d, torch.tensor(bases, dtype=torch.float64)[:, None], dtype=torch.float64)
    return lambda bases: torch.stack([frequencies(_with_base(scheme, b), d, length) for b in bases])


def _terms(theta: torch.Tensor, decay: torch.Tensor | None) -> str:
    """How the pairs enter B(m): every pair of the head, the non-rotating ones included, and xPos's weights."""
    n0 = int((theta == 0).sum())
    text = f"B(m) sums all {len(theta)} pairs of the head"
    if n0:
        text += (
            f"; the {n0} with θ = 0 (p-RoPE's dropped frequencies, partial rotary's pass-through dimensions) add "
            "cos(0) = 1 each, as q·k sums every dimension"
        )
    if decay is not None:
        text += (
            "; xPos: each term weighted by ζ_i^(m/scale_base) (Sun et al. 2023, Eq. 11-12), 1 on pass-through pairs; "
            "signs decided on B(m)/max_i ζ_i^(m/scale_base)"
        )
    return text


def _men(scheme: Scheme, d: int, theta: torch.Tensor, length: int, cap: int, min_base_cap: int) -> Aggregation:
    decay = xpos_rates(scheme, d)
    first = agg.first_negative(theta, cap, decay=decay)
    method = (
        f"every distance m < {cap} in float64 blockwise (cos((m0 + j)θ) from cos(m0 θ), cos(jθ)); values within "
        f"{agg.tolerance(theta, cap):.1e} of zero recomputed with mpmath at 40 digits"
    )
    law = _grid_frequencies(scheme, d, length)
    law = power_law(law) if length <= EXACT_MAX_LENGTH else None
    grid = (
        f"exact: proven steps in the base (Lipschitz bounds on B(m; β)) from {10 ** (1 / agg.STEPS_PER_DECADE):.4g} "
        f"up to {agg.MIN_BASE_TOP:.0e}, every m < L' checked; within a relative {FLOOR:g} above the least base"
        if law is not None
        else f"bases 10^(k/{agg.STEPS_PER_DECADE}) up to {agg.MIN_BASE_TOP:.0e} (relative step "
        f"{10 ** (1 / agg.STEPS_PER_DECADE) - 1:.2%}), each checked at every m < L', smallest passing base (a grid: "
        "passing islands between grid points are missed); the scheme with only its base changed"
    )
    best, note, paper, paper_note = None, None, None, None
    if length > min_base_cap:
        note = f"not searched: L' = {length} > {min_base_cap} (each base is checked at every m < L')"
    else:
        if law is not None:
            best = least_base(*law, length, decay=decay)
        else:
            best = agg.min_base_for_length(_grid_frequencies(scheme, d, length), length, decay=decay)
        if best is None:
            note = f"no base up to {agg.MIN_BASE_TOP:.0e} keeps B(m) >= 0 for every m < {length}"
        paper = MEN_TABLE.get(d, {}).get(length) if is_plain(scheme) and decay is None else None
        if paper is not None:
            paper_note = _paper_note(scheme, d, length, best, paper)
    n0 = int((theta == 0).sum())
    return Aggregation(first, cap, method, best, length, grid, note, paper, paper_note, n0, _terms(theta, decay))


def _paper_note(scheme: Scheme, d: int, length: int, best: float | None, paper: float) -> str:
    """How this least base compares with Men et al.'s table entry, and why they differ."""
    theirs = agg.first_negative(frequencies(_with_base(scheme, paper), d), length)
    check = "passes" if theirs is None else f"fails (B(m) < 0 first at m = {theirs})"
    same = best is not None and f"{best:.1e}" == f"{paper:.1e}"
    how = "agrees with the table to its two significant digits" if same else "differs from the table"
    return (
        f"{how}: Men et al. report two digits; here every m < {length} is checked (min_base_grid says how the "
        f"bases were searched), and the table's base {paper:g} {check} that check"
    )


def _check(name: str, value, low: float, kind=int):
    if kind is int and isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_LENGTH:
        raise ExtrapError(
            f"RoPE analysis: {name} must be at most 2^64, got {len(str(int(value)))} digits"
            if isinstance(value, int)
            else f"RoPE analysis: {name} must be at most 2^64, got {value:g}"
        )
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > low
    if not ok or (kind is int and int(value) != value):
        what = "an integer" if kind is int else "a number"
        raise ExtrapError(f"RoPE analysis: {name} must be {what} > {low:g}, got {value}")
    return kind(value)


def analyse_rope(
    scheme: Scheme | str,
    head_dim: int,
    train_length: int,
    length: int | None = None,
    *,
    pretrain_base: float | None = None,
    tune_length: int | None = None,
    pretrained: bool = False,
    aggregation_cap: int = agg.AGGREGATION_CAP,
    min_base_max_length: int = agg.MIN_BASE_MAX_LENGTH,
) -> RopeTheory:
    """The RoPE analysis of one rotary scheme (module docstring).

    Args:
        scheme: a rotary scheme or its spec (rope, xpos, any scaling).
        head_dim: d, the rotary dimension of one head (even).
        train_length: L_tr = T_train, the pre-training length.
        length: L', the length analysed (distances 0..L'-1); None: :func:`default_length` (at least T_tune).
        pretrain_base: β₀ of pre-training (None: the scheme's base).
        tune_length: T_tune, a fine-tuning length with the scheme's own frequencies.
        pretrained: the scheme itself was trained (an extrap run), not plain RoPE before a scaling.
        aggregation_cap: distances searched for Men et al.'s first negative B(m).
        min_base_max_length: longest L' whose least base is searched.
    """
    d = check_head_dim(head_dim)
    fits_head_dim(d, agg.search_bytes(1), "the RoPE analysis")  # the Python API too, not only the CLI
    train_length = _check("the training length", train_length, 0)
    s = rotary(scheme)
    tune = None if tune_length is None else _check("the fine-tuning length", tune_length, 0)
    if length is None:
        length = max(default_length(s, train_length), tune or 0)
    length = _check("the length", length, 0)
    beta0 = _check("the pre-training base", s.opts["base"] if pretrain_base is None else pretrain_base, 1, float)
    with one_thread():
        theta = frequencies(s, d, length)
        seen, tuned = _seen(s, d, train_length, tune, pretrained, beta0)
        angle = (length - 1) * theta
        full = seen >= TWO_PI
        beyond = (angle > seen) & ~full
        pairs = tuple(
            FrequencyPair(i, float(t), TWO_PI / float(t) if t > 0 else None, float(a), bool(f), float(x), bool(b))
            for i, (t, a, f, x, b) in enumerate(zip(theta, seen, full, angle, beyond))
        )
        if s.length_dependent:  # dynamic, longrope: θ is chosen by the length
            limit, pair = _dynamic_limit(s, d, seen, max(aggregation_cap, length))
        else:
            limit, pair = _static_limit(theta, seen)
        liu = _liu(s, d, theta, beta0, train_length, tune)
        men = _men(s, d, theta, length, aggregation_cap, min_base_max_length)
    if limit is not None:
        decided = "rotation-angles"
    else:  # no pair limits: all turned a full period (or do not rotate), or a dynamic θ passed every length checked
        decided = "full-periods" if bool((full | (theta == 0)).all()) else "search-cap"
    _, af = s.frequencies(d, length)
    out = RopeTheory(
        s.spec, d, train_length, length, float(s.opts["base"]), s.opts["scaling"], float(af), pairs, liu, men,
        limit, decided, pair, int(beyond.sum()), "", rotary_dim(d, s.opts["partial"]),
    )  # fmt: skip
    return _with_explanation(out, tuned)


def _with_explanation(r: RopeTheory, tuned: torch.Tensor) -> RopeTheory:
    from dataclasses import replace

    stage = None if r.limiting_pair is None else ("fine-tuning" if bool(tuned[r.limiting_pair]) else "pre-training")
    return replace(r, explanation=explain(r, stage))


__all__ = ["MEN_TABLE", "REGIMES", "analyse_rope", "check_head_dim", "critical_base", "critical_dim"]
__all__ += ["default_length", "frequencies", "is_plain", "liu_regime", "rotary", "xpos_rates"]
