"""The report of ``extrap study --experiment extension``: its two claims, its goal line and its tables.

Claims (judged only when the model learned, :mod:`.gate`; never forced):

* "Methods that keep every distance within L_tr keep PPL flat": every distance-map method the extend theory
  keeps in distribution at every measured length (max distance <= L_tr − 1) must have no measured break
  (no length whose |Δppl|/ppl against its own L_tr exceeds δ beyond its noise).  ✘ on one that breaks.
* "A window without sinks breaks a RoPE model where sinks plus the same window do not" (StreamingLLM,
  Xiao et al. 2024): ``window`` must break, and ``sinks`` (the same L_tr keys per query, 4 of them the
  first) must not break there or before.

The goal line (issue 21): the in-distribution method (at the longest length) with the best passkey
accuracy there, against 0.9 × its accuracy at L_tr: met or not met, as measured.
"""

from __future__ import annotations

from extrap.report.gate import left_out_note, not_tested
from extrap.report.gate import split as gate_split
from extrap.report.values import fmt
from extrap.report.view import Cell, table
from extrap.results import Claim, StudyResults
from extrap.results.extension import ExtensionBlock, ExtensionMethod

FLAT = "Methods that keep every distance within L_tr keep PPL flat"
SINKS = "A window without sinks breaks a RoPE model where sinks plus the same window do not"
FLAT_SOURCE = "extrap theory --extend (max distance <= L_tr - 1); 000 Definition 0.1"
SINKS_SOURCE = "StreamingLLM, Xiao et al., ICLR 2024, Fig. 3"
GOAL_FRACTION = 0.9  # issue 21: retrieval at 16 × L_tr within 0.9 of retrieval at L_tr


def block(results: StudyResults) -> ExtensionBlock:
    return results.extension or ExtensionBlock()


def within(m: ExtensionMethod, lengths) -> bool:
    """In distribution at every measured length by the distance definition."""
    return m.basis == "distance" and len(m.in_distribution) == len(lengths) and all(m.in_distribution)


def gated(results: StudyResults, name: str, source: str) -> Claim | None:
    """The not-tested claim when the model did not learn (or that is unknown), else None."""
    b = block(results)
    gate = gate_split(results, [b.pe] if b.pe else [])
    return None if gate.learned else Claim(name, None, not_tested(results, gate), source, untested=True)


def claim_flat(results: StudyResults) -> Claim:
    b = block(results)
    kept = [m for m in b.methods.values() if within(m, b.lengths)]
    if not kept:
        return Claim(FLAT, None, "no measured method keeps every distance within L_tr", FLAT_SOURCE)
    stop = gated(results, FLAT, FLAT_SOURCE)
    if stop is not None:
        return stop
    said = [f"{m.name}: break {m.measured_break or 'none'}" + (" ✘" if m.measured_break else "") for m in kept]
    how = f"; break: the first length with |Δppl|/ppl > δ = {fmt(b.delta)} beyond its 95% interval"
    return Claim(FLAT, all(m.measured_break is None for m in kept), "; ".join(said) + how, FLAT_SOURCE)


def claim_sinks(results: StudyResults) -> Claim:
    b = block(results)
    w, s = b.methods.get("window"), b.methods.get("sinks")
    if w is None or s is None:
        return Claim(SINKS, None, "window and sinks were not both measured", SINKS_SOURCE)
    stop = gated(results, SINKS, SINKS_SOURCE)
    if stop is not None:
        return stop
    ok = w.measured_break is not None and (s.measured_break is None or s.measured_break > w.measured_break)
    ev = (
        f"window (last {b.train_length} keys): break {w.measured_break or 'none'}; sinks ({s.spec}): break "
        f"{s.measured_break or 'none'}; ppl at {max(b.lengths, default='–')}: window {fmt(last_ppl(w), 4)}, "
        f"sinks {fmt(last_ppl(s), 4)}" + left_out_note(results, gate_split(results, [b.pe]))
    )
    return Claim(SINKS, ok, ev, SINKS_SOURCE)


def last_ppl(m: ExtensionMethod) -> float | None:
    return m.ppl[-1].ppl if m.ppl else None


def extension_claims(results: StudyResults) -> list[Claim]:
    return [claim_flat(results), claim_sinks(results)]


def goal_line(results: StudyResults) -> str:
    """The issue's goal as measured: met / not met, or why it cannot be judged."""
    b = block(results)
    if not b.lengths:
        return "Goal (retrieval at the longest length within 0.9 of L_tr): no measurements"
    longest, L_tr = max(b.lengths), b.train_length
    head = f"Goal: the best in-distribution method's passkey accuracy at {longest} (L_tr × {longest // L_tr})"
    inside = [m for m in b.methods.values() if m.in_distribution[-1:] == (True,) and m.passkey_at(longest) is not None]
    if not inside:
        return f"{head}: no method is in distribution there with a passkey accuracy"
    best = max(inside, key=lambda m: m.passkey_at(longest))
    acc, ref = best.passkey_at(longest), best.passkey_at(L_tr)
    if not ref:
        return f"{head}: {best.name} {fmt(acc, 2)}, but its accuracy at L_tr is {fmt(ref, 2)}: not met"
    met = acc >= GOAL_FRACTION * ref
    return (
        f"{head} vs {GOAL_FRACTION} × its accuracy at L_tr: {best.name} {acc:.2f} vs {GOAL_FRACTION} × {ref:.2f} = "
        f"{GOAL_FRACTION * ref:.2f}: {'met' if met else 'not met'}"
    )


def ppl_cell(row) -> str | Cell:
    text = fmt(row.ppl, 4) + (f" ± {fmt(row.ppl * row.stderr, 2)}" if row.ppl and row.stderr is not None else "")
    if row.ratio is None:
        return text
    mark = {True: " ▲", False: "", None: " ?"}[row.above_delta]
    return Cell(text + mark, f"|Δppl|/ppl {fmt(row.ratio, 3)} ± {fmt(row.ratio_stderr, 2)} (one standard error)")


def length_header(b: ExtensionBlock) -> list[str]:
    return [f"{L}{' (L_tr)' if L == b.train_length else ''}" for L in b.lengths]


def ppl_table(results: StudyResults):
    b = block(results)
    body = []
    for name, m in b.methods.items():
        rows = {r.length: r for r in m.ppl}
        body.append([name] + [ppl_cell(rows[L]) if L in rows else "–" for L in b.lengths])
    return table(["method"] + length_header(b), body, "ppl")


def passkey_table(results: StudyResults):
    b = block(results)
    body = [[name] + [m.passkey_at(L) for L in b.lengths] for name, m in b.methods.items()]
    return table(["method"] + length_header(b), body)


def prediction_rows(results: StudyResults) -> tuple[list[str], list[list]]:
    """Per method: the predicted in-distribution length beside the measured break and passkey fall-off."""
    headers = ["method", "as run", "in distribution up to", "measured break", "passkey falls at"]
    rows, b = [], block(results)
    for name, m in b.methods.items():
        up_to = "any length" if m.predicted_length is None else m.predicted_length
        retrieves = bool(m.passkey_at(b.train_length))  # no fall-off can be read from 0 at L_tr
        falls = m.passkey_falloff or ("none" if retrieves else "no retrieval at L_tr")
        rows.append([name, m.spec or "–", f"{up_to} ({m.basis})", m.measured_break or "none", falls])
    return headers, rows


def extension_missing(results: StudyResults) -> list[str]:
    b = block(results)
    if not b.methods:
        return ["no extension results"]
    lack = [m for m in results.settings.get("methods", []) if m not in b.methods]
    return [f"no extension result for {', '.join(lack)}"] if lack else []


def markdown_rows(headers: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(str(fmt(c)).replace("|", "\\|") for c in row) + " |" for row in rows]


def markdown_table(results: StudyResults) -> list[str]:
    """Methods × lengths (ppl ± se / passkey accuracy) and the predictions, as Markdown (the README's block)."""
    b = block(results)
    body = []
    for name, m in b.methods.items():
        rows = {r.length: r for r in m.ppl}
        cells = []
        for L in b.lengths:
            r, acc = rows.get(L), m.passkey_at(L)
            ppl = "–" if r is None or r.ppl is None else f"{r.ppl:.2f}"
            ppl += f" ± {r.ppl * r.stderr:.2f}" if r is not None and r.ppl and r.stderr is not None else ""
            cells.append(f"{ppl} / {fmt(acc, 2) if acc is not None else '–'}")
        body.append([name, *cells])
    return markdown_rows(["method", *length_header(b)], body) + [""] + markdown_rows(*prediction_rows(results))
