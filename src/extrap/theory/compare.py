"""Which of two RPEs has the smaller TRF as eps -> 0?  (000 Theorem 0.5)

000 Theorem 0.5 (Eq. 23-24): if alpha_t/alpha <= beta_t/beta for all large t, with
alpha, beta the two series sums, then n^alpha(eps) <= n^beta(eps) as eps -> 0.
We decide the eventual inequality from the limit of the ratio

    L = lim (alpha_t/alpha) / (beta_t/beta) = (beta/alpha) * lim exp(r_a(t) - r_b(t)):

L < 1 means A's normalised weights end up below B's (A has the smaller TRF),
L > 1 the reverse, L = 1 (or no limit) leaves the theorem silent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import mpmath
import sympy
import torch

from extrap.positional.base import Scheme
from extrap.positional.conventions import T
from extrap.theory import asymptotics as asy
from extrap.theory.analysis import analyse, not_applicable_reason, resolve
from extrap.theory.convergence import fmt
from extrap.timeout import TimeLimit, time_limit

DEFAULT_EPS = (1e-3, 1e-6, 1e-9, 1e-12)


@dataclass
class Comparison:
    """Theorem 0.5 applied to head ``head_a`` of A and head ``head_b`` of B."""

    a: str
    b: str
    head_a: int
    head_b: int
    smaller: str | None  # "a", "b", or None when the theorem does not decide
    limit: str  # L = lim (alpha_t/alpha)/(beta_t/beta), as text
    explanation: str
    trf_a: dict[str, int | None] = field(default_factory=dict)
    trf_b: dict[str, int | None] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "head_a": self.head_a,
            "head_b": self.head_b,
            "smaller": self.smaller,
            "limit": self.limit,
            "explanation": self.explanation,
            "trf_a": self.trf_a,
            "trf_b": self.trf_b,
        }

    @classmethod
    def from_json(cls, d: dict) -> Comparison:
        keys = ("a", "b", "head_a", "head_b", "smaller", "limit", "explanation")
        return cls(**{k: d.get(k) for k in keys}, trf_a=dict(d.get("trf_a") or {}), trf_b=dict(d.get("trf_b") or {}))


def compare(
    scheme_a: Scheme | str,
    scheme_b: Scheme | str,
    num_heads: int = 8,
    head_a: int = 0,
    head_b: int = 0,
    values_a: Mapping[str, torch.Tensor] | None = None,
    values_b: Mapping[str, torch.Tensor] | None = None,
    eps: Iterable[float] = DEFAULT_EPS,
    timeout: float = 2.0,
) -> Comparison:
    """Decide which TRF is smaller as eps -> 0, and report both TRFs at ``eps``."""
    a, b = resolve(scheme_a), resolve(scheme_b)
    eps = tuple(eps)
    ra = _pick(a, num_heads, values_a, eps, head_a)
    rb = _pick(b, num_heads, values_b, eps, head_b)
    out = Comparison(a.spec, b.spec, head_a, head_b, None, "undefined", "", dict(ra.trf), dict(rb.trf))
    if ra.verdict != "converges" or rb.verdict != "converges":
        out.explanation = f"Theorem 0.5 needs both series to converge ({a.spec}: {ra.verdict}, {b.spec}: {rb.verdict})"
        return out
    ea, eb = ra.detail.expr, rb.detail.expr
    if ea == -sympy.oo or eb == -sympy.oo:
        if ea == eb:
            out.explanation = "both have finite support: eventually both weights are 0, the theorem does not decide"
            return _numeric_note(out)
        out.smaller = "a" if ea == -sympy.oo else "b"
        out.limit = "0" if out.smaller == "a" else "oo"
        fin = a.spec if out.smaller == "a" else b.spec
        out.explanation = f"{fin} has finite support, so its normalised weights are eventually 0 < the other's"
        return _numeric_note(out)
    d = _limit_difference(ea, eb, timeout)  # lim (r_a - r_b)
    if d is None:
        out.explanation = "lim (r_a(t) - r_b(t)) could not be determined: the theorem does not decide"
        return _numeric_note(out)
    if d in (sympy.oo, -sympy.oo):
        out.smaller = "a" if d == -sympy.oo else "b"
        out.limit = "0" if d == -sympy.oo else "oo"
        out.explanation = (
            f"r_a(t) - r_b(t) -> {fmt(d)}, so (alpha_t/alpha)/(beta_t/beta) -> {out.limit}: "
            f"{(a.spec if out.smaller == 'a' else b.spec)} has the smaller TRF as eps -> 0"
        )
        return _numeric_note(out)
    return _finite_limit(out, ra, rb, d)


def _finite_limit(out: Comparison, ra, rb, d) -> Comparison:
    """L = (B_b/B_a) exp(lim(r_a - r_b)) for a finite limit d of r_a - r_b."""
    alpha, beta = ra.series_sum, rb.series_sum
    if alpha is None or beta is None:  # the limit ratio needs both sums
        missing = out.a if alpha is None else out.b
        note = (ra if alpha is None else rb).trf_note or "B was not computed"
        out.explanation = f"r_a - r_b -> {fmt(d)}, but the ratio also needs B of {missing} ({note})"
        return _numeric_note(out)
    with mpmath.workdps(30):
        ratio = beta / alpha * mpmath.exp(mpmath.mpf(sympy.N(d, 40)))
    out.limit = mpmath.nstr(ratio, 10)
    if abs(ratio - 1) < mpmath.mpf(10) ** -20:
        out.explanation = (
            f"the limit ratio is 1 (r_a - r_b -> {fmt(d)} and B_b/B_a = exp(-that)): the theorem does not decide"
        )
        return _numeric_note(out)
    out.smaller = "a" if ratio < 1 else "b"
    out.explanation = (
        f"(alpha_t/alpha)/(beta_t/beta) -> (B_b/B_a) exp(lim(r_a - r_b)) = {out.limit} "
        f"{'<' if ratio < 1 else '>'} 1, so {(out.a if out.smaller == 'a' else out.b)} "
        f"has the smaller TRF as eps -> 0"
    )
    return _numeric_note(out)


def _pick(scheme: Scheme, num_heads: int, values, eps: tuple, head: int):
    """The analysis of one head (the single not-applicable row for APE/RoPE/FIRE)."""
    if not_applicable_reason(scheme):
        return analyse(scheme, num_heads)[0]
    return analyse(scheme, num_heads, values, eps=eps, heads=[head])[0]


def _limit_difference(ea, eb, timeout: float):
    """lim_{t->oo} (ea - eb): +-oo, a finite sympy number, or None."""
    try:
        f = asy.expand(ea, T) - asy.expand(eb, T)
        grow = f.growing()
        if grow.terms:
            return sympy.oo if asy.sign(grow.lead[1]) > 0 else -sympy.oo
        if f.err is None or f.err.cmp(asy.ONE) < 0:
            return f.constant()
        return None  # bounded but oscillating: no limit
    except asy.GiveUp:
        pass
    x = sympy.Symbol("x", positive=True)
    try:
        with time_limit(timeout):
            d = sympy.limit((ea - eb).subs(T, x), x, sympy.oo)
    except (TimeLimit, NotImplementedError, ValueError, TypeError):
        return None
    if d in (sympy.oo, -sympy.oo) or (d.is_real and d.is_finite):
        return d
    return None


def _numeric_note(out: Comparison) -> Comparison:
    """Append the TRFs at the smallest common eps as a numeric cross-check."""
    keys = [k for k in out.trf_a if out.trf_a.get(k) is not None and out.trf_b.get(k) is not None]
    if keys:
        k = min(keys, key=float)
        ta, tb = out.trf_a[k], out.trf_b[k]
        note = f"; numerically at eps={k}: TRF_a = {ta}, TRF_b = {tb}"
        if out.smaller is not None and ta != tb:
            agrees = (ta < tb) == (out.smaller == "a")
            note += " (consistent)" if agrees else " (not yet: Theorem 0.5 is a statement for eps -> 0)"
        out.explanation += note
    return out


__all__ = ["Comparison", "compare"]
