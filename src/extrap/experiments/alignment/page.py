"""What alignment.html.j2 shows: every task's tables (004 Tables 4, 5, 9) and the figures; what is missing."""

from __future__ import annotations

from extrap.experiments.alignment.figures import CAPTIONS
from extrap.experiments.alignment.results import AlignmentBlock, blocks, length_key
from extrap.experiments.alignment.tables import accuracy_table, depth_table, tau_table
from extrap.report.values import fmt
from extrap.report.view import figure_ref, table
from extrap.results import Claim, StudyResults

SECTIONS = (("runs", "Training runs"), ("alignment", "Attention alignment on retrieval"))

# 004 Table 5 (Flan-T5-XL, L_tr = 512; the paper's column labels); topic's first P_max entry is blank in the source
PAPER_TABLE5 = {
    "passkey": {
        "labels": ["20k", "30k", "40k", "50k", "55k"],
        "unit": "sentences",
        "rows": [("w/ P_max", [0.85, 0.8, 0.75, 0.75, 0.75]), ("w/ H", [0.7, 0.65, 0.6, 0.6, 0.6])],
    },
    "line": {
        "labels": ["200", "300", "400", "500", "600", "680"],
        "unit": "lines",
        "rows": [("w/ P_max", [0.8, 0.75, 0.75, 0.7, 0.7, 0.7]), ("w/ H", [0.6, 0.55, 0.55, 0.5, 0.5, 0.5])],
    },
    "topic": {
        "labels": ["5", "10", "15", "20", "25"],
        "unit": "topics",
        "rows": [("w/ P_max", [None, 0.75, 0.7, 0.65, 0.65]), ("w/ H", [0.7, 0.55, 0.55, 0.5, 0.5])],
    },
}


def missing(results: StudyResults) -> list[str]:
    found = blocks(results)
    out = [] if any(b.models for b in found.values()) else ["no alignment results"]
    for task in results.tasks or []:
        if task not in found or not found[task].models:
            out.append(f"{task}: no alignment results")
    for task, al in found.items():
        lack = [pe for pe in results.pes if pe not in al.models]
        if al.models and lack:
            out.append(f"{task}: no alignment results for {', '.join(lack)}")
        for pe, mdl in al.models.items():
            out += [f"{task}/{pe} {k}: {v}" for k, v in mdl.errors.items()]
            got = {k for v in mdl.accuracy.values() for k in v}
            gone = [L for L in al.lengths if length_key(L) not in got]
            if gone:
                out.append(f"{task}/{pe}: not evaluated at {', '.join(map(str, gone))}")
    return out


def task_context(task: str, al: AlignmentBlock) -> dict:
    """One task's τ table (004 Table 5), accuracy table (Table 4) and depth table (Table 9)."""
    cols = [f"{L}{' (L_tr)' if L == al.train_length else ''}" for L in al.lengths]
    paper = PAPER_TABLE5.get(task)
    return {
        "task": task,
        "train_length": fmt(al.train_length),
        "tau": tau_table(al, cols),
        "paper": paper
        and {
            "unit": paper["unit"],
            "table": table(["τ"] + paper["labels"], [[lab] + v for lab, v in paper["rows"]], "paper"),
        },
        "accuracy": accuracy_table(al, cols),
        "ranked": any(m.rank_accuracy for m in al.models.values()),
        "depth": depth_table(al),
    }


def context(results: StudyResults, figures: dict, notes: dict) -> dict:
    """What alignment.html.j2 shows (``tasks`` empty: the section says what is missing)."""
    shown = {t: b for t, b in blocks(results).items() if b.models}
    if not shown:
        return {"tasks": []}
    first = next(iter(shown.values()))
    return {
        "names": ", ".join(shown),
        "n": fmt(first.n),
        "buckets": fmt(first.buckets),
        "rank": bool(first.rank),
        "probe_prompts": fmt(first.probe_prompts),
        "probe_tokens": fmt(first.probe_tokens),
        "probe_cap": fmt(first.probe_cap),
        "tasks": [task_context(t, al) for t, al in shown.items()],
        "figures": [
            figure_ref(figures, notes, name, CAPTIONS[name]) for name in ("alignment_accuracy", "alignment_tau")
        ],
    }


def anchor(results: StudyResults, claim: Claim, figures: dict) -> tuple[str, str]:
    """The τ figure decides the τ claims, the accuracy figure the others (the section where a figure is missing)."""
    fig, title = ("alignment_tau", "τ figure") if "τ" in claim.claim else ("alignment_accuracy", "accuracy figure")
    return (f"fig-{fig}", title) if fig in figures else ("alignment", dict(SECTIONS)["alignment"])
