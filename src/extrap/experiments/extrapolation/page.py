"""The extrapolation experiments' page: each section's context for extrapolation.html.j2, the sections it shows,
the section that decides each claim, what is missing."""

from __future__ import annotations

from extrap.experiments.extrapolation.figures import CAPTIONS, erf_trf_params, erf_trf_setting
from extrap.experiments.extrapolation.lookup import eps_keys, erf_table, slope_groups, slopes_protocol
from extrap.experiments.extrapolation.paper import PAPER_003_TABLE1
from extrap.experiments.extrapolation.results import block
from extrap.experiments.extrapolation.tables import PARAMS_SHORT, ppl_table, theory_summary, theory_table, trf_cell
from extrap.experiments.extrapolation.values import PAPER_SLIDING_RELATIVE, PROTOCOLS, VERDICT_PROTOCOLS, trf_setting
from extrap.report.values import fmt, num
from extrap.report.view import Table, figure_ref, table
from extrap.results import TRAINED, Claim, StudyResults, slug

# section ids of extrapolation.html.j2, in page order, with their titles
EXTRAPOLATION_SECTIONS = (
    ("main-figure", "Perplexity against length"),
    ("theory", "Theory: verdicts and TRFs per PE"),
    ("runs", "Training runs"),
    ("ppl", "Perplexity tables per protocol"),
    ("shapes", "exp(RPE) heatmaps and TRF curves"),
    ("erf", "TRF vs ERF"),
    ("timing", "Inference time"),
    ("slopes", "ALiBi slopes and windowed attention"),
)

# claim (the claims' names) -> the id of what decides it
DECIDED_BY = {
    "Convergent RPEs extrapolate": "main-figure",
    "1/n and 1/(n ln n) do not extrapolate": "main-figure",
    "Sinusoidal does not extrapolate": "main-figure",
    "TRF(Type2) < TRF(Type1)": "theory",
    "TRF and ERF trends agree": "erf",
    "Sliding-window inference is much slower than non-overlapping": "timing",
}
SLOPE_CLAIM_GROUPS = {"Shifting": "shift", "One slope": "same-h", "Windowed": "window"}  # claim's first words


def toc(timed: bool):
    """The sections of a page: the timing section only where the experiment times, the slopes where shown."""

    def sections(results: StudyResults, body: dict) -> tuple[tuple[str, str], ...]:
        return tuple(
            (i, t)
            for i, t in EXTRAPOLATION_SECTIONS
            if (i != "timing" or timed) and (i != "slopes" or bool(body["slopes"]))
        )

    return sections


def anchor(results: StudyResults, claim: Claim, figures: dict) -> tuple[str, str] | None:
    """(id, title) of the figure or section that decides ``claim`` (None for a claim this page does not know)."""
    titles = dict(EXTRAPOLATION_SECTIONS)
    if claim.claim in DECIDED_BY:
        return DECIDED_BY[claim.claim], titles[DECIDED_BY[claim.claim]]
    group = next((g for words, g in SLOPE_CLAIM_GROUPS.items() if claim.claim.startswith(words)), None)
    if group is not None:
        if group in slope_groups(results):
            return f"slopes-{slug(group)}", f"ALiBi slopes: {group}"
        return "slopes", titles["slopes"]
    return None


def missing(timed: bool, slopes: bool):
    """What an extrapolation study's results lack, one line each (``slopes``: the slope variants are expected)."""

    def lines(results: StudyResults) -> list[str]:
        out, own = [], block(results)
        for section, what in (
            (own.theory, "theory verdicts"),
            (results.runs, "training runs"),
            (results.eval, "evaluation"),
            (own.erf, "receptive fields"),
            (own.spearman, "TRF/ERF correlation"),
            (own.timing if timed else True, "timing"),  # the slope experiment never times
        ):
            if not section:
                out.append(f"no {what} section")
        for section, what in (
            (results.runs, "no training run"),
            (results.eval, "no evaluation"),
            (own.erf, "no receptive field"),
        ):
            lack = [pe for pe in results.pes if pe not in section]
            if section and lack:
                out.append(f"{what} for {', '.join(lack)}")
        if slopes and not (own.slopes and own.slopes.variants):
            out.append("no ALiBi-slope variants")
        return out

    return lines


def theory_context(results: StudyResults) -> list[dict] | None:
    """Per PE: a one-line summary and its rows of :func:`theory_table` (the page collapses them under it)."""
    full = theory_table(results)
    if full is None:
        return None
    own = block(results)
    eps = eps_keys(own.theory)
    out = []
    for pe, rs in own.theory_by_pe().items():
        rows = [row[1:] for row in full.rows if row[0] == pe]
        summary = theory_summary(pe, rs, eps)
        out.append({"id": f"theory-{slug(pe)}", "summary": summary, "table": Table(full.headers[1:], rows, full.css)})
    return out


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
    sp = block(results).spearman
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
    timing = block(results).timing
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
    """What extrapolation.html.j2 shows; a None section is reported missing."""
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
