"""The alignment study's tables (004 Tables 4, 5, 9) for the HTML page, and as Markdown (:func:`markdown_tables`)."""

from __future__ import annotations

from extrap.experiments.alignment.results import (
    MODES,
    SETTINGS,
    AlignmentBlock,
    blocks,
    length_key,
    mean_beyond,
    mean_tau,
)
from extrap.experiments.alignment.text import LABELS, closed_form_text, closed_form_value, tau_text
from extrap.report.values import fmt
from extrap.report.view import Cell, Table, table
from extrap.results import StudyResults

CLOSED_FORMS = (("prop1", "Prop. 1 (P_max)"), ("prop2", "Prop. 2 (entropy)"), ("log-length", "log-length log_L L_tr"))


def tau_cell(t, source: str | None, edge: bool) -> str | Cell:
    if t is None:
        return "–"
    marks = ("†" if source and source.startswith("log-length") else "") + ("*" if edge else "")
    if isinstance(t, list):
        return Cell(f"{mean_tau(t):.3f}{marks}", f"per layer: {tau_text(t)}")
    return tau_text(t) + marks


def tau_table(al: AlignmentBlock, cols: list[str]) -> Table:
    rows = []
    for pe, mdl in al.models.items():
        for m in MODES:
            taus, src, edge = (getattr(mdl, k).get(m) or {} for k in ("tau", "tau_source", "at_grid_edge"))
            rows.append(
                [pe, f"Algorithm 1, {LABELS[m]}" + (" (mean)" if m == "pmax-layer" else "")]
                + [
                    tau_cell(taus.get(length_key(L)), src.get(length_key(L)), edge.get(length_key(L), False))
                    for L in al.lengths
                ]
            )
        for key, label in CLOSED_FORMS:
            rows.append(
                [pe, label]
                + [
                    closed_form_text(
                        1.0 if L == al.train_length else closed_form_value(mdl.closed_forms.get(length_key(L)), key)
                    )
                    for L in al.lengths
                ]
            )
    return table(["PE", "τ from"] + cols, rows, "tau")


def accuracy_table(al: AlignmentBlock, cols: list[str]) -> Table:
    rows = []
    for pe, mdl in al.models.items():
        for method, acc in (("greedy", mdl.accuracy), ("rank", mdl.rank_accuracy or {})):
            for st in SETTINGS:
                if acc.get(st):
                    rows.append(
                        [pe, method, LABELS[st]]
                        + [fmt(acc[st].get(length_key(L)), 3) for L in al.lengths]
                        + [fmt(mean_beyond(acc[st], al.train_length), 3)]
                    )
    return table(["PE", "scoring", "setting"] + cols + ["mean L > L_tr"], rows, "accuracy")


def depth_table(al: AlignmentBlock) -> Table | None:
    rows, buckets = [], []
    for pe, mdl in al.models.items():
        d = mdl.depth
        buckets = d.buckets or buckets
        for st in [s for s in ("none", d.best_setting) if s]:
            for L in al.lengths:
                row = (d.by_length.get(st) or {}).get(length_key(L))
                if row is not None and L > (al.train_length or 0):
                    rows.append([pe, LABELS[st], L] + [fmt(v, 3) for v in row])
            pooled = d.pooled_beyond.get(st)
            if pooled is not None:
                rows.append([pe, LABELS[st], "all L > L_tr"] + [fmt(v, 3) for v in pooled])
    if not rows:
        return None
    return table(["PE", "setting", "L"] + [f"depth {lo:.1f}–{hi:.1f}" for lo, hi in buckets], rows, "depth")


def markdown_tau_rows(al: AlignmentBlock, pe: str, mdl) -> list[str]:
    lines = []
    for m in MODES:
        row = []
        for L in al.lengths:
            k = length_key(L)
            t, s, e = (
                (mdl.tau.get(m) or {}).get(k),
                (mdl.tau_source.get(m) or {}).get(k) or "",
                (mdl.at_grid_edge.get(m) or {}).get(k),
            )
            row.append(
                "–" if t is None else f"{mean_tau(t):.3f}" + ("†" if s.startswith("log") else "") + ("*" if e else "")
            )
        lines.append(f"| {pe} | {LABELS[m]}{' (mean)' if m == 'pmax-layer' else ''} | " + " | ".join(row) + " |")
    for key, label in (("prop1", "Prop. 1"), ("prop2", "Prop. 2"), ("log-length", "log-length")):
        row = [
            closed_form_text(
                1.0 if L == al.train_length else closed_form_value(mdl.closed_forms.get(length_key(L)), key)
            )
            for L in al.lengths
        ]
        lines.append(f"| {pe} | {label} | " + " | ".join(row) + " |")
    return lines


def markdown_accuracy_rows(al: AlignmentBlock, pe: str, mdl) -> list[str]:
    lines = []
    for method, table_ in (("greedy", mdl.accuracy), ("rank", mdl.rank_accuracy or {})):
        for st in SETTINGS:
            acc = table_.get(st) or {}
            if not acc:
                continue
            cells = ["–" if acc.get(length_key(L)) is None else f"{acc[length_key(L)]:.3f}" for L in al.lengths]
            mb = mean_beyond(acc, al.train_length)
            lines.append(
                f"| {pe} | {method} | {LABELS[st]} | "
                + " | ".join(cells)
                + f" | {'–' if mb is None else f'{mb:.3f}'} |"
            )
    return lines


def markdown_tables(results: StudyResults) -> str:
    """The τ and accuracy tables of every task as Markdown (for a README or a message)."""
    lines = []
    for task, al in blocks(results).items():
        cols = [f"{L}" + (" (L_tr)" if L == al.train_length else "") for L in al.lengths]
        lines += [
            f"**{task}** (L_tr = {al.train_length})",
            "",
            "| PE | τ from | " + " | ".join(cols) + " |",
            "|---|---|" + "---|" * len(cols),
        ]
        for pe, mdl in al.models.items():
            lines += markdown_tau_rows(al, pe, mdl)
        lines += [
            "",
            "| PE | scoring | setting | " + " | ".join(cols) + " | mean L > L_tr |",
            "|---|---|---|" + "---|" * (len(cols) + 1),
        ]
        for pe, mdl in al.models.items():
            lines += markdown_accuracy_rows(al, pe, mdl)
        lines.append("")
    return "\n".join(lines)
