"""Series sum B and the theoretical receptive field n(eps) of a convergent head.

000 Eq. 22:  n(eps) = min{ j : sum_{t<j} b_t > B(1-eps) } = min{ j : sum_{t>=j} b_t < B eps },
with B = sum_{t>=0} b_t and b_t = exp(r(t)).

TRFs reach ~10^12 (Type1 at eps = 1e-12) and beyond, so nothing here sums up to
j.  A :class:`Series` keeps

* the exact head ``b_0 .. b_{n0-1}`` (mpmath: ``scheme.scalar`` below the
  eventual cutoff, the eventual symbolic form of r beyond it), and
* an Euler-Maclaurin tail for any real J >= n0:
  ``R(J) = sum_{t>=J} b_t = int_J^oo b + b(J)/2 - sum_k B_2k/(2k)! b^(2k-1)(J)``,
  with the derivatives by ``mpmath.diffs`` and the integral by Gauss-Laguerre
  after a change of variable (``mpmath.quad`` when that is not accurate;
  :mod:`extrap.theory.quadrature`).

The crossing ``R(j) = B eps`` is located by a safeguarded Newton iteration on
``log R`` at modest precision (in j for exponential-like tails, in ln j for
power-like ones, where ``log R`` is nearly linear), then settled exactly on the
integers at full precision: ``R(n-1) = R(n) + b_{n-1}``, ``R(n+1) = R(n) - b_n``.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import sympy

from extrap.errors import ExtrapError
from extrap.positional.conventions import T
from extrap.positional.ops import EXP_MAG, saturating_exp
from extrap.theory.errors import InfiniteTerm, NotReal, SeriesError
from extrap.theory.jets import Unsupported, compile_jet, weight_function
from extrap.theory.quadrature import em_coefficient, pow10, tail_integral

DPS = 40  # working precision of B and of the integer decisions (decimal digits)
N_DIRECT = (64, 512, 4096)  # exact terms before the Euler-Maclaurin tail (more if EM is not yet accurate)
MAX_DIRECT = 200_000  # longest finite support / cutoff we sum term by term
TRF_MAX = 10**30  # beyond this the integer would need more digits than DPS guards
EPS_MIN = 1e-30  # smaller eps would need more digits than DPS to settle the integer
EM_TERMS = 6  # Bernoulli corrections B_2 .. B_12: for smooth tails each is ~(2 pi J)^-2 of the last


def term_at(f: Callable, k: int):
    """``f(k)`` (r(k), or b_k from it) with arithmetic failures as verdicts: a pole makes the sum infinite."""
    try:
        return f(k)
    except (ZeroDivisionError, OverflowError):
        raise InfiniteTerm(f"b_t is infinite at t={k} (r = +oo there), so the sum is infinite") from None
    except (ValueError, TypeError) as e:
        raise NotReal(f"r(t) cannot be evaluated at t={k}: {e}") from None


def checked_eps(eps):
    """``eps`` of n(eps) (000 Eq. 22) as an mpf at the current precision (a float by its shortest repr).

    Refused outside (0, 1) and below :data:`EPS_MIN`, where DPS digits cannot settle the integer.
    """
    eps_mp = mpmath.mpf(repr(eps)) if isinstance(eps, float) else mpmath.mpf(eps)
    if not 0 < eps_mp < 1:
        raise ExtrapError("eps must lie in (0, 1)")
    if eps_mp < EPS_MIN:
        raise SeriesError(f"eps below {EPS_MIN:g} needs more than {DPS} digits")
    return eps_mp


class Series:
    """sum_{t>=0} b_t for one convergent head, with tails R(j) = sum_{t>=j} b_t.

    ``head(t)`` gives r(t) (mpmath) for any integer t; ``tail_expr`` is r(t) as a
    sympy expression in ``t`` valid for t >= ``cutoff`` (None: finite support,
    b_t = 0 from ``cutoff`` on).  ``fast`` marks tails that decay faster than every
    power of t, for which the Newton search runs in j rather than in ln j.
    """

    def __init__(self, head: Callable[[int], object], tail_expr=None, cutoff: int = 0, t=T, fast: bool = False):
        self.fast = fast
        self.finite = tail_expr is None
        self._head, self._cutoff = head, cutoff
        self._dmemo: dict = {}
        if cutoff > MAX_DIRECT:
            raise SeriesError(f"the eventual form starts at t={cutoff}, too far to sum term by term")
        if not self.finite:
            x = sympy.Symbol("x", positive=True)
            # xreplace rebuilds each node that holds t with evaluation, as subs does here (no class of a bias
            # form substitutes a symbol its own way: Add, Mul, Pow, exp hand it to that rebuild), without its search
            b = sympy.exp(sympy.sympify(tail_expr).xreplace({t: x}))
            self._b = weight_function(b, x)
            self._jet = compile_jet(b, x)
        with mpmath.workdps(DPS):
            self.terms = []
            self.tail0, self.total_err = mpmath.mpf(0), mpmath.mpf(0)
            sizes = [cutoff] if self.finite else sorted({max(cutoff, n) for n in N_DIRECT})
            for size in sizes:
                self._extend(head, cutoff, size)
                if self.finite:
                    break
                self._check_agreement(head, cutoff)
                try:  # B to ~14 digits first; refined (quadrature) only when a decision needs it
                    self.tail0, self.total_err = self._em_tail(
                        mpmath.mpf(size), abs_tol=pow10(-14) * self._suffix[0], full_em=True
                    )
                    break
                except SeriesError:
                    if size == sizes[-1]:
                        raise
            self.total = self._suffix[0] + self.tail0
        if not self.total > 0:
            raise SeriesError("the series sums to 0")

    def refine(self) -> None:
        """Recompute B at the full working precision (more exact terms if Euler-Maclaurin needs them)."""
        if self.finite or self.total_err == 0:
            return
        with mpmath.workdps(DPS):
            goal = pow10(-(DPS - 8)) * self.total
            for size in sorted({self.n0, *N_DIRECT}):
                if size < self.n0:
                    continue
                self._extend(self._head, self._cutoff, size)
                self.tail0, self.total_err = self._em_tail(mpmath.mpf(size))
                self.total = self._suffix[0] + self.tail0
                if self.total_err <= goal:
                    break

    # ---- terms --------------------------------------------------------------
    def _extend(self, head, cutoff: int, n0: int) -> None:
        """Exact terms b_0 .. b_{n0-1} and their suffix sums."""
        last = None  # (r, b) of the previous exact term: a run of equal r (a window's zeros) takes one exp
        for k in range(len(self.terms), n0):
            r = term_at(head, k) if (self.finite or k < cutoff) else None
            if r is None or last is None or not r == last[0]:
                last = (r, self._checked(k, r))
            self.terms.append(last[1])
        self.n0 = n0
        suffix = [mpmath.mpf(0)] * (n0 + 1)
        for k in range(n0 - 1, -1, -1):
            suffix[k] = suffix[k + 1] + self.terms[k]
        self._suffix = suffix

    def _checked(self, k: int, r):
        """b_k = exp(r(k)) as a finite non-negative real, from ``r`` or from the tail form."""
        try:
            b = saturating_exp(r) if r is not None else self._b(mpmath.mpf(k))
        except (ZeroDivisionError, OverflowError):  # e.g. 1/log(n) at n = 1
            if r is None:  # the tail form fails here (a pole, or beyond mpmath's range): ask the scheme
                return self._checked(k, term_at(self._head, k))
            raise InfiniteTerm(f"b_t is infinite at t={k} (r = +oo there), so the sum is infinite") from None
        except (ValueError, TypeError) as e:
            raise NotReal(f"b_t cannot be evaluated at t={k}: {e}") from None
        if isinstance(b, mpmath.mpc) or mpmath.isnan(b):
            raise NotReal(f"b_t is not a real number at t={k}")
        if mpmath.isinf(b):
            if r is None or not mpmath.isinf(r):  # a finite r too large for exp (saturating_exp)
                raise SeriesError(f"b_t at t={k} is beyond every numeric range (r(t) > 2**{EXP_MAG})")
            raise InfiniteTerm(f"b_t is infinite at t={k} (r = +oo there), so the sum is infinite")
        return b

    def _check_agreement(self, head, cutoff: int) -> None:  # cheap: four evaluations
        """The symbolic tail must reproduce the scheme's numeric r(t) where it applies.

        (They may differ in the last bits: the symbolic form holds each float parameter
        as its shortest decimal, the numeric one as the binary value.)
        """
        if self.finite:
            return
        for k in sorted({cutoff, cutoff + 1, self.n0, 3 * self.n0 + 5}):  # n0 = cutoff + 1 is checked once
            a = saturating_exp(term_at(head, k))  # a term _extend took from the tail form is that value already
            b = self.terms[k] if cutoff <= k < len(self.terms) else self._checked(k, None)
            if abs(a - b) > pow10(-10) * max(abs(a), abs(b)):
                raise SeriesError(f"symbolic and numeric forms of r(t) disagree at t={k}: {a} vs {b}")

    def term(self, k: int):
        """b_k at the working precision."""
        return self.terms[k] if k < self.n0 else self._b(mpmath.mpf(k))

    # ---- tails --------------------------------------------------------------
    def _em_tail(self, J, abs_tol=None, rough: bool = False, full_em: bool = False):
        """(R(J), error bound) for real J >= n0 by Euler-Maclaurin.

        Without ``abs_tol`` the integral is good to the working precision; with it, to
        about ``abs_tol`` (integer decisions only need errors far below the margins
        they compare); ``rough`` skips the accuracy checks (Newton search); ``full_em``
        takes Bernoulli corrections down to the working precision even so (for B).
        """
        d = self._derivatives(J, 2 if rough else 3)  # b(J), b'(J), ...: more orders only if needed
        bJ = d[0]
        if bJ == 0:
            return mpmath.mpf(0), mpmath.mpf(0)
        integral, err = tail_integral(self._b, J, d, self.fast, abs_tol, rough)
        total = integral + bJ / 2
        tol = pow10(-(mpmath.mp.dps - 5)) * abs(total)
        good_enough = max(tol, abs_tol) if abs_tol is not None else tol
        prev = None
        for k in range(1, EM_TERMS + 1):
            if 2 * k - 1 >= len(d):
                if rough:
                    break
                d = self._derivatives(J, 2 * EM_TERMS - 1)
            corr = em_coefficient(k) * d[2 * k - 1]
            if prev is not None and abs(corr) > abs(prev):
                break  # the asymptotic series started to grow: stop at its smallest term
            total -= corr
            prev = corr
            if abs(corr) < (tol if full_em else good_enough * pow10(-3)):
                break
        em_err = abs(prev) if prev is not None else bJ
        if not rough and em_err > pow10(-8) * bJ and em_err > good_enough:
            raise SeriesError(
                f"Euler-Maclaurin tail not accurate at t={mpmath.nstr(J, 6)} "
                f"(b varies too fast for its derivatives to decay)"
            )
        return total, err + (em_err if em_err > tol else 0)

    def _derivatives(self, J, order: int) -> list:
        """b(J), b'(J), ..., b^(order)(J) by mpmath.diffs, remembered for the last few J."""
        d = self._dmemo.get(J)
        if d is None or len(d) <= order:
            if len(self._dmemo) > 16:
                self._dmemo.clear()
            d = self._dmemo[J] = self._differentiate(J, order)
        return d

    def _differentiate(self, J, order: int) -> list:
        """Taylor arithmetic on the tail's form where it applies (:mod:`extrap.theory.jets`), else mpmath.diffs."""
        jet = getattr(self, "_jet", None)
        if jet is not None:
            try:
                return jet(J, order)
            except (Unsupported, ZeroDivisionError, ValueError, OverflowError):
                pass
        return list(mpmath.diffs(self._b, J, order))

    def tail(self, j):
        """R(j) = sum_{t>=j} b_t for an integer j >= 0 (full precision)."""
        if j <= self.n0:
            return self._suffix[int(j)] + self.tail0
        if self.finite:
            return mpmath.mpf(0)
        return self._em_tail(mpmath.mpf(j))[0]

    # ---- receptive field ----------------------------------------------------
    def trf(self, eps) -> int:
        """n(eps) = min{ j : R(j) < B eps } (000 Eq. 22), an exact integer."""
        with mpmath.workdps(DPS):
            eps_mp = checked_eps(eps)
            for strict in (False, True):
                n, lo, hi, err = self._crossing(eps_mp, strict)
                # both sides of the crossing must be clear of every error involved
                margin = min(abs(m) for m in (lo, hi) if m is not None)
                if margin > 10 * (err + eps_mp * self.total_err) or strict and self.total_err == 0:
                    return n
                self.refine()
            raise SeriesError(f"the tail sum ties with B*eps at t={n} within the working precision")

    def _crossing(self, eps_mp, strict: bool):
        """(n, R(n-1) - target, target - R(n), error of those R) with target = B eps."""
        target = self.total * eps_mp
        if not (self.finite or less(self.tail0, target)):
            try:
                return self._settle(self._search(target), target, strict)
            except SeriesError:
                # Euler-Maclaurin cannot resolve the crossing (b changes too fast there):
                # sum exactly past it if that is affordable, else give up
                if not self._grow(target):
                    raise
                target = self.total * eps_mp
        n = self._trf_direct(target)
        lo = self.tail(n - 1) - target if n > 0 else None
        return n, lo, target - self.tail(n), self.total_err

    def _grow(self, target) -> bool:
        """Extend the exact head (x8 at a time) until its tail drops below ``target``."""
        while not less(self.tail0, target):
            size = self.n0 * 8
            if size > MAX_DIRECT:
                return False
            self._extend(self._head, self._cutoff, size)
            self.tail0, self.total_err = self._em_tail(
                mpmath.mpf(size), abs_tol=pow10(-14) * self._suffix[0], full_em=True
            )
            self.total = self._suffix[0] + self.tail0
        return True

    def _trf_direct(self, target) -> int:
        """The crossing lies in the exactly summed head: binary search on suffix sums."""
        lo, hi = 0, self.n0  # R(lo) >= target (R(0) = B), R(hi) < target
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if less(self.tail(mid), target):
                hi = mid
            else:
                lo = mid
        return hi

    def _newton(self, j, R, target):
        """Predict the crossing R(x) = target from the local shape of the tail at j.

        Exponential-like tails: Newton in j on log R (exact for geometric tails).
        Power-like tails: b ~ C (x+c)^-p fitted from b, b', b'' at j, so that
        R(x) ~ R(j) ((x+c)/(j+c))^-(p-1), solved for x (exact for shifted powers).
        Returns (prediction, log(R/target)).
        """
        g = mpmath.log(R / target)
        b, db, ddb = self._derivatives(j, 2)[:3]
        ratio = R / b  # = -1 / (d log R / dj), as dR/dj ~ -b(j)
        if self.fast:
            return j + g * ratio, g
        l1, l2 = db / b, ddb / b - (db / b) ** 2
        shift = -l1 / l2 if l2 > 0 and -l1 / l2 > 0 else j  # x + c at j (plain power: j)
        decay = shift / ratio  # the tail's exponent p - 1
        return shift * mpmath.exp(g / decay) - (shift - j), g

    def _search(self, target) -> int:
        """Safeguarded Newton with cheap tail estimates; returns an integer near the crossing."""
        j = mpmath.mpf(self.n0)
        R = self.tail0
        lo, hi = j, None  # R(lo) >= target > R(hi)
        for _ in range(100):
            nxt, g = self._newton(j, R, target)
            if g >= 0:
                lo = max(lo, j)
            else:
                hi = j if hi is None else min(hi, j)
            if hi is None:
                if nxt > TRF_MAX * 10**30:  # even a poor local model cannot be that far off
                    raise SeriesError(f"TRF exceeds {TRF_MAX:.0e}")
                nxt = min(max(nxt, j + 1), j * 10**6)  # still bracketing: bounded steps up
            elif not lo < nxt < hi:
                nxt = (lo + hi) / 2 if self.fast else mpmath.sqrt(lo * hi)
            if nxt > TRF_MAX:
                raise SeriesError(f"TRF exceeds {TRF_MAX:.0e}")
            if abs(nxt - j) < 1 or (hi is not None and hi - lo <= 1):
                return int(mpmath.ceil(nxt))
            j = nxt
            R = self._em_tail(j, rough=True)[0]
        raise SeriesError("the receptive-field search did not converge")

    def _settle(self, n: int, target, strict: bool = False):
        """Move an integer guess to the exact min{ j : R(j) < target }.

        Returns (n, R(n-1) - target, target - R(n), error bound of those R values).
        """
        for _ in range(50):
            n = max(n, self.n0)
            if n > TRF_MAX:
                raise SeriesError(f"TRF exceeds {TRF_MAX:.0e}")
            tol = None if strict else pow10(-6) * self.term(n)  # far below the step b_n
            R, err = self._em_tail(mpmath.mpf(n), abs_tol=tol)
            nxt = int(mpmath.ceil(self._newton(mpmath.mpf(n), R, target)[0]))
            if abs(nxt - n) <= 64:
                break
            n = nxt  # the cheap search landed too far away: another accurate Newton step
        else:
            raise SeriesError("integer search for the TRF did not settle")
        for _ in range(1000):  # walk: R(n-1) = R(n) + b_{n-1}, R(n+1) = R(n) - b_n
            if less(R, target):
                prev = R + self.term(n - 1) if n > 0 else None
                if prev is None or not less(prev, target):
                    return n, (None if prev is None else prev - target), target - R, err
                n, R = n - 1, prev
            else:
                R = R - self.term(n)
                n += 1
        raise SeriesError("integer search for the TRF did not settle")


def less(a, b) -> bool:
    """a < b, counting values equal to within the working precision as equal (Eq. 22 is strict)."""
    return a < b - abs(b) * pow10(-(mpmath.mp.dps - 8))


__all__ = [
    "DPS",
    "EPS_MIN",
    "TRF_MAX",
    "InfiniteTerm",
    "NotReal",
    "Series",
    "SeriesError",
    "checked_eps",
    "less",
    "term_at",
]
