"""The alignment study's claims (004 §5), per task: τ falls with length, P_max beats entropy, alignment helps."""

from __future__ import annotations

import itertools

from extrap.experiments.alignment.results import (
    MODES,
    AlignmentBlock,
    best_setting,
    blocks,
    length_key,
    mean_beyond,
    mean_tau,
)
from extrap.experiments.alignment.text import LABELS
from extrap.report.gate import MIN_TRAIN_ACC
from extrap.results import Claim, StudyResults

TAU_TOL = 1e-3  # Algorithm 1's refinement resolution (0.05 / 64 < 0.001): smaller τ changes are noise


def claim_tau_decreases(al: AlignmentBlock) -> Claim:
    name, src = "τ decreases as length grows", "004 Table 5, §5.2"
    L_tr = al.train_length or 0
    seqs, parts, flat = [], [], True
    for pe, mdl in al.models.items():
        for m in MODES:
            taus, srcs, edge = (getattr(mdl, k).get(m) or {} for k in ("tau", "tau_source", "at_grid_edge"))
            pts = sorted(
                (int(k), mean_tau(v), bool(edge.get(k)))
                for k, v in taus.items()
                if int(k) > L_tr and srcs.get(k) == "algorithm1" and v is not None
            )
            if len(pts) < 2:
                continue
            ok = all(b[1] <= a[1] + TAU_TOL for a, b in itertools.pairwise(pts))
            flat &= all(t >= 1 - TAU_TOL for _, t, _ in pts)
            seqs.append(ok)
            label = f"{pe} {m}{' (mean over layers)' if m == 'pmax-layer' else ''}"
            parts.append(
                f"{label}: " + " → ".join(f"{t:.3f}{'*' if e else ''}" for _, t, e in pts) + ("" if ok else " ✘")
            )
    if not seqs:
        return Claim(name, None, "fewer than two lengths beyond L_tr with an Algorithm 1 τ", src)
    ev = "; ".join(parts) + (
        f" (Algorithm 1 τ at each L > L_tr, increasing L; non-increasing within {TAU_TOL}"
        + ("; * at the grid edge 0.5 or 1, where the target is not bracketed)" if "*" in "".join(parts) else ")")
    )
    if flat:
        return Claim(name, False, ev + "; τ never drops below 1", src)
    return Claim(name, all(seqs), ev, src)


def eligible_models(al: AlignmentBlock) -> tuple[dict, list[str]]:
    """Models that retrieve at L_tr without alignment (accuracy >= MIN_TRAIN_ACC), and notes on the others."""
    L_tr = al.train_length
    ok, notes = {}, []
    for pe, mdl in al.models.items():
        a = (mdl.accuracy.get("none") or {}).get(length_key(L_tr)) if L_tr else None
        if a is None:
            notes.append(f"{pe}: no accuracy at L_tr")
        elif a < MIN_TRAIN_ACC:
            notes.append(f"{pe} left out: accuracy {a:.2f} at L_tr < {MIN_TRAIN_ACC} (did not learn the task)")
        else:
            ok[pe] = mdl
    return ok, notes


def compare_settings(al: AlignmentBlock, name: str, src: str, left: str | None, right: str) -> Claim:
    """Per model, mean accuracy over L > L_tr of ``left`` (None: the model's best aligned setting) vs ``right``.

    ✔ only when ``left`` is strictly higher for every model that retrieves at L_tr (a model
    whose two settings are both perfect has no headroom and is left out); ✘ when it is not for
    some model: a pooled mean would let one model's gain hide another's loss.
    """
    L_tr = al.train_length
    models, notes = eligible_models(al)
    if not models:
        return Claim(name, None, "; ".join(notes) or "no model was scored", src)
    verdicts, parts, pooled = [], [], {"left": [], "right": []}
    for pe, mdl in models.items():
        lft = left or best_setting(mdl.accuracy, L_tr)
        a, b = (mean_beyond(mdl.accuracy.get(lft), L_tr) if lft else None), mean_beyond(mdl.accuracy.get(right), L_tr)
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
        ev += (
            f" (mean over models: {sum(pooled['left']) / n:.3f} vs {sum(pooled['right']) / n:.3f}; "
            "the claim must hold for every model)"
        )
    if notes:
        ev = "; ".join(filter(None, [ev] + notes))
    return Claim(name, all(verdicts) if verdicts else None, ev or "no accuracy beyond L_tr", src)


def claims(results: StudyResults) -> list[Claim]:
    """The three claims of 004 §5 for every task (named "task: claim")."""
    src_acc = "004 Table 4, §5.4"
    out = []
    for task, al in (blocks(results) or {"passkey": AlignmentBlock()}).items():
        c2 = compare_settings(al, "pmax alignment beats entropy alignment", src_acc, "pmax", "entropy")
        c3 = compare_settings(al, "alignment improves accuracy beyond L_tr", src_acc, None, "none")
        if c3.ok is not None:
            c3.evidence = "each model's best of its 3 aligned settings; " + c3.evidence
        for c in (claim_tau_decreases(al), c2, c3):
            c.claim = f"{task}: {c.claim}"
            out.append(c)
    return out
