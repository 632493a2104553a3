"""The alignment study's figures: τ vs length (004 Figs. 3-5) and accuracy vs length (Table 4), per task and PE."""

from __future__ import annotations

from extrap.experiments.alignment.results import MODES, SETTINGS, blocks, length_key, mean_tau
from extrap.experiments.alignment.text import LABELS
from extrap.plotting import new_figure
from extrap.report.gate import MIN_TRAIN_ACC
from extrap.results import StudyResults

CAPTIONS = {
    "alignment_tau": "τ vs length (analogue of 004 Figs. 3-5), one row per task: markers, Algorithm 1 (× P_max, "
    "● entropy, + P_max per layer, mean over layers); lines, Prop. 1, Prop. 2 and the log-length "
    "rule log_L L_tr (values above 1.1 are off the scale: see the table). Faint markers: beyond the "
    "probe cap, the log-length τ.",
    "alignment_accuracy": "Exact-match accuracy (greedy, fraction of the prompts) vs length in tokens, without and "
    "with alignment, one row per task; each setting has its own marker and line style, so settings that score the "
    'same stay visible on top of each other; dashed: L_tr. A panel marked "did not learn the task" retrieves less '
    f"than {MIN_TRAIN_ACC} of the time at L_tr without alignment: the accuracy claims leave it out (analogue of "
    "004 Table 4).",
}
SETTING_STYLE = {  # marker, line style, size: identical curves still show every setting
    "none": ("o", "-", 7),
    "pmax": ("x", "--", 7),
    "entropy": ("s", ":", 4),
    "pmax-layer": ("+", "-.", 9),
}


def grid(results: StudyResults):
    """(figure, [(block, model, axes)]) with one row per task and one column per PE; (None, []) without models."""
    shown = {t: b for t, b in blocks(results).items() if b.models}
    if not shown:
        return None, []
    cols = max(len(b.models) for b in shown.values())
    fig = new_figure(4.2 * cols, 3.6 * len(shown))
    cells = []
    for r, (task, al) in enumerate(shown.items()):
        for c, (pe, mdl) in enumerate(al.models.items()):
            ax = fig.add_subplot(len(shown), cols, r * cols + c + 1)
            ax.set_title(f"{task}, {pe}", fontsize=9)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("L (tokens)")
            ax.grid(alpha=0.3)
            cells.append((al, mdl, ax))
    return fig, cells


def tau_markers(ax, mdl) -> None:
    """Algorithm 1's τ per mode; faint: the log-length τ used beyond the probe cap."""
    markers = {"pmax": "x", "entropy": "o", "pmax-layer": "+"}
    for m in MODES:
        src = mdl.tau_source.get(m) or {}
        pts = sorted((int(k), mean_tau(v), src.get(k)) for k, v in (mdl.tau.get(m) or {}).items() if v is not None)
        for measured in (True, False):
            sel = [(L, t) for L, t, s in pts if (s in ("algorithm1", "L_tr")) == measured]
            if sel:
                ax.scatter(
                    [L for L, _ in sel],
                    [t for _, t in sel],
                    marker=markers[m],
                    s=28,
                    color=f"C{MODES.index(m)}",
                    alpha=1.0 if measured else 0.35,
                    label=LABELS[m] if measured else None,
                    zorder=3,
                )


def tau_figure(results: StudyResults):
    fig, cells = grid(results)
    for al, mdl, ax in cells:
        L_tr = al.train_length or 1
        tau_markers(ax, mdl)
        for key, label, ls in (
            ("prop1", "Prop. 1", "-"),
            ("prop2", "Prop. 2", "--"),
            ("log-length", "log_L L_tr", ":"),
        ):
            pts = sorted((int(k), cf.tau(key)) for k, cf in mdl.closed_forms.items() if cf.tau(key) is not None)
            if pts:
                ax.plot(
                    [L_tr] + [L for L, _ in pts], [1.0] + [t for _, t in pts], ls=ls, color="grey", lw=1, label=label
                )
        ax.set_ylim(0.0, 1.1)  # closed forms above 1 (no alignment needed by their model) run off the top
        ax.set_ylabel("softmax temperature τ (1: unaligned)")
        ax.legend(fontsize=6)
    return fig


def retrieves(al, mdl) -> bool | None:
    """Whether the model retrieves at L_tr without alignment as often as the accuracy claims need (None: not scored)."""
    a = (mdl.accuracy.get("none") or {}).get(length_key(al.train_length)) if al.train_length else None
    return None if not isinstance(a, (int, float)) else a >= MIN_TRAIN_ACC


def accuracy_figure(results: StudyResults):
    fig, cells = grid(results)
    drawn = False
    for al, mdl, ax in cells:
        for n, st in enumerate(SETTINGS):
            pts = sorted((int(k), v) for k, v in (mdl.accuracy.get(st) or {}).items() if isinstance(v, (int, float)))
            if pts:
                marker, ls, ms = SETTING_STYLE.get(st, ("o", "-", 5))
                xs, ys = [L for L, _ in pts], [a for _, a in pts]
                ax.plot(xs, ys, marker=marker, ls=ls, ms=ms, mfc="none", color=f"C{n}", label=LABELS[st])
                drawn = True
        ax.axvline(al.train_length or 1, color="grey", ls="--", lw=1)
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("exact-match accuracy (fraction)")
        if retrieves(al, mdl) is False:
            ax.set_title(f"{ax.get_title()}\ndid not learn the task", fontsize=8)
        ax.legend(fontsize=6)
    return fig if drawn else None


def figures(results: StudyResults, notes: dict, out_dir) -> list:
    return [("alignment_accuracy", lambda: accuracy_figure(results)), ("alignment_tau", lambda: tau_figure(results))]
