"""Which models learned: claims about trained models are judged only on those (extrap.results.LearningGate).

A model that did not learn has a flat perplexity curve whatever its PE, so its verdict under
000 Definition 0.1 says nothing; a claim whose models all failed the gate is "not tested",
with the numbers, never reproduced or contradicted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extrap.report.values import fmt
from extrap.results import StudyResults

NOT_TESTED = "not tested"
# Retrieval claims are judged only on models that retrieve this often where they were trained (each experiment
# says where: at L_tr without alignment, or in the nearest distance bin); below it a model did not learn the task.
MIN_TRAIN_ACC = 0.2


@dataclass
class Gate:
    """The PEs a claim needs, split by whether their models learned."""

    learned: list[str] = field(default_factory=list)
    untrained: list[str] = field(default_factory=list)  # did not learn
    unknown: list[str] = field(default_factory=list)  # not recorded

    @property
    def left_out(self) -> list[str]:
        return self.untrained + self.unknown


def split(results: StudyResults, pes: list[str]) -> Gate:
    gate = Gate()
    for pe in pes:
        ok = results.learned(pe)
        (gate.learned if ok else gate.untrained if ok is False else gate.unknown).append(pe)
    return gate


def losses(results: StudyResults, pes: list[str]) -> str:
    """ "alibi 4.03, type1 4.06" : loss at L_tr of each PE (nats per token)."""
    loss = results.learning.loss if results.learning else {}
    return ", ".join(f"{pe} {fmt(loss.get(pe), 3)}" for pe in pes)


def unknown_reason(results: StudyResults, pes: list[str]) -> str:
    g = results.learning
    if g is None:
        return "results.json records no unigram entropy of the training tokens nor losses at L_tr (an earlier extrap)"
    if g.threshold is None:
        return f"no unigram entropy of the training tokens: {g.note or 'not recorded'}"
    return f"no loss at L_tr recorded for {', '.join(pes)}"


def explain(results: StudyResults, gate: Gate) -> str:
    """Why the PEs left out of a claim were left out, with the numbers."""
    parts = []
    g = results.learning
    if gate.untrained:
        parts.append(
            f"the models did not learn (loss at L_tr in nats per token, {g.protocol}: {losses(results, gate.untrained)}"
            f" against a unigram entropy of {fmt(g.unigram_entropy, 3)}; a model counts as trained at a loss of at "
            f"most {fmt(g.max_fraction, 3)} × {fmt(g.unigram_entropy, 3)} = {fmt(g.threshold, 3)})"
        )
    if gate.unknown:
        why = unknown_reason(results, gate.unknown)
        parts.append(f"whether the models of {', '.join(gate.unknown)} learned is unknown ({why})")
    return "; ".join(parts)


def not_tested(results: StudyResults, gate: Gate) -> str:
    """The evidence of a claim none of whose models could be judged."""
    return f"{NOT_TESTED}: {explain(results, gate)}"


def left_out_note(results: StudyResults, gate: Gate) -> str:
    """What a decided claim appends about the PEs it left out ("" when none)."""
    if not gate.left_out:
        return ""
    return f". Left out, {NOT_TESTED}: {', '.join(gate.left_out)}: {explain(results, gate)}"
