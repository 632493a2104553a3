"""The claims of ``extrap study --experiment finetune-extension`` (LCEG's three findings) and its goal line.

Judged only when the base learned (the learning gate, :mod:`extrap.report.gate`); never forced:

* (a) across the exact methods, PPL at 4 × L_tr and passkey accuracy at 4 × L_tr have a negative rank
  correlation (Spearman's ρ), with a 95% bootstrap interval over the methods (2000 resamples, seed 0): reproduced
  when the interval lies below 0;
* (b) the best approximate method retrieves below the median exact method at 4 × L_tr, beyond noise: the gap
  exceeds 1.96 × the standard error of the difference of the two accuracies (binomial, n examples each);
* (c) each exact method keeps ≥ 0.9 × its L_tr passkey accuracy at 4 × L_tr, and most (more than half) fall
  below 0.5 × of it at 16 × L_tr.

Goal line: does any method retrieve at 16 × L_tr with ≥ 0.9 × its L_tr accuracy, after fine-tuning on ≤ 10% of
the base's tokens at ≤ 4 × L_tr?
"""

from __future__ import annotations

import math
import random
import statistics

from extrap.erf.runs import spearman
from extrap.experiments.finetune_extension.results import FtResult, block
from extrap.report.gate import not_tested
from extrap.report.gate import split as gate_split
from extrap.report.values import fmt
from extrap.results import Claim, StudyResults

A = "(a) Across the exact methods, PPL at 4 × L_tr and passkey accuracy at 4 × L_tr have a negative rank correlation"
B = "(b) The best approximate method retrieves below the median exact method at 4 × L_tr, beyond noise"
C = "(c) Each exact method keeps ≥ 0.9 × its L_tr passkey accuracy at 4 × L_tr, and most fall below 0.5 × at 16 × L_tr"
SOURCE = "LCEG, Lu et al. 2024 (A Controlled Study on Long Context Extension and Generalization in LLMs)"
KEEP, FALL, GOAL = 0.9, 0.5, 0.9
BUDGET, STRETCH = 0.1, 4  # the goal's fine-tune: at most 10% of the base's tokens, at most 4 × L_tr


def gated(results: StudyResults, name: str) -> Claim | None:
    b = block(results)
    gate = gate_split(results, [b.pe] if b.pe else [])
    return None if gate.learned else Claim(name, None, not_tested(results, gate), SOURCE, untested=True)


def exact(results: StudyResults) -> list[FtResult]:
    return [m for m in block(results).methods.values() if not m.approximate]


def at(results: StudyResults, k: int) -> int | None:
    b = block(results)
    L = None if b.train_length is None else k * b.train_length
    return L if L in b.lengths else None


def bootstrap(x: list[float], y: list[float], reps: int = 2000) -> tuple[float, float] | None:
    """95% percentile interval of Spearman's ρ over resampled methods (resamples without an order skipped)."""
    rng, n, rhos = random.Random(0), len(x), []
    for _ in range(reps):
        idx = [rng.randrange(n) for _ in range(n)]
        r = spearman([x[i] for i in idx], [y[i] for i in idx])
        if r is not None:
            rhos.append(r)
    if len(rhos) < reps // 2:
        return None
    rhos.sort()
    return rhos[int(0.025 * len(rhos))], rhos[int(0.975 * len(rhos)) - 1]


def rank_pairs(results: StudyResults, L: int | None) -> tuple[list[tuple[float, float]], float | None]:
    """(PPL, passkey accuracy) of every exact method measured at ``L`` and their Spearman ρ (None: < 3 or no order)."""
    pairs = [(m.ppl_at(L), m.passkey_at(L)) for m in exact(results)] if L else []
    pairs = [(p, a) for p, a in pairs if p is not None and a is not None]
    return pairs, spearman([p for p, _ in pairs], [a for _, a in pairs]) if len(pairs) >= 3 else None


def rho_with_interval(pairs: list[tuple[float, float]], rho: float, L: int) -> tuple[bool, str]:
    """(the bootstrap interval lies below 0, "ρ = ... over n exact methods at L, 95% bootstrap [lo, hi]")."""
    ci = bootstrap([p for p, _ in pairs], [a for _, a in pairs])
    where = "–" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"
    ok = ci is not None and ci[1] < 0
    return ok, f"ρ = {rho:.2f} over {len(pairs)} exact methods at {L}, 95% bootstrap {where}"


def claim_a(results: StudyResults) -> Claim:
    """Judged at 4 × L_tr as stated; ρ at 8 × L_tr is added as context (where passkey no longer saturates)."""
    L = at(results, 4)
    pairs, rho = rank_pairs(results, L)
    if rho is None:
        return Claim(A, None, f"{len(pairs)} exact methods measured at 4 × L_tr with an order in both", SOURCE)
    stop = gated(results, A)
    if stop is not None:
        return stop
    ok, said = rho_with_interval(pairs, rho, L)
    L8 = at(results, 8)
    pairs8, rho8 = rank_pairs(results, L8)
    if rho8 is not None:
        said += f" (not judged, at 8 × L_tr: {rho_with_interval(pairs8, rho8, L8)[1]})"
    return Claim(A, ok, f"Spearman {said}", SOURCE)


def claim_b(results: StudyResults) -> Claim:
    L, b = at(results, 4), block(results)
    approx = [m for m in b.methods.values() if m.approximate and L and m.passkey_at(L) is not None]
    ex = [m.passkey_at(L) for m in exact(results) if L and m.passkey_at(L) is not None]
    if not approx or not ex:
        return Claim(B, None, "approximate and exact methods were not both measured at 4 × L_tr", SOURCE)
    stop = gated(results, B)
    if stop is not None:
        return stop
    best = max(approx, key=lambda m: m.passkey_at(L))
    a, med, n = best.passkey_at(L), statistics.median(ex), b.passkey_n or 1
    se = math.sqrt(a * (1 - a) / n + med * (1 - med) / n)
    ok = med - a > 1.96 * se
    ev = f"best approximate {best.name} {a:.2f} vs median exact {med:.2f} at {L}; 1.96 × se = {1.96 * se:.2f} (n = {n})"
    return Claim(B, ok, ev, SOURCE)


def claim_c(results: StudyResults) -> Claim:
    L4, L16, L1 = at(results, 4), at(results, 16), at(results, 1)
    ms = [m for m in exact(results) if m.passkey_at(L1)]
    if not (L4 and L16) or not ms:
        return Claim(C, None, "no exact method measured at L_tr (with retrieval), 4 × and 16 × L_tr", SOURCE)
    stop = gated(results, C)
    if stop is not None:
        return stop
    keep = [m for m in ms if (m.passkey_at(L4) or 0) >= KEEP * m.passkey_at(L1)]
    fall = [m for m in ms if (m.passkey_at(L16) or 0) < FALL * m.passkey_at(L1)]
    ok = len(keep) == len(ms) and len(fall) > len(ms) / 2
    lost = [m.name for m in ms if m not in keep]
    ev = (f"{len(keep)}/{len(ms)} keep ≥ {KEEP} × at {L4}" + (f" (not: {', '.join(lost)})" if lost else "")
          + f"; {len(fall)}/{len(ms)} fall below {FALL} × at {L16}")  # fmt: skip
    return Claim(C, ok, ev, SOURCE)


def claims(results: StudyResults) -> list[Claim]:
    return [claim_a(results), claim_b(results), claim_c(results)]


def goal_line(results: StudyResults) -> str:
    """Goal: any method at 16 × L_tr with ≥ 0.9 × its L_tr accuracy (fine-tuned on ≤ 10% at ≤ 4 × L_tr)."""
    b, L1, L16 = block(results), at(results, 1), at(results, 16)
    head = "Goal (a method retrieving at 16 × L_tr with ≥ 0.9 × its L_tr passkey accuracy, fine-tuned on ≤ 10% of "
    head += f"the base's tokens at ≤ 4 × L_tr; here {fmt(b.budget)} at {fmt(b.finetune_length)})"
    ms = [m for m in b.methods.values() if L16 and m.passkey_at(L1) and m.passkey_at(L16) is not None]
    if not ms:
        return f"{head}: not measured (no method with retrieval at L_tr measured at 16 × L_tr)"
    best = max(ms, key=lambda m: m.passkey_at(L16) / m.passkey_at(L1))
    acc, ref = best.passkey_at(L16), best.passkey_at(L1)
    said = goal_verdict(acc, ref, b.budget, b.finetune_length, b.train_length)
    return f"{head}: best {best.name} {acc:.2f} vs {GOAL} × {ref:.2f} = {GOAL * ref:.2f}: {said}"


def goal_verdict(acc: float, ref: float, budget: float | None, finetune_length: int | None, L: int | None) -> str:
    """'met' only when the accuracy holds *and* the fine-tune kept within the goal's budget and length."""
    if acc < GOAL * ref:
        return "not met"
    within = budget is not None and budget <= BUDGET and finetune_length is not None and L is not None
    if within and finetune_length <= STRETCH * L:
        return "met"
    used = f"{fmt(budget)} of the base's tokens at {fmt(finetune_length)}"
    return f"the accuracy holds, but not met: fine-tuned on {used} (the goal allows {BUDGET:g} at ≤ {STRETCH} × L_tr)"
