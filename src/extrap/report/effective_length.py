"""The report of ``extrap study --experiment effective-length``: its claims, its ranking and its README table.

A (PE, task) pair is judged only when the model learned the task above chance at L_tr (its
:class:`~extrap.results.effective_length.TaskGate`); a pair that did not is shown as not learned, and is
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

from extrap.report.values import fmt
from extrap.report.view import Cell, table
from extrap.results import Claim, StudyResults
from extrap.results.effective_length import EffectiveLengthBlock, EffectiveLengthModel

KEEP = "PEs with a finite TRF keep an effective length beyond L_tr"
OUTLAST = "PEs with a finite TRF retrieve at least as far as those without one"
SOURCE = "000 (convergent bias, finite TRF) on RULER-style retrieval (Hsieh et al. 2024; relative form, NoLiMa)"


def block(results: StudyResults) -> EffectiveLengthBlock:
    return results.block if isinstance(results.block, EffectiveLengthBlock) else EffectiveLengthBlock()


def learned_pairs(b: EffectiveLengthBlock) -> list[tuple[EffectiveLengthModel, str]]:
    """(model, task) for every task each model learned above chance, in the study's order."""
    return [(m, t) for m in b.models.values() for t in b.tasks if m.learned(t)]


def not_learned_note(b: EffectiveLengthBlock) -> str:
    left = [f"{m.pe}/{t}" for m in b.models.values() for t in b.tasks if not m.learned(t)]
    return f". Not learned above chance, so not judged: {', '.join(left)}" if left else ""


def eff_length(m: EffectiveLengthModel, task: str) -> int | None:
    e = m.effective(task)
    return e.length if e is not None else None


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


def effective_length_claims(results: StudyResults) -> list[Claim]:
    return [claim_keep(results), claim_outlast(results)]


def threshold_text(b: EffectiveLengthBlock) -> str:
    form, _, ratio = (b.threshold or "rel:0.85").partition(":")
    return f"{ratio} × the score at L_tr" if form == "rel" else f"a score of {ratio}"


def trf_text(m: EffectiveLengthModel) -> str:
    return str(m.trf.value) if m.trf.finite else m.trf.status


def task_cell(m: EffectiveLengthModel, task: str, rank: int | None, train_length: int | None, lengths=()) -> str | Cell:
    g = m.gate(task)
    if g is None or g.learned is None:
        return "–"
    score = f"score at L_tr {fmt(g.score, 3)}, chance {fmt(g.chance, 3)}, learned above {fmt(g.bar, 3)}"
    if not g.learned:
        return Cell("not learned", score)
    eff, top = eff_length(m, task), max(lengths, default=None)
    mult = f" ({eff / train_length:g}×)" if eff is not None and train_length else ""
    at_least = "≥ " if eff is not None and eff == top else ""  # held at every measured length: a lower bound
    return Cell(f"{at_least}{fmt(eff) if eff is not None else 'none'}{mult}" + (f" #{rank}" if rank else ""), score)


def task_ranks(b: EffectiveLengthBlock, task: str) -> dict[str, int]:
    """Rank (1 = longest) of every PE that learned ``task``; ties share a rank."""
    effs = {m.pe: eff_length(m, task) or 0 for m in b.models.values() if m.learned(task)}
    return {pe: 1 + sum(v > e for v in effs.values()) for pe, e in effs.items()}


def ranking_rows(results: StudyResults) -> tuple[list[str], list[list]]:
    """PEs by effective length (each task's rank among the PEs that learned it) beside their TRF, longest first."""
    b = block(results)
    ranks = {t: task_ranks(b, t) for t in b.tasks}

    def key(m: EffectiveLengthModel):
        learned = [t for t in b.tasks if m.learned(t)]
        return (-len(learned), sum(ranks[t][m.pe] for t in learned) / max(1, len(learned)))

    headers = ["PE", f"TRF (ε = {fmt(next((m.trf.eps for m in b.models.values()), None))})"]
    headers += [f"{t}: effective length" for t in b.tasks]
    rows = []
    for m in sorted(b.models.values(), key=key):
        cells = [task_cell(m, t, ranks[t].get(m.pe), b.train_length, b.lengths) for t in b.tasks]
        trf = Cell(trf_text(m), m.trf.reason or f"{m.trf.params or 'initial'} parameters")
        rows.append([m.pe, trf, *cells])
    return headers, rows


def ppl_table(results: StudyResults):
    """Perplexity and LongPPL at every length (hover: key tokens)."""
    b = block(results)
    body = []
    for pe, m in b.models.items():
        cells = []
        for L in b.lengths:
            r = m.longppl.result_at(L) if m.longppl is not None else None
            if r is None or r.error:
                cells.append(Cell("–", r.error) if r is not None else "–")
                continue
            key = f"{r.key_tokens} key tokens of {r.tokens}"
            cells.append(Cell(f"{fmt(r.ppl, 4)} / {fmt(r.longppl, 4) if r.longppl is not None else '–'}", key))
        body.append([pe] + cells)
    return table(["PE: PPL / LongPPL"] + [str(L) for L in b.lengths], body)


def score_table(results: StudyResults, task: str):
    """One task's mean score per length, one row per PE."""
    b = block(results)
    body = []
    for pe, m in b.models.items():
        t = next((x for x in m.ruler.tasks if x.task == task), None) if m.ruler is not None else None
        by = {r.length: r.score for r in t.results} if t is not None else {}
        body.append([pe + ("" if m.learned(task) else " (not learned)")] + [by.get(L) for L in b.lengths])
    return table([f"{task}: score"] + [str(L) for L in b.lengths], body)


def effective_length_missing(results: StudyResults) -> list[str]:
    b = block(results)
    if not b.models:
        return ["no effective-length results"]
    lack = [pe for pe in results.pes if pe not in b.models]
    return [f"no effective-length result for {', '.join(lack)}"] if lack else []


def markdown_table(results: StudyResults) -> list[str]:
    """The ranking as a Markdown table (the README's effective-length section)."""
    headers, rows = ranking_rows(results)
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(c.text if isinstance(c, Cell) else str(c) for c in row) + " |" for row in rows]
    return out
