"""The training-runs table and the learning gate's sentence, which the page shell shows for every experiment."""

from __future__ import annotations

from extrap.report.values import fmt
from extrap.report.view import Table, table
from extrap.results import StudyResults

LEARNED_WORDS = {True: "yes", False: "no: did not learn", None: "unknown"}


def runs_table(results: StudyResults) -> Table | None:
    if not results.runs:
        return None
    gate = results.learning
    headers = ["PE", "final training loss"]
    if gate is not None:
        headers += [f"loss at L_tr ({gate.protocol or '–'})", "learned"]
    headers += ["seconds", "parameters", "run folder"]
    body = []
    for pe, r in results.runs.items():
        learned = [] if gate is None else [gate.loss.get(pe), LEARNED_WORDS[gate.learned(pe)]]
        body.append([pe, r.final_loss, *learned, r.seconds, r.params, r.run_dir])
    return table(headers, body)


def learning_text(results: StudyResults, gated: bool = True) -> str | None:
    """The gate's numbers in one sentence (None for results that do not record it); ``gated``: the experiment
    records the gate, so results without it come from an earlier extrap and the page says so."""
    g = results.learning
    if g is None:
        if not gated or not results.runs:
            return None
        return (
            "These results record no unigram entropy of the training tokens (an earlier extrap): whether the "
            "models learned is unknown, and the claims about trained models are not tested."
        )
    if g.threshold is None:
        return f"Whether the models learned is unknown: {g.note or 'no unigram entropy recorded'}."
    return (
        f"Losses are in nats per token. Unigram entropy of the training tokens: {fmt(g.unigram_entropy, 4)} nats per "
        f"token ({fmt(g.unigram_tokens)} tokens), the loss of a model that predicts token frequencies only. A model "
        f"counts as trained when its {g.protocol} loss at L_tr is at most {fmt(g.max_fraction, 3)} × "
        f"{fmt(g.unigram_entropy, 4)} = {fmt(g.threshold, 4)}; the claims about trained models are judged on those "
        "only."
    )
