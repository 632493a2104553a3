"""The tables of the effective-length study (HTML page and README): the PEs ranked by effective length beside
their TRF, each task's scores per length, and perplexity beside LongPPL."""

from __future__ import annotations

from extrap.experiments.effective_length.results import EffectiveLengthBlock, EffectiveLengthModel, block
from extrap.report.values import fmt
from extrap.report.view import Cell, table
from extrap.results import StudyResults


def eff_length(m: EffectiveLengthModel, task: str) -> int | None:
    e = m.effective(task)
    return e.length if e is not None else None


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
