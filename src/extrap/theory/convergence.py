"""Does sum_t b_t, b_t = exp(r(t)), converge?  (Qin et al. 2024 = 000, Theorem 0.4)

000 Theorem 0.4 (Eq. 19): a causal transformer whose Toeplitz bias r(t) makes
sum_t exp(r(t)) converge extrapolates.  This module decides that convergence for
one head's symbolic bias by analysis, never from partial sums:

1. the eventual branch of any Piecewise or min/max (:mod:`extrap.theory.eventual`):
   the branch r(t) equals for all large t, classified by :func:`classify_tail`;
   an eventual ``-oo`` means finite support;
2. an asymptotic expansion of ``-r`` (:mod:`extrap.theory.asymptotics`):
   * nth-term test: if r stays bounded below (constant tail, bounded
     oscillation) the terms do not vanish;
   * logarithmic-scale tests: with L1 = ln n, L2 = ln ln n, ...,
     ``-r = L1 + ... + L_{k-1} + q L_k + o(L_k)`` converges iff q > 1
     (k = 1: Cauchy's p-series test, k >= 2: Bertrand's tests);
3. fallbacks under a time limit: the same levels with ``sympy.limit``, then
   ``Sum(b).is_convergent()``; otherwise the verdict is "inconclusive".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import mpmath
import sympy

from extrap.positional.conventions import T, n_from_t
from extrap.theory import asymptotics as asy
from extrap.theory.eventual import Undecided, eventual
from extrap.theory.oscillation import oscillation_mean
from extrap.theory.scale import contains, gaussian_decay, mentions
from extrap.timeout import TimeLimit, time_limit

VERDICTS = ("converges", "diverges", "not-applicable", "inconclusive")
MAX_LEVEL = 5  # compare -r with ln n, ln ln n, ..., ln ln ln ln ln n

_N_NAMES = ["n", "ln n", "ln ln n", "ln ln ln n", "ln^(4) n", "ln^(5) n"]  # L_0 .. L_5 of n
_J_NAMES = ["j", "ln j", "ln ln j", "ln ln ln j", "ln^(4) j", "ln^(5) j"]
_TEST_NAMES = {1: "log-scale (Cauchy p-test)", 2: "Bertrand (ln n)"}

Substitution = Mapping[sympy.Basic, sympy.Basic]
"""Parameter symbol -> one head's exact value: the rule ``xreplace`` applies to a scheme's form."""


@dataclass
class Verdict:
    """The convergence verdict of one head's series sum_t exp(r(t))."""

    verdict: str
    test: str
    explanation: str
    expr: sympy.Expr | None = None  # r(t) for t >= cutoff (the eventual branch)
    cutoff: int | None = None  # from this distance on r equals ``expr``
    exponents: list = field(default_factory=list)  # log-scale exponents p, q, ... per level
    growth: str | None = None  # how the partial sums grow (divergent series)
    tail_level: sympy.Expr | None = None  # eventual value (or mean) of r when r stays bounded
    bounded: bool = False  # r(t) stays bounded: b_t does not tend to 0
    fast: bool = False  # b_t decays faster than every power of n (exponential-like tails)
    finite: bool = False  # finite support: b_t = 0 for t >= cutoff
    settles: bool = False  # the eventual r(t) is a constant
    oscillates: bool = False  # the eventual r(t) has sin/cos in it

    def for_head(self, values: Callable[[], Substitution]) -> Verdict:
        """This verdict of a scheme's form with symbols for its parameters, for one head's ``values()``
        (symbol -> number), asked for only where a symbol is to be replaced: its ``expr`` on first use,
        and ``exponents`` or ``tail_level`` that are not plain numbers (TISA's heads never need theirs)."""
        out = replace(self, exponents=[_subs(q, values) for q in self.exponents])
        out.tail_level = _subs(self.tail_level, values)
        out.__dict__["_values"] = values
        return out


def _subs(e, values: Callable[[], Substitution]):
    # a number holds no symbol: xreplace would return it unchanged
    return e.xreplace(values()) if isinstance(e, sympy.Basic) and not e.is_Number else e


def _get_expr(self: Verdict):
    values = self.__dict__.pop("_values", None)
    if values is not None:  # deferred: a form of 64 cosines takes longer to rebuild than its whole verdict
        self.__dict__["_expr"] = _subs(self.__dict__["_expr"], values)
    return self.__dict__["_expr"]


def _set_expr(self: Verdict, value) -> None:
    self.__dict__.pop("_values", None)
    self.__dict__["_expr"] = value


Verdict.expr = property(_get_expr, _set_expr)  # type: ignore[assignment]


def fmt(q) -> str:
    """A sympy number for explanations: exact when short, else 6 significant digits."""
    q = sympy.sympify(q)
    if q in (sympy.oo, -sympy.oo):
        return "oo" if q is sympy.oo else "-oo"
    if q.is_Rational:  # printed once: sympy's printer costs more than the rest of this function
        text = str(q)
        if len(text) <= 12:
            return text
    v = float(q)
    return f"{v:.6g}" if math.isfinite(v) else str(sympy.N(q, 6))


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------
def classify(r, t=T, timeout: float = 2.0) -> Verdict:
    """Decide convergence of sum_{t>=0} exp(r(t)) for a symbolic bias ``r`` in ``t``."""
    r = sympy.sympify(r)
    try:
        ev, cutoff = eventual(r, t)
    except Undecided as e:
        return Verdict("inconclusive", "none", f"{e}; the tail of r(t) could not be isolated", expr=r)
    v = classify_tail(ev, cutoff, t, timeout)
    if contains(r, (sympy.Min, sympy.Max)):  # say which argument the verdict is about
        start = f"from t = {cutoff} on" if cutoff is not None else "for large t (from a distance not bounded by 2**64)"
        v.explanation = f"{start}, r(t) = {ev} (the eventual argument of min/max): {v.explanation}"
    return v


def classify_tail(ev, cutoff: int, t=T, timeout: float | None = 2.0) -> Verdict:
    """The verdict for a bias equal to ``ev`` (no branches) from ``cutoff`` on.

    ``timeout=None``: the asymptotic expansion alone decides (asy.GiveUp otherwise), as for a
    form with symbols for its parameters, where sympy.limit would be slow.
    """
    if ev == -sympy.oo:  # 000 Eq. 8: a window has finite support
        return Verdict(
            "converges",
            "finite support",
            f"r(t) = -oo for t >= {cutoff}: only the first {cutoff} distances carry weight, so B is a finite sum",
            expr=ev,
            cutoff=cutoff,
            finite=True,
            fast=True,
        )
    if contains(ev, (type(sympy.nan), type(sympy.zoo))) or ev == sympy.oo:
        return Verdict("diverges", "nth-term", "r(t) is +oo or undefined for all large t", expr=ev, cutoff=cutoff)
    try:
        v = _classify_expansion(ev, t)
    except asy.GiveUp as why:
        if timeout is None:
            raise
        v = _classify_limits(ev, t, timeout, str(why))
    return _with_tail(v, ev, cutoff, t)


def classify_vanishing_sum(ev, cutoff: int, t=T) -> Verdict:
    """:func:`classify_tail`'s verdict for a sum whose terms each tend to 0, so r(t) -> 0 (nth-term test).

    For a form with symbols for its parameters where the expansion of the whole sum needs the order of
    its terms (TISA's Gaussians a_k exp(-b_k (t - c_k)^2): which decays slowest depends on each head's
    b_k), although any order gives the same expansion's verdict: no growing term, constant 0, an error
    term o(1).  asy.GiveUp when ``ev`` is not such a sum.
    """
    if not ev.is_Add:
        raise asy.GiveUp("not a sum")
    for term in ev.args:
        if gaussian_decay(term, t):
            continue
        f = asy.expand(term, t)
        if any(m.cmp(asy.ONE) >= 0 for m, _ in f.terms) or (f.err is not None and f.err.cmp(asy.ONE) >= 0):
            raise asy.GiveUp(f"the term {term} of r(t) does not tend to 0")
    return _with_tail(_bounded(asy.Expansion()), ev, cutoff, t)


def _with_tail(v: Verdict, ev, cutoff: int, t) -> Verdict:
    v.expr, v.cutoff = ev, cutoff
    if v.bounded:
        v.settles, v.oscillates = not mentions(ev, t), contains(ev, (sympy.sin, sympy.cos))
        if v.tail_level is None:
            v.tail_level = oscillation_mean(ev, t)
    return v


# ---------------------------------------------------------------------------
# the asymptotic-expansion path
# ---------------------------------------------------------------------------
def _classify_expansion(ev, t) -> Verdict:
    f = -asy.expand(ev, t)  # f = -r(t) as t -> oo
    grow = f.growing()
    if not grow.terms:
        if f.err is not None and f.err.cmp(asy.ONE) > 0:
            raise asy.GiveUp("the error term of -r is not bounded")
        return _bounded(f)
    lead, c = grow.lead
    if asy.sign(c) < 0:  # r -> +oo
        return Verdict(
            "diverges",
            "nth-term",
            f"r(t) -> +oo (leading term {_term(-c, lead)}), so b_t -> oo",
            exponents=[-sympy.oo],
            growth="S(j) grows at least as fast as b_j -> oo",
        )
    fast = lead.beyond_log_powers()  # at least t^delta: exponential-like tails (Newton in j for the TRF)
    levels = []
    fk = f
    for k in range(1, MAX_LEVEL + 1):
        lk = asy.log_scale(k)
        if fk.err is not None and fk.err.cmp(lk) >= 0:
            raise asy.GiveUp(f"-r is only known up to O({fk.err}), not enough for level {k}")
        if fk.terms:
            m, c = fk.lead
            s = m.cmp(lk)
            q = (sympy.oo if asy.sign(c) > 0 else -sympy.oo) if s > 0 else (sympy.Integer(0) if s < 0 else c)
        else:
            q = sympy.Integer(0)
        levels.append(q)
        if q == 1 or (q not in (sympy.oo, -sympy.oo) and asy.sign(q - 1) == 0):
            fk = fk - asy.Expansion([(lk, 1)])
            continue
        rest_bounded = not fk.growing().terms
        lead_text = _term(fk.lead[1], fk.lead[0]) if fk.terms else "0"
        return _decide(levels, lead_text, rest_bounded, fast)
    raise asy.GiveUp("needs more than five logarithmic levels")


def _bounded(f: asy.Expansion) -> Verdict:
    """r stays bounded: b_t >= exp(min r) > 0, the terms do not vanish (nth-term test)."""
    if f.err is None or f.err.cmp(asy.ONE) < 0:  # r -> -c exactly
        level = -f.constant()
        val = _exp_text(level)
        return Verdict(
            "diverges",
            "nth-term",
            f"r(t) -> {fmt(level)} as t -> oo, so b_t -> exp({fmt(level)}) = {val} != 0: the terms do not vanish",
            exponents=[sympy.Integer(0)],
            growth=f"S(j) ~ {val}*j",
            tail_level=level,
            bounded=True,
        )
    return Verdict(
        "diverges",
        "nth-term",
        "r(t) stays bounded as t -> oo (its t-dependence is inside sin/cos, each within [-1, 1]), "
        "so b_t >= exp(min r) > 0 does not tend to 0",
        exponents=[sympy.Integer(0)],
        growth="S(j) ~ c*j (c = long-run mean of b_t)",
        bounded=True,
    )


def _exp_text(level) -> str:
    """exp(level) to 4 significant digits, at any magnitude, from the number ``level``.

    (sympy's exp(level) may try to simplify, and evaluating it with |level| ~ 1e5 takes minutes.)
    """
    with mpmath.workdps(30):
        x = mpmath.mpf(sympy.N(level, 30))
        if abs(x) < 700:
            return f"{float(mpmath.exp(x)):.4g}"
        l10 = x / mpmath.ln10
        e = mpmath.floor(l10)
        if abs(e) > 10**15:
            return f"10^({mpmath.nstr(l10, 4)})"
        return f"{mpmath.nstr(mpmath.power(10, l10 - e), 4, min_fixed=-1, max_fixed=2)}e{int(e):+d}"


def _decide(levels: list, lead_text: str | None, rest_bounded: bool, fast: bool) -> Verdict:
    """Verdict from the log-scale exponents p (level 1), q (level 2), ... (last one != 1)."""
    k = len(levels)
    q = levels[-1]
    test = _TEST_NAMES.get(k, f"Bertrand (level {k})")
    prefix = " + ".join(_N_NAMES[1:k])  # the levels that matched with exponent 1
    what = f"-r(t) = {prefix + ' + ' if prefix else ''}q*{_N_NAMES[k]} + o({_N_NAMES[k]})"
    name = "p" if k == 1 else "q"
    what = what.replace("q*", f"{name}*")
    lead = f" (leading term {lead_text})" if lead_text else ""
    if q is sympy.oo:
        expl = (
            f"-r(t) - ({prefix or '0'}) grows faster than {_N_NAMES[k]}{lead}: "
            f"{name} = oo > 1, so the series converges ({test})"
        )
        if k == 1:
            expl = (
                f"-r(t) grows faster than any multiple of ln n{lead}: b_t decays faster "
                f"than every power of n, p = oo, so the series converges ({test})"
            )
        return Verdict("converges", test, expl, exponents=levels, fast=fast and k == 1)
    if q is not -sympy.oo and asy.sign(q - 1) > 0:
        return Verdict(
            "converges", test, f"{what} with {name} = {fmt(q)} > 1, so the series converges ({test})", exponents=levels
        )
    growth = _growth(k, q, rest_bounded)
    expl = (
        f"{what} with {name} = {fmt(q)} < 1, so the series diverges ({test}); {growth}"
        if q is not -sympy.oo
        else f"-r(t) - ({prefix or '0'}) -> -oo faster than {_N_NAMES[k]}: {name} = -oo < 1, the series "
        f"diverges ({test}); {growth}"
    )
    return Verdict("diverges", test, expl, exponents=levels, growth=growth)


def _growth(k: int, q, rest_bounded: bool) -> str:
    """Partial-sum growth from the deciding level: sum of 1/(n L1...L_{k-2} L_{k-1}^q) ~ L_{k-1}^(1-q)."""
    base = _J_NAMES[k - 1]
    if q is -sympy.oo:
        return f"S(j) grows faster than any power of {base}"
    if q == 0 and not rest_bounded:
        return f"S(j) ~ ({base})^(1-o(1))"
    e = 1 - q
    if e == 1:
        return f"S(j) ~ {base}"
    power = fmt(e) if sympy.sympify(e).is_Integer else f"({fmt(e)})"
    return f"S(j) ~ ({base})^{power}" if k > 1 else f"S(j) ~ j^{power}"


def _term(c, m: asy.Mono) -> str:
    return describe(m) if c == 1 else f"{fmt(c)}*{describe(m)}"


def describe(m: asy.Mono) -> str:
    """A monomial of the scale in words, e.g. 't', '(ln n)^2', 't^(1/2)*ln n'."""
    pf = m.power_form()
    names = ["t", "ln n", "ln ln n", "ln ln ln n", "ln^(4) n", "ln^(5) n"]
    if pf is None:
        return "exp(...)"
    parts = []
    for nm, e in zip(names, pf):
        if e == 0:
            continue
        base = nm if " " not in nm else f"({nm})"
        parts.append(base if e == 1 else f"{base}^{fmt(e)}")
    return "*".join(parts) or "1"


# ---------------------------------------------------------------------------
# fallbacks: sympy.limit on the same levels, then Sum.is_convergent
# ---------------------------------------------------------------------------
def _classify_limits(ev, t, timeout: float, why: str) -> Verdict:
    x = sympy.Symbol("x", positive=True)
    e = ev.subs(t, x)
    note = f"(expansion engine: {why}; decided with sympy.limit)"
    try:
        with time_limit(timeout):
            lim_r = sympy.limit(e, x, sympy.oo)
            if isinstance(lim_r, sympy.AccumBounds):
                if lim_r.min.is_finite:
                    v = Verdict(
                        "diverges",
                        "nth-term",
                        f"r(t) stays within {lim_r} for large t, so b_t does not tend to 0 {note}",
                        exponents=[sympy.Integer(0)],
                        growth="S(j) ~ c*j (c = long-run mean of b_t)",
                        bounded=True,
                    )
                    return v
                raise TimeLimit("oscillating limit")
            if lim_r.is_finite:
                return _bounded(asy.Expansion.const(-lim_r))
            if lim_r is sympy.oo:
                return Verdict(
                    "diverges",
                    "nth-term",
                    f"r(t) -> +oo, so b_t -> oo {note}",
                    exponents=[-sympy.oo],
                    growth="S(j) grows at least as fast as b_j -> oo",
                )
            logs = [n_from_t(x)]  # L_0 = n, then ln n, ln ln n, ...
            for _ in range(MAX_LEVEL):
                logs.append(sympy.log(logs[-1]))
            levels = []
            rest = -e
            for k in range(1, MAX_LEVEL + 1):
                q = sympy.limit(rest / logs[k], x, sympy.oo)
                if not (q.is_extended_real and (q.is_finite or q in (sympy.oo, -sympy.oo))):
                    raise TimeLimit(f"limit at level {k} is {q}")
                levels.append(q)
                if q == 1:
                    rest = rest - logs[k]
                    continue
                rest_bounded = False
                if q == 0:
                    tail = sympy.limit(rest, x, sympy.oo)
                    rest_bounded = bool(tail.is_finite)
                v = _decide(levels, None, rest_bounded, fast=False)
                v.explanation += f" {note}"
                return v
    except (TimeLimit, NotImplementedError, ValueError, TypeError, RecursionError, AttributeError) as exc:
        return _classify_sum(ev, t, timeout, f"{why}; sympy.limit: {exc}")
    return _classify_sum(ev, t, timeout, f"{why}; more than {MAX_LEVEL} levels")


def _classify_sum(ev, t, timeout: float, why: str) -> Verdict:
    try:
        with time_limit(timeout):
            ok = sympy.Sum(sympy.exp(ev), (t, 0, sympy.oo)).is_convergent()
    except Exception as exc:  # sympy raises many kinds here; any failure means "undecided"
        ok, why = None, f"{why}; Sum.is_convergent: {type(exc).__name__} {exc}"
    if ok is sympy.true or ok is True:
        return Verdict("converges", "sympy Sum.is_convergent", f"sympy's convergence tests decide it ({why})")
    if ok is sympy.false or ok is False:
        return Verdict("diverges", "sympy Sum.is_convergent", f"sympy's convergence tests decide it ({why})")
    return Verdict("inconclusive", "none", f"no test decided the tail of r(t) = {ev} ({why})")
