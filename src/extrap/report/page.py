"""The self-contained HTML page: sections, tables and the figures by relative path."""

from __future__ import annotations

import html
import os
from pathlib import Path

from extrap.io import atomic_write_text
from extrap.report import alignment
from extrap.report.claims import compute_claims
from extrap.report.figures import CAPTIONS, write_figures
from extrap.report.markup import _STATUS, Raw, _esc, _figure_html, _missing, _table
from extrap.report.results import (PAPER_003_TABLE1, PAPER_SLIDING_RELATIVE, PROTOCOLS, _eps_keys, _erf_table, _fmt,
                                   _num, _pes, _safe, _slope_groups, _slopes_protocol, theory_rows)


def _section_header(results: dict) -> str:
    meta = [("preset", results.get("preset")), ("experiment", results.get("experiment")),
            ("PEs", ", ".join(results.get("pes") or []) or None),
            ("training length", results.get("train_length")),
            ("evaluation lengths", ", ".join(map(str, results.get("lengths") or [])) or None),
            ("δ (000 Def. 0.1)", results.get("delta")), ("extrap version", results.get("extrap_version")),
            ("command", results.get("command")), ("seed", results.get("seed")), ("corpus", results.get("corpus")),
            ("corpus hash", results.get("corpus_hash")), ("created", results.get("created"))]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td><code>{_esc(v)}</code></td></tr>" for k, v in meta)
    return f'<h1>extrap study report</h1><table class="meta">{rows}</table>'


def _section_claims(claims: list[dict]) -> str:
    rows = []
    for c in claims:
        sym, cls = _STATUS[c["ok"]]
        rows.append(f'<tr class="{cls}"><td class="status">{sym}</td><td>{html.escape(c["claim"])}</td>'
                    f'<td>{html.escape(c["evidence"])}</td><td>{html.escape(c.get("source", ""))}</td></tr>')
    return ('<section id="claims"><h2>Claims checklist</h2>'
            '<p>✔ reproduced, ✘ not reproduced, – not enough data.</p>'
            '<table class="claims"><thead><tr><th></th><th>claim</th><th>evidence</th><th>paper</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></section>')


def missing_summary(results: dict) -> list[str]:
    """What results.json lacks, one line each."""
    if results.get("experiment") == "alignment":
        return alignment.missing(results) + _recorded_errors(results)
    out = []
    for key, what in (("theory", "theory verdicts"), ("runs", "training runs"), ("eval", "evaluation"),
                      ("erf", "receptive fields"), ("spearman", "TRF/ERF correlation"), ("timing", "timing")):
        if not results.get(key):
            out.append(f"no {what} section")
    pes = results.get("pes") or []
    for key, what in (("runs", "no training run"), ("eval", "no evaluation"), ("erf", "no receptive field")):
        section = results.get(key)
        if section:
            lack = [pe for pe in pes if pe not in section]
            if lack:
                out.append(f"{what} for {', '.join(lack)}")
    if results.get("experiment") == "alibi-slopes" and not _slope_groups(results):
        out.append("no ALiBi-slope variants")
    return out + _recorded_errors(results)


def _recorded_errors(results: dict) -> list[str]:
    """Errors the study recorded in place of a result ({"error": ...} entries)."""
    out = [f"{pe} failed: {why}" for pe, why in (results.get("failures") or {}).items()]
    for key in ("runs", "erf"):
        for pe, entry in (results.get(key) or {}).items():
            if isinstance(entry, dict) and entry.get("error"):
                out.append(f"{key} {pe}: {entry['error']}")
    for pe, protos in (results.get("eval") or {}).items():
        for proto, rep in (protos or {}).items():
            if isinstance(rep, dict) and rep.get("error"):
                out.append(f"eval {pe} ({proto}): {rep['error']}")
    return out


def _section_missing(results: dict, notes: dict) -> str:
    items = missing_summary(results) + [f"figure {k[6:]}: {v}" for k, v in notes.items() if k.startswith("error:")]
    if not items:
        return ""
    lis = "".join(f"<li>{html.escape(s)}</li>" for s in items)
    return f'<section id="missing"><h2>Missing or failed</h2><ul class="missing">{lis}</ul></section>'


def _heads_label(heads: list) -> str:
    if any(isinstance(h, str) for h in heads):  # the theory writes "all" for identical heads
        return "all"
    heads = [h for h in heads if isinstance(h, int)]
    if not heads:
        return "–"
    return str(heads[0]) if len(heads) == 1 else f"{heads[0]}–{heads[-1]}"


def _collapse_heads(rows: list[dict], eps: list[str]) -> list[tuple[list, dict]]:
    """Consecutive heads with identical verdict, test, B and TRFs become one row."""
    groups: list[tuple[list, dict]] = []
    for r in rows:
        key = (r.get("verdict"), r.get("test"), _fmt(r.get("series_sum"), 6),
               tuple(_fmt((r.get("trf") or {}).get(e)) for e in eps))
        if groups and groups[-1][1]["_key"] == key:
            groups[-1][0].append(r.get("head"))
        else:
            groups.append(([r.get("head")], {**r, "_key": key}))
    return groups


def _section_theory(results: dict) -> str:
    rows = theory_rows(results)
    if not rows:
        return '<section id="theory"><h2>Theory (000 Theorem 0.4)</h2>' + _missing("theory verdicts") + "</section>"
    eps = _eps_keys([r for rs in rows.values() for r in rs])
    headers = ["PE", "heads", "verdict", "test", "B = Σ exp(r(t))"] + [f"TRF ε={e}" for e in eps] + ["explanation"]
    body = []
    for pe, rs in rows.items():
        for heads, r in _collapse_heads(rs, eps):
            body.append([pe, _heads_label(heads), r.get("verdict"), r.get("test"), _fmt(r.get("series_sum"), 6)]
                        + [(r.get("trf") or {}).get(e) for e in eps]
                        + [" ".join(filter(None, (r.get("explanation"), r.get("trf_note"))))])
    return ('<section id="theory"><h2>Theory (000 Theorem 0.4, TRF Eq. 22)</h2>'
            + _table(headers, body, "theory") + "</section>")


def _section_runs(results: dict) -> str:
    runs = results.get("runs") or {}
    if not runs:
        return '<section id="runs"><h2>Training runs</h2>' + _missing("training runs") + "</section>"
    body = [[pe, r.get("final_loss"), r.get("seconds"), r.get("params"), r.get("run_dir")]
            for pe, r in runs.items() if isinstance(r, dict)]
    return ('<section id="runs"><h2>Training runs</h2>'
            + _table(["PE", "final loss", "seconds", "parameters", "run folder"], body) + "</section>")


def _ppl_table(results: dict, protocol: str) -> str | None:
    ev = results.get("eval") or {}
    pes = [pe for pe in _pes(results) if (ev.get(pe) or {}).get(protocol)]
    if not pes:
        return None
    lengths = sorted({r.get("length") for pe in pes for r in ev[pe][protocol].get("results") or []
                      if isinstance(r.get("length"), int)})
    L_tr = results.get("train_length")
    headers = ["PE"] + [f"{L}{' (L_tr)' if L == L_tr else ''}" for L in lengths] + ["extrapolates", "worst ratio"]
    body = []
    for pe in pes:
        rep = ev[pe][protocol]
        by_len = {r.get("length"): r for r in rep.get("results") or []}
        cells = [(Raw('<span title="' + html.escape(by_len[L]["error"]) + '">error</span>')
                  if by_len.get(L, {}).get("error") else _fmt(by_len.get(L, {}).get("ppl"), 4))
                 for L in lengths]
        body.append([pe] + cells + [rep.get("extrapolates"), _fmt(_num(rep.get("worst_ratio")), 3)])
    return _table(headers, body, "ppl")


def _section_ppl(results: dict, figures: dict, notes: dict) -> str:
    parts = ['<section id="ppl"><h2>Perplexity vs length (000 Figs. 3/4, Definition 0.1)</h2>']
    if not results.get("eval"):
        return parts[0] + _missing("evaluation") + "</section>"
    for proto in PROTOCOLS:
        table = _ppl_table(results, proto)
        parts.append(f"<h3>{html.escape(proto)}</h3>")
        if table is None:
            parts.append(_missing(f"no PE was evaluated with the {proto} protocol"))
            continue
        parts.append(table)
        parts.append(_figure_html(figures, notes, f"ppl_{proto}", CAPTIONS["ppl"].format(protocol=proto)))
    return "".join(parts) + "</section>"


def _section_shapes(results: dict, figures: dict, notes: dict) -> str:
    parts = ['<section id="shapes"><h2>exp(RPE) heatmaps and TRF curves (000 Figs. 6-7)</h2>']
    for name in ("heatmaps", "trf_curves"):
        fig = _figure_html(figures, notes, name, "")  # the figure's caption is in notes
        parts.append(fig or _missing(f"{name.replace('_', ' ')}: no data to draw"))
    return "".join(parts) + "</section>"


def _section_erf(results: dict, figures: dict, notes: dict) -> str:
    parts = ['<section id="erf"><h2>TRF vs ERF (000 Fig. 5, 003 §5.1)</h2>']
    table = _erf_table(results)
    if not table:
        return parts[0] + _missing("receptive fields") + "</section>"
    parts.append(_table(["PE", "TRF", "gradient ERF", "attention ERF"],
                        [[r["pe"], r["trf"], r["grad_erf"], r["attn_erf"]] for r in table]))
    sp = results.get("spearman") or {}
    parts.append(f'<p>Spearman rank correlation with the TRF: gradient ERF ρ = {_esc(_num(sp.get("grad")))}, '
                 f'attention ERF ρ = {_esc(_num(sp.get("attn")))}, n = {_esc(sp.get("n"))} PEs.</p>')
    parts.append(_figure_html(figures, notes, "trf_erf", CAPTIONS["trf_erf"]))
    parts.append(_figure_html(figures, notes, "grad_curves", CAPTIONS["grad_curves"]))
    return "".join(parts) + "</section>"


def _section_timing(results: dict) -> str:
    head = '<section id="timing"><h2>Inference time (000 Table 1)</h2>'
    timing = results.get("timing") or {}
    if not timing.get("rows"):
        return head + _missing("timing") + "</section>"
    sizes = timing.get("window_sizes") or []
    paper = {"sliding": f"{PAPER_SLIDING_RELATIVE:.2f}", "nonoverlapping": "1.00"}
    body = []
    for r in timing["rows"]:
        secs = list(r.get("seconds") or [])
        body.append([r.get("method")] + [_fmt(_num(s), 3) for s in secs + [None] * (len(sizes) - len(secs))]
                    + [_fmt(_num(r.get("relative")), 3), paper.get(r.get("method"), "–")])
    headers = ["method"] + [f"W={w} (s)" for w in sizes] + ["relative (ours)", "relative (000 Table 1)"]
    return (head + _table(headers, body, "timing")
            + f"<p>Model: {_esc(timing.get('pe'))}; {_esc(timing.get('tokens'))} tokens per measurement; "
              "times relative to nonoverlapping inference, averaged over window sizes "
              "(the paper used 16-512).</p></section>")


def _slopes_paper_tables() -> str:
    p = PAPER_003_TABLE1
    parts = [f"<h3>Paper: {html.escape(p['source'])}</h3>"]
    for g in p["groups"]:
        body = [[L] + row for L, row in zip(p["lengths"], g["ppl"])]
        parts.append(f"<h4>{html.escape(g['title'])}</h4>" + _table(["L_ex"] + g["labels"], body, "paper"))
    return "".join(parts)


def _section_slopes(results: dict, figures: dict, notes: dict) -> str:
    groups = _slope_groups(results)
    if not groups and results.get("experiment") != "alibi-slopes":
        return ""
    parts = ['<section id="slopes"><h2>ALiBi slopes and windowed attention (003 Table 1)</h2>']
    if not groups:
        parts.append(_missing("ALiBi-slope variants"))
    ev = results.get("eval") or {}
    for g, variants in groups.items():
        proto = _slopes_protocol(results, variants)
        parts.append(f"<h3>Ours: {html.escape(g)} ({html.escape(proto or 'not evaluated')})</h3>")
        if proto is None:
            parts.append(_missing(f"evaluation of the {g} variants"))
            continue
        reps = {v["pe"]: (ev.get(v["pe"]) or {}).get(proto) or {} for v in variants}
        lengths = sorted({r.get("length") for rep in reps.values() for r in rep.get("results") or []
                          if isinstance(r.get("length"), int)})
        body = []
        for L in lengths:
            row = [L]
            for v in variants:
                hit = next((r for r in reps[v["pe"]].get("results") or [] if r.get("length") == L), {})
                row.append(_fmt(_num(hit.get("ppl")), 3))
            body.append(row)
        parts.append(_table(["L_ex"] + [v.get("label") or v["pe"] for v in variants], body, "ppl"))
        parts.append(_figure_html(figures, notes, f"slopes_{_safe(g)}",
                                  CAPTIONS["slopes"].format(group=g, protocol=proto)))
    parts.append(_slopes_paper_tables())
    return "".join(parts) + "</section>"


_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1150px;color:#222;
 padding:0 1em;line-height:1.4}
h1{margin-bottom:.3em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
thead th{background:#f2f2f2}table.meta th{background:#f7f7f7;font-weight:600}
table.claims{font-size:1em;width:100%}table.claims td.status{font-size:1.4em;text-align:center;width:2em}
tr.ok td.status{color:#137333}tr.bad td.status{color:#c5221f}tr.na td.status{color:#888}
tr.ok{background:#eef8f0}tr.bad{background:#fdeeee}
table.theory td:last-child{font-size:.85em;color:#555;max-width:28em}
.missing{color:#a15c00}figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}code{font-size:.9em;word-break:break-all}
"""

# Lets a headless browser check that every figure loaded (tests/test_report.py).
_IMAGE_CHECK = """
window.addEventListener('load', function () {
  var bad = 0;
  for (var k = 0; k < document.images.length; k++) {
    var im = document.images[k];
    if (!(im.complete && im.naturalWidth > 0)) bad++;
  }
  document.body.dataset.images = bad ? 'broken:' + bad : 'ok';
});
"""


def render_html(results: dict, figures: dict, claims: list[dict], notes: dict | None = None) -> str:
    """The report as one HTML string (figures referenced by the relative paths in ``figures``)."""
    notes = notes or {}
    if results.get("experiment") == "alignment":  # 004 §5.2: no theory / perplexity / ERF sections
        body = [_section_header(results), _section_claims(claims), _section_missing(results, notes),
                _section_runs(results), alignment.section(results, figures, notes)]
    else:
        body = [
            _section_header(results),
            _section_claims(claims),
            _section_missing(results, notes),
            _section_theory(results),
            _section_runs(results),
            _section_ppl(results, figures, notes),
            _section_shapes(results, figures, notes),
            _section_erf(results, figures, notes),
            _section_timing(results),
            _section_slopes(results, figures, notes),
        ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>extrap report: {html.escape(str(results.get('experiment') or 'study'))}</title>"
            f"<style>{_CSS}</style></head>\n<body>\n" + "\n".join(b for b in body if b)
            + f"\n<script>{_IMAGE_CHECK}</script>\n</body></html>\n")


def write_report(results: dict, out_dir: str | os.PathLike) -> Path:
    """Write the figures and ``out_dir/report.html``; returns the report's path."""
    out_dir = Path(out_dir)
    notes: dict[str, str] = {}
    figures = write_figures(results, out_dir, notes)
    claims = compute_claims(results)
    path = out_dir / "report.html"
    atomic_write_text(path, render_html(results, figures, claims, notes))
    return path
