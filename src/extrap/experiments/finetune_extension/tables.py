"""The tables of the fine-tuned extension study (page and README): LCEG's Table 2 layout, methods × lengths."""

from __future__ import annotations

from extrap.experiments.finetune_extension.results import FtResult, block
from extrap.report.values import fmt
from extrap.results import StudyResults


def ruler_at(m: FtResult, task: str, length: int) -> float | None:
    t = next((t for t in m.ruler if t.task == task), None)
    r = None if t is None else next((r for r in t.results if r.length == length), None)
    return None if r is None else r.score


def effective(m: FtResult, task: str) -> int | None:
    t = next((t for t in m.ruler if t.task == task), None)
    return None if t is None else t.effective_length.length


def cell(m: FtResult, length: int) -> str:
    """PPL ± se / passkey / niah_single / vt / LongPPL at one length."""
    p = next((r for r in m.ppl if r.length == length), None)
    ppl = "–" if p is None or p.ppl is None else f"{p.ppl:.2f}" + (f" ± {p.ppl * p.stderr:.2f}" if p.stderr else "")
    lp = next((r.longppl for r in m.longppl if r.length == length), None)
    parts = [m.passkey_at(length), ruler_at(m, "niah_single", length), ruler_at(m, "vt", length)]
    return " / ".join([ppl, *(fmt(x, 2) for x in parts), fmt(lp, 2)])


def header(results: StudyResults) -> list[str]:
    b = block(results)
    return ["method", "group"] + [f"{L}{' (L_tr)' if L == b.train_length else ''}" for L in b.lengths]


def main_rows(results: StudyResults) -> list[list]:
    b = block(results)
    return [[n, "approximate" if m.approximate else "exact", *(cell(m, L) for L in b.lengths)]
            for n, m in b.methods.items()]  # fmt: skip


THEORY_HEADER = ["method", "as run", "in distribution up to", "measured break", "passkey falls at",
                 "effective niah_single", "effective vt", "fine-tune loss"]  # fmt: skip


def theory_rows(results: StudyResults) -> list[list]:
    """Per method: the theory's in-distribution length beside the measured break, fall-off and effective lengths."""
    rows = []
    for n, m in block(results).methods.items():
        up_to = "any measured length" if m.predicted_length is None else m.predicted_length
        up_to = "not closed" if m.basis == "none" else f"{up_to} ({m.basis})"
        rows.append([n, m.as_run, up_to, m.measured_break or "none", m.passkey_falloff or "none",
                     effective(m, "niah_single"), effective(m, "vt"), fmt(m.train_loss, 4)])  # fmt: skip
    return rows


CELL_NOTE = "Cells: last-token PPL ± se / passkey / niah_single / vt / LongPPL."
