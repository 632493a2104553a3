"""Claims, tables and figures of ``extrap study --experiment alignment`` (004 Tables 4, 5, 9; Figs. 3-5).

Reads the results that :mod:`extrap.study_alignment` writes; :mod:`extrap.report`
calls :func:`alignment_claims`, :func:`figure_plan`, :func:`missing` and
:func:`section` for this experiment; :func:`markdown_tables` renders the τ and accuracy tables as Markdown.
"""

from __future__ import annotations

import itertools

from extrap.report.figures import _new_figure
from extrap.report.markup import Raw, _figure_html, _missing, _table
from extrap.report.results import _fmt
from extrap.study_alignment import (LABELS, MIN_TRAIN_ACC, MODES, SETTINGS, TAU_TOL, _key, _mean_tau, _tau_text,
                                    best_setting, mean_beyond)


def task_blocks(results: dict) -> dict:
    """{task: that task's results block}; a results.json with one block (no per-task level) is read as well."""
    al = results.get("alignment") or {}
    if "models" in al:
        return {al.get("task") or "passkey": al}
    return {t: al[t] for t in (results.get("tasks") or list(al)) if isinstance(al.get(t), dict)}


# ---------------------------------------------------------------------------
# claims (called by extrap.report.compute_claims for this experiment)
# ---------------------------------------------------------------------------
def _claim(claim, ok, evidence, source) -> dict:
    return {"claim": claim, "ok": ok, "evidence": evidence, "source": source}


def _f(x, d=3) -> str:
    return "–" if x is None else f"{x:.{d}g}" if isinstance(x, float) else str(x)


def claim_tau_decreases(al: dict) -> dict:
    name, src = "τ decreases as length grows", "004 Table 5, §5.2"
    L_tr = al.get("train_length")
    seqs, parts, flat = [], [], True
    for pe, mdl in (al.get("models") or {}).items():
        for m in MODES:
            taus, srcs = (mdl.get("tau") or {}).get(m) or {}, (mdl.get("tau_source") or {}).get(m) or {}
            edge = (mdl.get("at_grid_edge") or {}).get(m) or {}
            pts = sorted((int(k), _mean_tau(v), bool(edge.get(k))) for k, v in taus.items()
                         if int(k) > (L_tr or 0) and srcs.get(k) == "algorithm1" and v is not None)
            if len(pts) < 2:
                continue
            ok = all(b[1] <= a[1] + TAU_TOL for a, b in itertools.pairwise(pts))
            flat &= all(t >= 1 - TAU_TOL for _, t, _ in pts)
            seqs.append(ok)
            label = f"{pe} {m}{' (mean over layers)' if m == 'pmax-layer' else ''}"
            parts.append(f"{label}: " + " → ".join(f"{t:.3f}{'*' if e else ''}" for _, t, e in pts)
                         + ("" if ok else " ✘"))
    if not seqs:
        return _claim(name, None, "fewer than two lengths beyond L_tr with an Algorithm 1 τ", src)
    ev = "; ".join(parts) + (f" (Algorithm 1 τ at each L > L_tr, increasing L; non-increasing within {TAU_TOL}"
                             + ("; * at the grid edge 0.5 or 1, where the target is not bracketed)"
                                if "*" in "".join(parts) else ")"))
    if flat:
        return _claim(name, False, ev + "; τ never drops below 1", src)
    return _claim(name, all(seqs), ev, src)


def _eligible(al: dict) -> tuple[dict, list[str]]:
    """Models that retrieve at L_tr without alignment (accuracy >= MIN_TRAIN_ACC), and notes on the others."""
    L_tr = al.get("train_length")
    ok, notes = {}, []
    for pe, mdl in (al.get("models") or {}).items():
        a = ((mdl.get("accuracy") or {}).get("none") or {}).get(_key(L_tr)) if L_tr else None
        if a is None:
            notes.append(f"{pe}: no accuracy at L_tr")
        elif a < MIN_TRAIN_ACC:
            notes.append(f"{pe} left out: accuracy {a:.2f} at L_tr < {MIN_TRAIN_ACC} (did not learn the task)")
        else:
            ok[pe] = mdl
    return ok, notes


def _compare(al: dict, name: str, src: str, left: str | None, right: str) -> dict:
    """Per model, mean accuracy over L > L_tr of ``left`` (None: the model's best aligned setting) vs ``right``.

    ✔ only when ``left`` is strictly higher for every model that retrieves at L_tr (a model
    whose two settings are both perfect has no headroom and is left out); ✘ when it is not for
    some model: a pooled mean would let one model's gain hide another's loss.
    """
    L_tr = al.get("train_length")
    models, notes = _eligible(al)
    if not models:
        return _claim(name, None, "; ".join(notes) or "no model was scored", src)
    verdicts, parts, pooled = [], [], {"left": [], "right": []}
    for pe, mdl in models.items():
        acc = mdl.get("accuracy") or {}
        lft = left or best_setting(acc, L_tr)
        a, b = (mean_beyond(acc.get(lft), L_tr) if lft else None), mean_beyond(acc.get(right), L_tr)
        if a is None or b is None:
            notes.append(f"{pe}: no accuracy beyond L_tr")
            continue
        pooled["left"].append(a)
        pooled["right"].append(b)
        if min(a, b) >= 1.0:
            parts.append(f"{pe}: {LABELS[lft]} {a:.3f} vs {LABELS[right]} {b:.3f} (both at the ceiling: left out)")
            continue
        verdicts.append(a > b)
        parts.append(f"{pe}: {LABELS[lft]} {a:.3f} vs {LABELS[right]} {b:.3f} {'✔' if a > b else '✘'}")
    ev = "mean exact-match accuracy over L > L_tr, per model: " + "; ".join(parts) if parts else ""
    if pooled["left"]:
        n = len(pooled["left"])
        ev += (f" (mean over models: {sum(pooled['left']) / n:.3f} vs {sum(pooled['right']) / n:.3f}; "
               "the claim must hold for every model)")
    if notes:
        ev = "; ".join(filter(None, [ev] + notes))
    return _claim(name, all(verdicts) if verdicts else None, ev or "no accuracy beyond L_tr", src)


def alignment_claims(results: dict) -> list[dict]:
    """The three claims of 004 §5 for every task (named "task: claim")."""
    src_acc = "004 Table 4, §5.4"
    out = []
    for task, al in (task_blocks(results) or {"passkey": {}}).items():
        c2 = _compare(al, "pmax alignment beats entropy alignment", src_acc, "pmax", "entropy")
        c3 = _compare(al, "alignment improves accuracy beyond L_tr", src_acc, None, "none")
        if c3["ok"] is not None:
            c3["evidence"] = "each model's best of its 3 aligned settings; " + c3["evidence"]
        out += [{**c, "claim": f"{task}: {c['claim']}"} for c in (claim_tau_decreases(al), c2, c3)]
    return out


# ---------------------------------------------------------------------------
# report section and figures (called by extrap.report for this experiment)
# ---------------------------------------------------------------------------
# 004 Table 5 (Flan-T5-XL, L_tr = 512; the paper's column labels); topic's first P_max entry is blank in the source
PAPER_004_TABLE5 = {
    "passkey": {"labels": ["20k", "30k", "40k", "50k", "55k"], "unit": "sentences",
                "rows": [("w/ P_max", [0.85, 0.8, 0.75, 0.75, 0.75]), ("w/ H", [0.7, 0.65, 0.6, 0.6, 0.6])]},
    "line": {"labels": ["200", "300", "400", "500", "600", "680"], "unit": "lines",
             "rows": [("w/ P_max", [0.8, 0.75, 0.75, 0.7, 0.7, 0.7]), ("w/ H", [0.6, 0.55, 0.55, 0.5, 0.5, 0.5])]},
    "topic": {"labels": ["5", "10", "15", "20", "25"], "unit": "topics",
              "rows": [("w/ P_max", [None, 0.75, 0.7, 0.65, 0.65]), ("w/ H", [0.7, 0.55, 0.55, 0.5, 0.5])]},
}

CAPTIONS = {
    "alignment_tau": "τ vs length (analogue of 004 Figs. 3-5), one row per task: markers, Algorithm 1 (× P_max, "
                     "● entropy, + P_max per layer, mean over layers); lines, Prop. 1, Prop. 2 and the log-length "
                     "rule log_L L_tr (values above 1.1 are off the scale: see the table). Faint markers: beyond the "
                     "probe cap, the log-length τ.",
    "alignment_accuracy": "Exact-match accuracy (greedy) vs length, without and with alignment, one row per task; "
                          "dashed: L_tr (analogue of 004 Table 4).",
}


def missing(results: dict) -> list[str]:
    blocks = task_blocks(results)
    out = [] if any(b.get("models") for b in blocks.values()) else ["no alignment results"]
    pes = results.get("pes") or []
    for task in results.get("tasks") or []:
        if not (blocks.get(task) or {}).get("models"):
            out.append(f"{task}: no alignment results")
    for task, al in blocks.items():
        lack = [pe for pe in pes if pe not in (al.get("models") or {})]
        if al.get("models") and lack:
            out.append(f"{task}: no alignment results for {', '.join(lack)}")
        for pe, mdl in (al.get("models") or {}).items():
            out += [f"{task}/{pe} {k}: {v}" for k, v in (mdl.get("errors") or {}).items()]
            got = {k for v in (mdl.get("accuracy") or {}).values() for k in v}
            gone = [L for L in al.get("lengths") or [] if _key(L) not in got]
            if gone:
                out.append(f"{task}/{pe}: not evaluated at {', '.join(map(str, gone))}")
    return out


def _tau_cell(t, source: str | None, edge: bool):

    if t is None:
        return "–"
    text = _tau_text(_mean_tau(t)) if not isinstance(t, list) else f"{_mean_tau(t):.3f}"
    marks = ("†" if source and source.startswith("log-length") else "") + ("*" if edge else "")
    title = f"per layer: {_tau_text(t)}" if isinstance(t, list) else ""
    import html as _h

    return Raw(f'<span title="{_h.escape(title)}">{_h.escape(text + marks)}</span>' if title
               else _h.escape(text + marks))


def _cf_value(cf: dict, key: str):
    """A closed-form τ, or "no root" where Prop. 1 has none (extrap.align.prop1: no real / no valid root)."""
    if not cf:
        return None
    v = cf.get(key)
    if key == "prop1" and v is None and ("prop1_status" in cf or "prop1_closest" in cf):
        return "no root"
    return v


def _cf_text(v) -> str:
    return v if isinstance(v, str) else "–" if v is None else f"{v:.3f}"


def section(results: dict, figures: dict, notes: dict) -> str:

    head = '<section id="alignment"><h2>Attention alignment on retrieval (004 §5.2, Tables 4, 5, 9)</h2>'
    blocks = {t: b for t, b in task_blocks(results).items() if b.get("models")}
    if not blocks:
        return head + _missing("alignment results") + "</section>"
    first = next(iter(blocks.values()))
    scoring = "greedy decoding" + (" and by ranking the candidate answers (004)" if first.get("rank") else "")
    intro = (f"<p>Tasks <b>{_fmt(', '.join(blocks))}</b>, {_fmt(first.get('n'))} scored examples per length "
             f"({_fmt(first.get('buckets'))} depth buckets), exact match by {scoring}. τ from "
             f"max({_fmt(first.get('probe_prompts'))}, ⌈{_fmt(first.get('probe_tokens'))} / L⌉) unlabeled probe "
             "prompts per length (other examples than the scored ones). Algorithm 1 grid 1.0, 0.95, …, 0.5, refined "
             f"by bisection; probing capped at {_fmt(first.get('probe_cap'))} tokens. † beyond the probe cap: "
             "Algorithm 1 was not run, the log-length τ is used. * at the grid edge (the target needs τ below 0.5, "
             "or is never crossed). Per-layer τ: mean over layers (hover for the list). Prop. 1 \"no root\": under "
             "004 §6.1's approximation no τ gives P_max^ex = P (no real root, or none on the branch where P_max "
             "falls as τ rises; extrap.align.prop1). At L_tr every τ is 1.</p>")
    parts = [head, intro]
    parts += [_task_section(task, al) for task, al in blocks.items()]
    parts.append(_figure_html(figures, notes, "alignment_accuracy", CAPTIONS["alignment_accuracy"]))
    parts.append(_figure_html(figures, notes, "alignment_tau", CAPTIONS["alignment_tau"]))
    return "".join(parts) + "</section>"


def _task_section(task: str, al: dict) -> str:
    """One task's τ table (004 Table 5), accuracy table (Table 4) and depth table (Table 9)."""

    models = al.get("models") or {}
    L_tr, lengths = al.get("train_length"), al.get("lengths") or []
    cols = [f"{L}{' (L_tr)' if L == L_tr else ''}" for L in lengths]
    parts = [f"<h3>{_fmt(task)} (L_tr = {_fmt(L_tr)} tokens)</h3>"]
    body = []
    for pe, mdl in models.items():
        for m in MODES:
            taus, src, edge = (mdl.get(k, {}).get(m) or {} for k in ("tau", "tau_source", "at_grid_edge"))
            body.append([pe, f"Algorithm 1, {LABELS[m]}" + (" (mean)" if m == "pmax-layer" else "")]
                        + [_tau_cell(taus.get(_key(L)), src.get(_key(L)), edge.get(_key(L), False))
                           for L in lengths])
        cfs = mdl.get("closed_forms") or {}
        for key, label in (("prop1", "Prop. 1 (P_max)"), ("prop2", "Prop. 2 (entropy)"),
                           ("log_length", "log-length log_L L_tr")):
            body.append([pe, label] + [_cf_text(1.0 if L == L_tr else _cf_value(cfs.get(_key(L)), key))
                                       for L in lengths])
    parts.append(f"<h4>Temperatures, {_fmt(task)} (004 Table 5, Figs. 3-5)</h4>" + _table(["PE", "τ from"] + cols,
                                                                                           body, "tau"))
    p = PAPER_004_TABLE5.get(task)
    if p:
        parts.append(f"<p>Paper, Flan-T5-XL, {task}, L_tr = 512 (004 Table 5; columns: {p['unit']}):</p>"
                     + _table(["τ"] + p["labels"], [[lab] + vals for lab, vals in p["rows"]], "paper"))
    body = []
    for pe, mdl in models.items():
        for method, key in (("greedy", "accuracy"), ("rank", "rank_accuracy")):
            acc = mdl.get(key) or {}
            for st in SETTINGS:
                if acc.get(st):
                    body.append([pe, method, LABELS[st]] + [_fmt(acc[st].get(_key(L)), 3) for L in lengths]
                                + [_fmt(mean_beyond(acc[st], L_tr), 3)])
    chance = ("" if not any(mdl.get("rank_accuracy") for mdl in models.values()) else
              "<p>rank: correct iff the answer's log-likelihood beats every other candidate's; chance is 1 / the "
              "number of candidates (4 for passkey and line; for topic, the number of topics up to 4: 2 in short "
              "prompts).</p>")
    parts.append(f"<h4>Exact-match accuracy, {_fmt(task)} (004 Table 4)</h4>"
                 + _table(["PE", "scoring", "setting"] + cols + ["mean L > L_tr"], body, "accuracy") + chance)
    body, buckets = [], []
    for pe, mdl in models.items():
        d = mdl.get("depth") or {}
        buckets = d.get("buckets") or buckets
        for st in [s for s in ("none", d.get("best_setting")) if s]:
            for L in lengths:
                row = (d.get("by_length") or {}).get(st, {}).get(_key(L))
                if row is not None and L > (L_tr or 0):
                    body.append([pe, LABELS[st], L] + [_fmt(v, 3) for v in row])
            pooled = (d.get("pooled_beyond") or {}).get(st)
            if pooled is not None:
                body.append([pe, LABELS[st], "all L > L_tr"] + [_fmt(v, 3) for v in pooled])
    if body:
        hdr = ["PE", "setting", "L"] + [f"depth {lo:.1f}–{hi:.1f}" for lo, hi in buckets]
        parts.append(f"<h4>Accuracy by answer depth, {_fmt(task)} (004 Table 9)</h4><p>Unaligned and each model's "
                     "best aligned setting (highest mean accuracy over L > L_tr). Depth 0 = the needle opens the "
                     "context, 1 = it is right before the question.</p>" + _table(hdr, body, "depth"))
    return "".join(parts)


def _grid(results: dict):
    """(figure, [(task, block, pe, model, axes)]) with one row per task and one column per PE; None without models."""

    blocks = {t: b for t, b in task_blocks(results).items() if b.get("models")}
    if not blocks:
        return None, []
    cols = max(len(b["models"]) for b in blocks.values())
    fig = _new_figure(4.2 * cols, 3.6 * len(blocks))
    cells = []
    for r, (task, al) in enumerate(blocks.items()):
        for c, (pe, mdl) in enumerate(al["models"].items()):
            ax = fig.add_subplot(len(blocks), cols, r * cols + c + 1)
            ax.set_title(f"{task}, {pe}", fontsize=9)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("L (tokens)")
            ax.grid(alpha=0.3)
            cells.append((task, al, pe, mdl, ax))
    return fig, cells


def _fig_tau(results: dict):
    fig, cells = _grid(results)
    markers = {"pmax": "x", "entropy": "o", "pmax-layer": "+"}
    for _task, al, _pe, mdl, ax in cells:
        L_tr = al.get("train_length") or 1
        for m in MODES:
            pts = sorted((int(k), _mean_tau(v), (mdl.get("tau_source") or {}).get(m, {}).get(k))
                         for k, v in ((mdl.get("tau") or {}).get(m) or {}).items() if v is not None)
            for measured in (True, False):  # faint: the log-length τ used beyond the probe cap
                sel = [(L, t) for L, t, s in pts if (s in ("algorithm1", "L_tr")) == measured]
                if sel:
                    ax.scatter([L for L, _ in sel], [t for _, t in sel], marker=markers[m], s=28,
                               color=f"C{MODES.index(m)}", alpha=1.0 if measured else 0.35,
                               label=LABELS[m] if measured else None, zorder=3)
        cfs = mdl.get("closed_forms") or {}
        for key, label, ls in (("prop1", "Prop. 1", "-"), ("prop2", "Prop. 2", "--"),
                               ("log_length", "log_L L_tr", ":")):
            pts = sorted((int(k), v[key]) for k, v in cfs.items() if isinstance(v, dict)
                         and isinstance(v.get(key), (int, float)))
            if pts:
                ax.plot([L_tr] + [L for L, _ in pts], [1.0] + [t for _, t in pts], ls=ls, color="grey", lw=1,
                        label=label)
        ax.set_ylim(0.0, 1.1)  # closed forms above 1 (no alignment needed by their model) run off the top
        ax.set_ylabel("τ")
        ax.legend(fontsize=6)
    return fig


def _fig_accuracy(results: dict):
    fig, cells = _grid(results)
    drawn = False
    for _task, al, _pe, mdl, ax in cells:
        for st in SETTINGS:
            pts = sorted((int(k), v) for k, v in ((mdl.get("accuracy") or {}).get(st) or {}).items()
                         if isinstance(v, (int, float)))
            if pts:
                ax.plot([L for L, _ in pts], [a for _, a in pts], marker="o", ms=3, label=LABELS[st])
                drawn = True
        ax.axvline(al.get("train_length") or 1, color="grey", ls="--", lw=1)
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("exact-match accuracy")
        ax.legend(fontsize=6)
    return fig if drawn else None


def figure_plan(results: dict) -> list:
    return [("alignment_accuracy", lambda: _fig_accuracy(results)), ("alignment_tau", lambda: _fig_tau(results))]


def markdown_tables(results: dict) -> str:
    """The τ and accuracy tables of every task as Markdown (for a README or a message)."""
    lines = []
    for task, al in task_blocks(results).items():
        L_tr, lengths = al.get("train_length"), al.get("lengths") or []
        cols = [f"{L}" + (" (L_tr)" if L == L_tr else "") for L in lengths]
        lines += [f"**{task}** (L_tr = {L_tr})", "", "| PE | τ from | " + " | ".join(cols) + " |",
                  "|---|---|" + "---|" * len(cols)]
        for pe, mdl in (al.get("models") or {}).items():
            for m in MODES:
                row = []
                for L in lengths:
                    t = (mdl.get("tau") or {}).get(m, {}).get(_key(L))
                    s = (mdl.get("tau_source") or {}).get(m, {}).get(_key(L)) or ""
                    e = (mdl.get("at_grid_edge") or {}).get(m, {}).get(_key(L))
                    row.append("–" if t is None else f"{_mean_tau(t):.3f}" + ("†" if s.startswith("log") else "")
                               + ("*" if e else ""))
                lines.append(f"| {pe} | {LABELS[m]}{' (mean)' if m == 'pmax-layer' else ''} | "
                             + " | ".join(row) + " |")
            for key, label in (("prop1", "Prop. 1"), ("prop2", "Prop. 2"), ("log_length", "log-length")):
                row = [_cf_text(1.0 if L == L_tr else _cf_value((mdl.get("closed_forms") or {}).get(_key(L)), key))
                       for L in lengths]
                lines.append(f"| {pe} | {label} | " + " | ".join(row) + " |")
        lines += ["", "| PE | scoring | setting | " + " | ".join(cols) + " | mean L > L_tr |",
                  "|---|---|---|" + "---|" * (len(cols) + 1)]
        for pe, mdl in (al.get("models") or {}).items():
            for method, key in (("greedy", "accuracy"), ("rank", "rank_accuracy")):
                for st in SETTINGS:
                    acc = (mdl.get(key) or {}).get(st) or {}
                    if not acc:
                        continue
                    cells = ["–" if acc.get(_key(L)) is None else f"{acc[_key(L)]:.3f}" for L in lengths]
                    mb = mean_beyond(acc, L_tr)
                    lines.append(f"| {pe} | {method} | {LABELS[st]} | " + " | ".join(cells)
                                 + f" | {'–' if mb is None else f'{mb:.3f}'} |")
        lines.append("")
    return "\n".join(lines)
