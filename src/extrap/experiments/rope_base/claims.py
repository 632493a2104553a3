"""The claims of ``extrap study --experiment rope-base``.

Claims (judged only on models that learned, :mod:`.gate`; never forced):

* "From-scratch RoPE breaks before L_tr·β^(2/d)" (Liu et al. 2024): on plain RoPE models, the measured
  break (the first length whose |Δppl|/ppl exceeds δ beyond its noise) must come no later than the first
  measured length at or past the bound.  ✘ when a model has not broken there; a bound past the longest
  length cannot be checked.
* "Retrieval fails beyond Men's first negative distance" (Men et al. 2024): on rotary models that retrieve
  in their nearest distance bin (accuracy >= MIN_TRAIN_ACC), every distance bin lying wholly beyond the
  first m with B(m) < 0 must hold accuracy below fall_fraction × the nearest bin's.  ✘ when a model still
  retrieves there; a model whose first negative distance lies past the measured distances cannot be checked.
"""

from __future__ import annotations

from extrap.experiments.rope_base.results import RopeBaseModel, block
from extrap.report.gate import MIN_TRAIN_ACC, left_out_note, not_tested
from extrap.report.gate import split as gate_split
from extrap.report.values import fmt
from extrap.results import Claim, StudyResults

LIU = "From-scratch RoPE breaks before L_tr·β^(2/d)"
MEN = "Retrieval fails beyond Men's first negative distance"
LIU_SOURCE = "Liu et al. 2024 (arXiv 2310.05209), trained from scratch"
MEN_SOURCE = "Men et al. 2024 (arXiv 2405.14591), B(m) = Σ cos(mθ_i)"


def first_at_or_past(lengths, bound: float) -> int | None:
    """The first measured length >= ``bound`` (None: the bound lies past every length)."""
    return next((L for L in sorted(lengths) if L >= bound), None)


def liu_verdict(m: RopeBaseModel, lengths) -> tuple[bool | None, str]:
    """(agrees, evidence) for one model; agrees None when its bound lies past the measured lengths."""
    bound = m.prediction.scratch_bound
    at = first_at_or_past(lengths, bound)
    said = f"{m.pe}: break {fmt(m.measured_break) if m.measured_break else 'none'}, bound {bound:.0f}"
    if at is None:
        return None, said + " (past the longest length: not checked)"
    ok = m.measured_break is not None and m.measured_break <= at
    return ok, said + f" (first length at or past it: {at})" + ("" if ok else " ✘")


def decide(verdicts: list[bool | None]) -> bool | None:
    """False on one counterexample, True when every checked model agrees, None when none was checked."""
    if any(v is False for v in verdicts):
        return False
    return True if any(v is True for v in verdicts) else None


def claim_liu(results: StudyResults) -> Claim:
    b = block(results)
    plain = [pe for pe, m in b.models.items() if m.prediction.plain and m.prediction.scratch_bound is not None]
    if not plain:
        return Claim(LIU, None, "no plain RoPE model was measured", LIU_SOURCE)
    gate = gate_split(results, plain)
    if not gate.learned:
        return Claim(LIU, None, not_tested(results, gate), LIU_SOURCE, untested=True)
    pairs = [liu_verdict(b.models[pe], b.lengths) for pe in gate.learned]
    how = f"; break: the first length with |Δppl|/ppl > δ = {fmt(b.delta)} beyond its 95% interval"
    ev = "; ".join(e for _, e in pairs) + how + left_out_note(results, gate)
    return Claim(LIU, decide([v for v, _ in pairs]), ev, LIU_SOURCE)


def men_verdict(m: RopeBaseModel, fraction: float) -> tuple[bool | None, str]:
    """(agrees, evidence) for one model that retrieves; agrees None when no bin lies wholly past m*."""
    first, ref = m.prediction.first_negative, m.reference_accuracy
    beyond = [x for x in m.by_distance if x.n and x.lo >= first]
    said = f"{m.pe}: B(m) < 0 first at m = {first}"
    if not beyond:
        return None, said + " (no distance measured wholly past it: not checked)"
    limit = fraction * ref
    ok = all(x.accuracy < limit for x in beyond)
    accs = ", ".join(f"({x.lo}, {x.hi}] {x.accuracy:.2f}" for x in beyond)
    return ok, said + f"; accuracy past it {accs} against {fraction:g} × {ref:.2f}" + ("" if ok else " ✘")


def claim_men(results: StudyResults) -> Claim:
    b = block(results)
    rotary = [pe for pe, m in b.models.items() if m.prediction.first_negative is not None]
    if not rotary:
        return Claim(MEN, None, "no measured model has a distance where B(m) turns negative", MEN_SOURCE)
    gate = gate_split(results, rotary)
    if not gate.learned:
        return Claim(MEN, None, not_tested(results, gate), MEN_SOURCE, untested=True)
    retrieving = [pe for pe in gate.learned if (b.models[pe].reference_accuracy or 0) >= MIN_TRAIN_ACC]
    skipped = [pe for pe in gate.learned if pe not in retrieving]
    why = f"they do not retrieve at their nearest distance (accuracy < {MIN_TRAIN_ACC}): {', '.join(skipped)}"
    if not retrieving:
        return Claim(MEN, None, f"not tested: {why}" + left_out_note(results, gate), MEN_SOURCE, untested=True)
    note = f". Left out, {why}" if skipped else ""
    pairs = [men_verdict(b.models[pe], b.fall_fraction or 0.5) for pe in retrieving]
    ev = "; ".join(e for _, e in pairs) + note + left_out_note(results, gate)
    return Claim(MEN, decide([v for v, _ in pairs]), ev, MEN_SOURCE)


def claims(results: StudyResults) -> list[Claim]:
    return [claim_liu(results), claim_men(results)]
