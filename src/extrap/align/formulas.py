"""The model-free half of 004's temperature alignment: argument checks, statistics of softmax rows,
the closed forms of §6 and Algorithm 1's search over τ.

:mod:`extrap.align` applies them to a model; everything here is a pure function of numbers or
tensors, tested against hand-derived values.

* **Closed forms** (004 §6; :func:`extrap.align.closed_forms` reads the layer-0 pre-softmax
  logits at τ = 1): each logit vector is centred (softmax is shift-invariant),
  sorted, and averaged over all H x L vectors; σ is the standard deviation and
  l_max the largest entry of that averaged vector, at L_tr and at L_ex.  Causal
  rows have different lengths, so each sorted row is resampled to L quantiles
  (linear interpolation of its empirical quantile function) before averaging;
  for full rows (a bidirectional encoder, the paper's case) this is the exact
  sort-and-average.  Then

  - Prop. 1 (P_max, :func:`prop1`): A τ² - B τ + C = 0 with A = log L_ex + log P,
    B = log L_tr + log P + σ_tr²/2, C = σ_ex²/2.  P is the training P_max of the
    *model of §6.1*, Eq. (2) solved for P: P = e^{l_max^tr} / (L_tr e^{σ_tr²/2}), so
    B = l_max^tr.  The target and the extrapolated P_max^ex(τ) then share one
    approximation (Eq. 1, which leaves the top entry out of the denominator), and its
    error largely cancels; this P can exceed 1.  The exact softmax maximum of the
    averaged vector is reported as ``P_softmax`` (its root as ``prop1_softmax_P``):
    on Gaussian logits with a planted maximum it misses Algorithm 1 by more, or has
    no root.  Whatever P, τ = 1 solves the equation at L_ex = L_tr, σ_ex = σ_tr.
    The larger root is taken (the paper's choice) when it is a valid temperature.
    Writing u = 1/τ, log P_max^ex = B u - C u² - log L_ex is a parabola peaking at
    τ = 2C/B; only for τ > 2C/B does it rise as τ falls, as a softmax does.  The
    larger root lies there iff A > 0, B > 0 and B² >= 4AC.  Otherwise ``prop1`` is
    None and ``prop1_status`` says why: ``no real root`` (B² < 4AC: the approximate
    P_max^ex never reaches P; its peak ``prop1_peak_pmax`` < P at τ = 2C/B; typical of
    ALiBi, whose linear logits are far from Gaussian: σ_ex grows with L_ex) or
    ``no valid root`` (A <= 0, i.e. P <= 1/L_ex, below uniform attention, or B <= 0).
  - Prop. 2 (entropy): τ = σ_ex / sqrt(σ_tr² + 2 log(L_ex / L_tr)).
  - the log-length rule (Yao et al. 2021; Su 2021): τ = log_{L_ex} L_tr.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from extrap.errors import ExtrapError

MODES = ("pmax", "entropy", "log-length", "prop1", "prop2")
SEARCH_MODES = ("pmax", "entropy")  # Algorithm 1
DEFAULT_GRID = tuple(round(1.0 - 0.05 * i, 2) for i in range(11))  # 1.0, 0.95, ..., 0.5 (004 Table 5)
REFINE_STEPS = 6
MAX_PROBE_LENGTH = 4096  # attention probing holds one layer's rows: O(L^2)


# ---------------------------------------------------------------------------
# argument checks
# ---------------------------------------------------------------------------
def check_mode(mode: str, allowed: Sequence[str] = MODES) -> str:
    if mode not in allowed:
        raise ExtrapError(f"unknown alignment mode {mode!r} (choose from {', '.join(allowed)})")
    return mode


def check_tau(tau) -> float | list[float]:
    vals = list(tau) if isinstance(tau, (list, tuple)) else [tau]
    for t in vals:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (t > 0 and math.isfinite(t)):
            raise ExtrapError(f"temperature must be a positive finite number, got {t!r}")
    return [float(t) for t in vals] if isinstance(tau, (list, tuple)) else float(tau)


def check_grid(grid: Sequence[float]) -> list[float]:
    grid = [float(t) for t in grid]
    if not grid:
        raise ExtrapError("the τ grid is empty")
    for t in grid:
        check_tau(t)
    return grid


def check_lengths(train_length: int, lengths: Sequence[int], max_length: int | None) -> None:
    if int(train_length) < 2 or any(int(L) < 2 for L in lengths):
        raise ExtrapError("lengths must be integers >= 2")
    cap = MAX_PROBE_LENGTH if max_length is None else int(max_length)
    too_long = [int(L) for L in [train_length, *lengths] if int(L) > cap]
    if too_long:
        raise ExtrapError(
            f"attention probing is capped at {cap} tokens (every row of one layer is held in "
            f"memory, O(L^2)); got {max(too_long)}: raise the cap (max_length) "
            "or use the log-length rule"
        )


# ---------------------------------------------------------------------------
# pure statistics of softmax rows
# ---------------------------------------------------------------------------
def row_stats(probs: torch.Tensor) -> tuple[float, float, int]:
    """(sum of P_max, sum of entropy, number of rows) of probability rows (..., Lk); zeros are masked keys."""
    p = probs.double()
    pmax = p.amax(-1)
    ent = -torch.special.xlogy(p, p).sum(-1)
    return float(pmax.sum()), float(ent.sum()), pmax.numel()


@dataclass(frozen=True)
class SoftmaxStat:
    """Average P_max and entropy H of a set of softmax rows (004 Table 1's "dispersed attention")."""

    pmax: float
    entropy: float

    def get(self, mode: str) -> float:
        """The statistic that Algorithm 1 matches in ``mode`` (pmax or entropy)."""
        return getattr(self, check_mode(mode, SEARCH_MODES))

    def to_json(self) -> dict:
        return {"pmax": self.pmax, "entropy": self.entropy}

    @classmethod
    def from_json(cls, d: dict) -> SoftmaxStat:
        return cls(pmax=d["pmax"], entropy=d["entropy"])


def logit_row_stats(logits: torch.Tensor, tau: float) -> SoftmaxStat:
    """Average P_max and entropy of softmax(logits / τ) over the rows of ``logits`` (N, L) (-inf = masked)."""
    p = torch.softmax(logits.double() / tau, dim=-1)
    s_p, s_h, n = row_stats(p)
    return SoftmaxStat(pmax=s_p / n, entropy=s_h / n)


def averaged_sorted_logits(logits: torch.Tensor, length: int | None = None) -> torch.Tensor:
    """004 §6: centre each logit row, sort it (descending) and average over rows -> (length,).

    ``logits`` (..., Lk); entries <= -1e29 (or -inf) are masked keys.  A row with n valid
    entries is resampled to ``length`` (default Lk) quantiles: target j sits at quantile
    (j + 0.5) / length, read off the row's empirical quantile function (linear between
    the order statistics at (k + 0.5) / n).  Full rows with n = length are used as is.
    """
    s, n = sorted_centred(logits)
    total = resampled(s, n, length or s.shape[-1])
    return total.sum(0) / total.shape[0]


def sorted_centred(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``logits`` (..., Lk) centred on their unmasked mean and sorted descending (masked: -inf last),
    and each row's count of unmasked entries."""
    x = logits.reshape(-1, logits.shape[-1]).double()
    valid = x > -1e29
    n = valid.sum(-1)
    if bool((n == 0).any()):
        raise ExtrapError("a logit row has no unmasked entry")
    mean = torch.where(valid, x, torch.zeros((), dtype=x.dtype)).sum(-1, keepdim=True) / n.unsqueeze(-1)
    x = torch.where(valid, x - mean, torch.full((), -math.inf, dtype=x.dtype))
    return x.sort(-1, descending=True).values, n


def resampled(s: torch.Tensor, n: torch.Tensor, length: int) -> torch.Tensor:
    """Each sorted row (valid entries first) resampled to ``length`` quantiles: (rows, length)."""
    j = torch.arange(length, dtype=torch.float64, device=s.device)
    nn_ = n.unsqueeze(-1).to(torch.float64)
    pos = ((j + 0.5) * nn_ / length - 0.5).clamp(min=0.0)
    pos = torch.minimum(pos, nn_ - 1)
    lo = pos.floor().long()
    hi = torch.minimum(lo + 1, n.unsqueeze(-1) - 1)
    w = pos - lo
    if s.shape[-1] == length and bool((n == length).all()):
        return s
    return s.gather(-1, lo) * (1 - w) + s.gather(-1, hi) * w


def sigma_of(avg: torch.Tensor) -> float:
    """Standard deviation of an averaged logit vector (004 Assumption 1: its entries ~ N(0, σ²))."""
    a = avg.double()
    return float((a - a.mean()).pow(2).mean().sqrt())


# ---------------------------------------------------------------------------
# closed forms (004 §6)
# ---------------------------------------------------------------------------
def log_length_tau(train_length: int, length: int) -> float:
    """τ = log_{L_ex} L_tr (Yao et al. 2021; Su 2021)."""
    if train_length < 2 or length < 2:
        raise ExtrapError("lengths must be integers >= 2")
    return math.log(train_length) / math.log(length)


def prop2_tau(train_length: int, length: int, sigma_tr: float, sigma_ex: float) -> float:
    """004 Prop. 2 (entropy): τ ≈ σ_ex / sqrt(σ_tr² + 2 log(L_ex / L_tr))."""
    d = sigma_tr**2 + 2 * math.log(length / train_length)
    if not d > 0:
        raise ExtrapError(f"Prop. 2 is undefined here: σ_tr² + 2 log(L_ex/L_tr) = {d:.4g} <= 0")
    return sigma_ex / math.sqrt(d)


def prop1_coefficients(train_length: int, length: int, sigma_tr: float, sigma_ex: float, P: float):
    """A, B, C of 004 Prop. 1: A = log L_ex + log P, B = log L_tr + log P + σ_tr²/2, C = σ_ex²/2."""
    if not (P > 0 and math.isfinite(P)):
        raise ExtrapError(f"Prop. 1 needs P > 0, got {P}")
    A = math.log(length) + math.log(P)
    B = math.log(train_length) + math.log(P) + sigma_tr**2 / 2
    C = sigma_ex**2 / 2
    return A, B, C


def prop1_roots(train_length: int, length: int, sigma_tr: float, sigma_ex: float, P: float) -> list[float]:
    """Real roots of A τ² - B τ + C = 0, descending (empty when there are none)."""
    A, B, C = prop1_coefficients(train_length, length, sigma_tr, sigma_ex, P)
    if A == 0:
        return [C / B] if B != 0 else []
    disc = B * B - 4 * A * C
    if disc < 0:
        return []
    r = math.sqrt(disc)
    return sorted({(B + r) / (2 * A), (B - r) / (2 * A)}, reverse=True)


@dataclass(frozen=True)
class Prop1:
    """004 Prop. 1 solved at one L_ex (see the module docstring).

    ``status`` "root": ``tau`` is the larger root.  "no real root" / "no valid root": ``tau`` is None.
    ``peak_tau`` = 2C/B and ``peak_pmax``: where §6.1's approximate P_max^ex(τ) peaks and its value
    there (None unless B, C > 0).
    """

    tau: float | None
    roots: tuple[float, ...]
    P: float
    A: float
    B: float
    C: float
    peak_tau: float | None
    peak_pmax: float | None
    status: str

    def to_json(self) -> dict:
        return {
            "tau": self.tau,
            "roots": list(self.roots),
            "P": self.P,
            "A": self.A,
            "B": self.B,
            "C": self.C,
            "peak_tau": self.peak_tau,
            "peak_pmax": self.peak_pmax,
            "status": self.status,
        }

    @classmethod
    def from_json(cls, d: dict) -> Prop1:
        return cls(**{**d, "roots": tuple(d.get("roots") or ())})

    def explain(self, length: int) -> str:
        """One line on why there is no τ at L_ex = ``length``."""
        if self.status == "no real root":
            peak = (
                f"peaks at {self.peak_pmax:.3g} (τ = 2C/B = {self.peak_tau:.3g}), below"
                if self.peak_tau is not None
                else "stays below"
            )
            return (
                f"Prop. 1 has no real root at L_ex={length}: B² < 4AC (A={self.A:.3g}, B={self.B:.3g}, "
                f"C={self.C:.3g}); under 004 §6.1's approximation P_max^ex(τ) {peak} P = {self.P:.3g}"
            )
        return (
            f"Prop. 1 has no valid root at L_ex={length} (A={self.A:.3g}, B={self.B:.3g}, C={self.C:.3g}): "
            "the larger root is not on the branch where P_max^ex falls as τ rises"
        )


def prop1(train_length: int, length: int, sigma_tr: float, sigma_ex: float, P: float) -> Prop1:
    """004 Prop. 1 solved: the larger root when it is a valid temperature, the coefficients and the peak."""
    A, B, C = prop1_coefficients(train_length, length, sigma_tr, sigma_ex, P)
    roots = prop1_roots(train_length, length, sigma_tr, sigma_ex, P)
    peak_tau = peak_pmax = None
    if B > 0 and C > 0:  # u = 1/τ: log P_ex = B u - C u² - log L_ex peaks at u = B / 2C
        peak_tau = 2 * C / B
        peak_pmax = math.exp(B * B / (4 * C) - math.log(length))
    tau = None
    if not roots and B * B < 4 * A * C:
        status = "no real root"
    elif A > 0 and B > 0 and roots:
        status, tau = "root", roots[0]
    else:
        status = "no valid root"
    return Prop1(tau, tuple(roots), P, A, B, C, peak_tau, peak_pmax, status)


def prop1_tau(train_length: int, length: int, sigma_tr: float, sigma_ex: float, P: float) -> float | None:
    """004 Prop. 1 (P_max): the larger root of A τ² - B τ + C = 0, or None without a valid one (:func:`prop1`)."""
    return prop1(train_length, length, sigma_tr, sigma_ex, P).tau


def prop1_pmax(train_length: int, length: int, sigma_tr: float, sigma_ex: float, P: float, tau: float) -> float:
    """004 §6.1: the approximate P_max^ex(τ) = (P L_tr e^{σ_tr²/2})^{1/τ} / (L_ex e^{σ_ex²/(2τ²)})."""
    log_p = (
        (math.log(P) + math.log(train_length) + sigma_tr**2 / 2) / tau - math.log(length) - sigma_ex**2 / (2 * tau**2)
    )
    return math.exp(log_p)


# ---------------------------------------------------------------------------
# Algorithm 1 as a search over τ (model-free core)
# ---------------------------------------------------------------------------
Curve = tuple[tuple[float, float], ...]  # (τ, S(τ)) pairs


def _curve(v) -> Curve | None:
    return None if v is None else tuple((float(t), float(x)) for t, x in v)


@dataclass(frozen=True)
class Search:
    """One search over τ: the pick, the target and S at the pick, the grid curve and the refinement.

    ``curve`` / ``refined`` are None in a summary (:meth:`summary`), which keeps only the pick.
    """

    tau: float
    grid_tau: float
    target: float
    value: float
    curve: Curve | None  # (τ, S(τ)) on the grid
    refined: Curve | None  # (τ, S(τ)) probed by the refinement
    at_grid_edge: bool

    def summary(self) -> Search:
        return replace(self, curve=None, refined=None)

    def to_json(self) -> dict:
        out = {"tau": self.tau, "grid_tau": self.grid_tau, "target": self.target, "value": self.value}
        if self.curve is not None:
            out["curve"] = [list(p) for p in self.curve]
        if self.refined is not None:
            out["refined"] = [list(p) for p in self.refined]
        return {**out, "at_grid_edge": self.at_grid_edge}

    @classmethod
    def from_json(cls, d: dict) -> Search:
        tau, grid_tau, target, value = d["tau"], d["grid_tau"], d["target"], d.get("value")
        curve, refined = _curve(d.get("curve")), _curve(d.get("refined"))
        return cls(tau, grid_tau, target, value, curve, refined, bool(d.get("at_grid_edge", False)))


def search_tau(
    stat: Callable[[float], float],
    target: float,
    grid: Sequence[float] = DEFAULT_GRID,
    refine: bool = True,
    refine_steps: int = REFINE_STEPS,
) -> Search:
    """Algorithm 1's search: the τ whose statistic S(τ) is closest to ``target``.

    Stage 1 (the paper): S on the grid, pick argmin |S(τ) - target| (ties: the larger τ).
    Stage 2 (``refine``): bisect a grid bracket around the pick where S - target changes sign.
    """
    grid = check_grid(grid)
    curve = [(t, float(stat(t))) for t in grid]
    best = min(range(len(curve)), key=lambda i: (abs(curve[i][1] - target), -curve[i][0]))
    grid_tau = curve[best][0]
    seen = list(curve)
    refined: list = []
    order = sorted(range(len(curve)), key=lambda i: curve[i][0])
    pos = order.index(best)
    bracket = None
    if refine and refine_steps > 0:
        d0 = curve[best][1] - target
        for nb in (pos - 1, pos + 1):
            if 0 <= nb < len(order) and d0 != 0:
                dn = curve[order[nb]][1] - target
                if dn == 0 or (dn > 0) != (d0 > 0):
                    bracket = (curve[best], curve[order[nb]])
                    break
    if bracket is not None:
        (a, fa), (b, _) = bracket
        for _ in range(refine_steps):
            m = 0.5 * (a + b)
            fm = float(stat(m))
            refined.append((m, fm))
            seen.append((m, fm))
            if (fm - target > 0) == (fa - target > 0):
                a, fa = m, fm
            else:
                b = m
    tau, value = min(seen, key=lambda p: (abs(p[1] - target), -p[0]))
    return Search(
        tau=tau,
        grid_tau=grid_tau,
        target=float(target),
        value=value,
        curve=tuple(curve),
        refined=tuple(refined),
        at_grid_edge=not _brackets_anywhere(curve, target),
    )


def _brackets_anywhere(curve, target) -> bool:
    d = [s - target for _, s in sorted(curve)]
    return any(x == 0 for x in d) or any((x > 0) != (y > 0) for x, y in zip(d, d[1:]))
