"""What templates/extrapolation.html.j2 shows: one context per section, built from the results."""

from __future__ import annotations

from extrap.report.figures import CAPTIONS, erf_trf_params, erf_trf_setting
from extrap.report.lookup import eps_keys, erf_table, slope_groups, slopes_protocol, widest_head_trf
from extrap.report.paper import PAPER_003_TABLE1
from extrap.report.values import PAPER_SLIDING_RELATIVE, PROTOCOLS, VERDICT_PROTOCOLS, fmt, num, trf_setting
from extrap.report.view import Cell, Table, figure_ref, table
from extrap.results import TRAINED, EvalReport, StudyResults, TheoryRow, slug

LEARNED_WORDS = {True: "yes", False: "no: did not learn", None: "unknown"}
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
    rows = results.theory_by_pe()
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


def theory_context(results: StudyResults) -> list[dict] | None:
    """Per PE: a one-line summary and its rows of :func:`theory_table` (the page collapses them under it)."""
    full = theory_table(results)
    if full is None:
        return None
    eps = eps_keys(results.theory)
    out = []
    for pe, rs in results.theory_by_pe().items():
        rows = [row[1:] for row in full.rows if row[0] == pe]
        summary = theory_summary(pe, rs, eps)
        out.append({"id": f"theory-{slug(pe)}", "summary": summary, "table": Table(full.headers[1:], rows, full.css)})
    return out


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


def main_protocol(figures: dict) -> str:
    """The protocol of the report's main figure: the first of the verdict's protocols that was drawn."""
    return next((p for p in VERDICT_PROTOCOLS if f"ppl_{p}" in figures), VERDICT_PROTOCOLS[0])


def ppl_context(results: StudyResults, figures: dict, notes: dict) -> list[dict] | None:
    if not results.eval:
        return None
    return [
        {
            "protocol": p,
            "main": p == main_protocol(figures),  # its figure is the main one, at the top
            "table": ppl_table(results, p),
            "figure": figure_ref(figures, notes, f"ppl_{p}", CAPTIONS["ppl"].format(protocol=p)),
        }
        for p in PROTOCOLS
    ]


def trf_cell(r) -> str | Cell:
    """The TRF of an ERF row, or "–" with why there is none as hover text."""
    if r.trf is None and r.trf_reason:
        return Cell("–", r.trf_reason)
    return fmt(r.trf)


def untrained_note(results: StudyResults, pes: list[str]) -> str | None:
    """What the ERF section says of the PEs whose models did not learn (None when every one learned)."""
    left = [pe for pe in pes if results.learned(pe) is False]
    if not left:
        return None
    return (
        f"Did not learn (see Training runs): {', '.join(left)}. Their ERFs measure untrained models; the ρ above "
        "ranks every PE with a finite TRF, the claim that TRF and ERF trends agree ranks only the models that learned."
    )


def erf_context(results: StudyResults, figures: dict, notes: dict) -> dict | None:
    rows = erf_table(results)
    if not rows:
        return None
    mixed = len({(r.trf_eps, r.trf_reduce) for r in rows}) > 1
    trained = any(r.params == TRAINED for r in rows)
    headers = ["PE", "TRF"] + (["TRF taken as"] if mixed else [])
    headers += (["TRF from", "TRF at initial parameters"] if trained else []) + ["gradient ERF", "attention ERF"]
    body = [
        [r.pe, trf_cell(r)]
        + ([trf_setting(r.trf_eps, r.trf_reduce)] if mixed else [])
        + ([PARAMS_SHORT[r.params], r.trf_initial if r.params == TRAINED else "same"] if trained else [])
        + [r.grad_erf, r.attn_erf]
        for r in rows
    ]
    sp = results.spearman
    return {
        "table": table(headers, body),
        "trf_setting": erf_trf_setting(results),
        "trf_params": erf_trf_params(results),
        "grad": fmt(num(sp.grad) if sp else None),
        "attn": fmt(num(sp.attn) if sp else None),
        "n": fmt(sp.n if sp else None),
        "untrained": untrained_note(results, [r.pe for r in rows]),
        "figures": [
            figure_ref(figures, notes, "trf_erf", CAPTIONS["trf_erf"]),
            figure_ref(figures, notes, "grad_curves", CAPTIONS["grad_curves"].format(at="")),
        ],
    }


def timing_context(results: StudyResults) -> dict | None:
    timing = results.timing
    if timing is None or not timing.rows:
        return None
    sizes = timing.window_sizes
    paper = {"sliding": f"{PAPER_SLIDING_RELATIVE:.2f}", "nonoverlapping": "1.00"}
    body = []
    for r in timing.rows:
        secs = list(r.seconds)
        body.append(
            [r.method]
            + [fmt(num(s), 3) for s in secs + [None] * (len(sizes) - len(secs))]
            + [fmt(num(r.relative), 3), paper.get(r.method or "", "–")]
        )
    headers = ["method"] + [f"W={w} (s)" for w in sizes] + ["relative (ours)", "relative (000 Table 1)"]
    return {"table": table(headers, body, "timing"), "pe": fmt(timing.pe), "tokens": fmt(timing.tokens)}


def slope_group_context(results: StudyResults, group: str, variants, figures: dict, notes: dict) -> dict:
    proto = slopes_protocol(results, variants)
    ctx = {"group": group, "id": f"slopes-{slug(group)}", "protocol": proto, "table": None, "figure": None}
    if proto is None:
        return ctx
    reps = {v.pe: (results.eval.get(v.pe) or {}).get(proto) for v in variants}
    lengths = sorted({r.length for rep in reps.values() if rep for r in rep.results if isinstance(r.length, int)})
    body = []
    for L in lengths:
        hits = [next((r for r in (reps[v.pe].results if reps[v.pe] else []) if r.length == L), None) for v in variants]
        body.append([L] + [fmt(num(h.ppl) if h else None, 3) for h in hits])
    names = [(v.label or v.pe) + (" (did not learn)" if results.learned(v.pe) is False else "") for v in variants]
    ctx["table"] = table(["L_ex"] + names, body, "ppl")
    ctx["figure"] = figure_ref(
        figures, notes, f"slopes_{slug(group)}", CAPTIONS["slopes"].format(group=group, protocol=proto)
    )
    return ctx


def slopes_context(results: StudyResults, figures: dict, notes: dict) -> dict | None:
    groups = slope_groups(results)
    if not groups and results.experiment != "alibi-slopes":
        return None
    p = PAPER_003_TABLE1
    paper = [
        {
            "title": g["title"],
            "table": table(["L_ex"] + g["labels"], [[L] + row for L, row in zip(p["lengths"], g["ppl"])], "paper"),
        }
        for g in p["groups"]
    ]
    return {
        "groups": [slope_group_context(results, g, vs, figures, notes) for g, vs in groups.items()],
        "paper_source": p["source"],
        "paper": paper,
    }


def extrapolation_context(results: StudyResults, figures: dict, notes: dict) -> dict:
    """What templates/extrapolation.html.j2 shows; a None section is reported missing."""
    main = main_protocol(figures)
    return {
        "main": {
            "protocol": main,
            "figure": figure_ref(figures, notes, f"ppl_{main}", CAPTIONS["ppl"].format(protocol=main)),
        },
        "theory": theory_context(results),
        "ppl": ppl_context(results, figures, notes),
        "shapes": [(name, figure_ref(figures, notes, name)) for name in ("heatmaps", "trf_curves")],
        "erf": erf_context(results, figures, notes),
        "timing": timing_context(results),
        "slopes": slopes_context(results, figures, notes),
    }
