"""The claims of ``extrap study --experiment effective-length``.

A (PE, task) pair is judged only when the model learned the task above chance at L_tr (its
:class:`~.results.TaskGate`); a pair that did not is shown as not learned, and is
neither ranked nor counted for or against a claim.  Claims (never forced; "not tested" when no pair can
judge them):

* "PEs with a finite TRF keep an effective length beyond L_tr" (000: a convergent bias extrapolates; here on
  retrieval, RULER's effective length in NoLiMa's relative form): every learned pair of a PE whose TRF at
  ε = 1e-3 is finite must hold its score at or above 0.85 × the score at L_tr up to at least the next measured
  length past L_tr.  ✘ on one pair that does not.
* "PEs with a finite TRF retrieve at least as far as those without one": on every task where both kinds have
  a learned PE, the shortest effective length of the finite-TRF PEs is at least the longest of the others
  (RoPE: not a Toeplitz bias; NoPE: its series diverges).  ✘ on one task where it is not.
"""

from __future__ import annotations

from extrap.experiments.effective_length.results import EffectiveLengthBlock, EffectiveLengthModel, block
from extrap.experiments.effective_length.tables import eff_length, threshold_text
from extrap.report.values import fmt
from extrap.results import Claim, StudyResults

KEEP = "PEs with a finite TRF keep an effective length beyond L_tr"
OUTLAST = "PEs with a finite TRF retrieve at least as far as those without one"
SOURCE = "000 (convergent bias, finite TRF) on RULER-style retrieval (Hsieh et al. 2024; relative form, NoLiMa)"


def learned_pairs(b: EffectiveLengthBlock) -> list[tuple[EffectiveLengthModel, str]]:
    """(model, task) for every task each model learned above chance, in the study's order."""
    return [(m, t) for m in b.models.values() for t in b.tasks if m.learned(t)]


def not_learned_note(b: EffectiveLengthBlock) -> str:
    left = [f"{m.pe}/{t}" for m in b.models.values() for t in b.tasks if not m.learned(t)]
    return f". Not learned above chance, so not judged: {', '.join(left)}" if left else ""


def claim_keep(results: StudyResults) -> Claim:
    b = block(results)
    beyond = [L for L in b.lengths if b.train_length is not None and L > b.train_length]
    if not beyond:
        return Claim(KEEP, None, "no length beyond L_tr was measured", SOURCE)
    finite = [(m, t) for m, t in learned_pairs(b) if m.trf.finite]
    if not finite:
        return Claim(
            KEEP, None, "not tested: no finite-TRF PE learned a task" + not_learned_note(b), SOURCE, untested=True
        )
    said, ok = [], True
    for m, t in finite:
        eff = eff_length(m, t)
        holds = eff is not None and eff >= min(beyond)
        ok &= holds
        said.append(
            f"{m.pe}/{t} (TRF {m.trf.value}): {fmt(eff) if eff is not None else 'none'}" + ("" if holds else " ✘")
        )
    cut = f"; effective length: the longest length up to which the score stays >= {threshold_text(b)}"
    return Claim(KEEP, ok, "; ".join(said) + f" (L_tr = {b.train_length})" + cut + not_learned_note(b), SOURCE)


def claim_outlast(results: StudyResults) -> Claim:
    b = block(results)
    pairs = learned_pairs(b)
    said, verdicts = [], []
    for t in b.tasks:
        fin = [(m.pe, eff_length(m, t) or 0) for m, task in pairs if task == t and m.trf.finite]
        other = [(m.pe, eff_length(m, t) or 0) for m, task in pairs if task == t and not m.trf.finite]
        if not fin or not other:
            continue
        lo, hi = min(fin, key=lambda x: x[1]), max(other, key=lambda x: x[1])
        verdicts.append(lo[1] >= hi[1])
        said.append(
            f"{t}: shortest finite-TRF {lo[0]} {lo[1]}, longest other {hi[0]} {hi[1]}" + ("" if verdicts[-1] else " ✘")
        )
    if not verdicts:
        why = "not tested: no task was learned by both a finite-TRF PE and one without"
        return Claim(OUTLAST, None, why + not_learned_note(b), SOURCE, untested=True)
    return Claim(OUTLAST, all(verdicts), "; ".join(said) + not_learned_note(b), SOURCE)


def claims(results: StudyResults) -> list[Claim]:
    return [claim_keep(results), claim_outlast(results)]
