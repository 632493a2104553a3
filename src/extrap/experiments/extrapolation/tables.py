"""The extrapolation page's tables: the theory per PE and head, perplexity per protocol, the TRF cells."""

from __future__ import annotations

from extrap.experiments.extrapolation.lookup import eps_keys, widest_head_trf
from extrap.experiments.extrapolation.results import TheoryRow, block
from extrap.report.values import fmt, num
from extrap.report.view import Cell, Table, table
from extrap.results import EvalReport, StudyResults

PARAMS_SHORT = {"trained": "trained values, every layer", "initial": "initial parameters"}


def heads_label(heads: list) -> str:
    if any(isinstance(h, str) for h in heads):  # the theory writes "all" for identical heads
        return "all"
    heads = [h for h in heads if isinstance(h, int)]
    if not heads:
        return "–"
    return str(heads[0]) if len(heads) == 1 else f"{heads[0]}–{heads[-1]}"


def params_label(r: TheoryRow) -> str:
    return f"trained, layer {r.layer}" if r.trained else "initial"


def flat(v) -> list:
    """The numbers of a value, a table of values (T5's buckets) or a nested one (FIRE's MLP), in order."""
    return [y for x in v for y in flat(x)] if isinstance(v, (list, tuple)) else [v]


def value_text(v) -> str:
    """One parameter in a table cell: its number, or a summary of its table ("32 values in [-0.41, 0.12]")."""
    if not isinstance(v, (list, tuple)):
        return fmt(v, 4)
    xs = [x for x in flat(v) if num(x) is not None]
    if len(xs) <= 1:
        return fmt(xs[0] if xs else None, 4)
    lo, hi = min(xs), max(xs)
    return f"{len(xs)} values, all {fmt(lo, 4)}" if lo == hi else f"{len(xs)} values in [{fmt(lo, 4)}, {fmt(hi, 4)}]"


def values_label(r: TheoryRow) -> str:
    """A head's parameter values, with the initial ones beside trained ones: "r1 1.49 (initial 1.5)"."""
    init = r.initial_values or {}
    parts = []
    for k, v in (r.values or {}).items():
        before = f" (initial {value_text(init[k])})" if r.trained and k in init else ""
        parts.append(f"{k} {value_text(v)}{before}")
    return ", ".join(parts) or "–"


def collapse_heads(rows: list[TheoryRow], eps: list[str]) -> list[tuple[list, TheoryRow]]:
    """Consecutive heads with identical parameters, verdict, test, B and TRFs become one row."""
    groups: list[tuple[list, TheoryRow, tuple]] = []
    for r in rows:
        key = (params_label(r), values_label(r), r.verdict, r.test, fmt(r.series_sum, 6))
        key += tuple(fmt(r.trf.get(e)) for e in eps)
        if groups and groups[-1][2] == key:
            groups[-1][0].append(r.head)
        else:
            groups.append(([r.head], r, key))
    return [(heads, r) for heads, r, _ in groups]


def theory_summary(pe: str, rows: list[TheoryRow], eps: list[str]) -> str:
    """One line per PE: its verdict, the TRF of its widest head and what its rows are ("8 heads")."""
    initial, trained = [r for r in rows if not r.trained], [r for r in rows if r.trained]
    line = f"{pe}: " + ", ".join(dict.fromkeys(str(r.verdict) for r in trained or initial))
    groups = [("initial", initial), ("trained", trained)] if eps else []
    trf = [(label, widest_head_trf(rs, eps[0])) for label, rs in groups if rs]
    if any(v is not None for _, v in trf):
        values = ", ".join(f"{fmt(v)} ({label})" for label, v in trf) if trained else fmt(trf[0][1])
        line += f"; TRF at ε={eps[0]}, widest head: {values}"
    heads = len({r.head for r in initial})
    line += f"; {heads} head{'s' if heads != 1 else ''}"
    return line + (f", initial and trained values of {len({r.layer for r in trained})} layer(s)" if trained else "")


def theory_table(results: StudyResults) -> Table | None:
    rows = block(results).theory_by_pe()
    if not rows:
        return None
    flat = [r for rs in rows.values() for r in rs]
    eps = eps_keys(flat)
    learned = any(r.params for r in flat)  # schemes with learned bias parameters: initial and trained rows
    headers = ["PE"] + (["parameters", "values"] if learned else []) + ["heads", "verdict", "test"]
    headers += ["B = Σ exp(r(t))"] + [f"TRF ε={e}" for e in eps] + ["explanation"]
    body = []
    for pe, rs in rows.items():
        for heads, r in collapse_heads(rs, eps):
            body.append(
                [pe]
                + ([params_label(r), values_label(r)] if learned else [])
                + [heads_label(heads), r.verdict, r.test, fmt(r.series_sum, 6)]
                + [r.trf.get(e) for e in eps]
                + [" ".join(filter(None, (r.explanation, r.trf_note)))]
            )
    return table(headers, body, "theory")


def ppl_cell(rep: EvalReport, L: int) -> str | Cell:
    hit = next((r for r in rep.results if r.length == L), None)
    if hit is not None and hit.error:
        return Cell("error", hit.error)
    return fmt(hit.ppl if hit else None, 4)


def ppl_table(results: StudyResults, protocol: str) -> Table | None:
    reps = {pe: rep for pe in results.all_pes() if (rep := (results.eval.get(pe) or {}).get(protocol))}
    if not reps:
        return None
    lengths = sorted({r.length for rep in reps.values() for r in rep.results if isinstance(r.length, int)})
    L_tr = results.train_length
    headers = ["PE"] + [f"{L}{' (L_tr)' if L == L_tr else ''}" for L in lengths] + ["extrapolates", "worst ratio"]
    body = [
        [pe] + [ppl_cell(rep, L) for L in lengths] + [verdict_cell(results, pe, rep), fmt(num(rep.worst_ratio), 3)]
        for pe, rep in reps.items()
    ]
    return table(headers, body, "ppl")


def verdict_cell(results: StudyResults, pe: str, rep: EvalReport) -> str | Cell:
    """000 Definition 0.1's verdict, marked when the model did not learn (its flat curve proves nothing)."""
    if results.learned(pe) is False and rep.extrapolates is not None:
        why = "its loss at L_tr is above the set fraction of the unigram entropy (see Training runs)"
        return Cell(f"{fmt(rep.extrapolates)}, but did not learn", why)
    return fmt(rep.extrapolates)


def trf_cell(r) -> str | Cell:
    """The TRF of an ERF row, or "–" with why there is none as hover text."""
    if r.trf is None and r.trf_reason:
        return Cell("–", r.trf_reason)
    return fmt(r.trf)
