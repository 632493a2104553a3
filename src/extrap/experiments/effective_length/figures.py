"""The effective-length study's figures: each model's needle heatmap per task (score by depth × length,
:func:`extrap.tasks.ruler.heatmap.heatmap_figure`, the figure of ``extrap task score --heatmap``), and
perplexity beside LongPPL against length."""

from __future__ import annotations

from extrap.experiments.effective_length.results import block
from extrap.plotting import new_figure
from extrap.results import StudyResults, slug
from extrap.theory.plots import curve_style

HEATMAP_CAPTION = (
    "{pe}, {task}: mean score (rank scoring, 1 when the true answer outscores every candidate) by needle depth "
    "(rows, the needle's position as a fraction of the haystack) and length (columns); dashed: L_tr; blank: no "
    "example. The title gives the task's effective length (relative form, {threshold})."
)
PPL_CAPTION = (
    "Perplexity (solid) and LongPPL (dotted, the model as its own evaluator: Fang et al. 2025's key tokens) per "
    "token against length (log₂ axis), nonoverlapping chunks; dashed vertical line: L_tr."
)


def heatmap_name(pe: str, task: str) -> str:
    return f"heatmap_{slug(pe)}_{slug(task)}"


def heatmap_plan(results: StudyResults, notes: dict) -> list:
    """(name, draw) of every (model, task) heatmap; a task without a needle depth has none."""
    from extrap.tasks.ruler.heatmap import heatmap_figure

    b, plan = block(results), []
    for pe, m in b.models.items():
        for t in m.ruler.tasks if m.ruler is not None else ():
            if not any(r.by_depth for r in t.results):
                continue
            name = heatmap_name(pe, t.task)
            notes[name] = HEATMAP_CAPTION.format(pe=pe, task=t.task, threshold=b.threshold)
            plan.append((name, lambda t=t: heatmap_figure(t, b.train_length)))
    return plan


def ppl_figure(results: StudyResults):
    """Perplexity and LongPPL against length, or None when no model has them."""
    b = block(results)
    models = [(pe, m) for pe, m in b.models.items() if m.longppl is not None and m.longppl.results]
    if not models:
        return None
    fig = new_figure(6.4, 4.0)
    ax = fig.add_subplot()
    for k, (pe, m) in enumerate(models):
        style = curve_style(k)
        rows = [r for r in m.longppl.results if r.ppl is not None]
        ax.plot([r.length for r in rows], [r.ppl for r in rows], marker="o", ms=3, color=style.color, label=pe)
        keyed = [r for r in rows if r.longppl is not None]
        ax.plot([r.length for r in keyed], [r.longppl for r in keyed], marker="s", ms=3, color=style.color, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    if isinstance(b.train_length, int):
        ax.axvline(b.train_length, color="grey", ls="--", lw=1)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("perplexity (solid), LongPPL (dotted)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def figures(results: StudyResults, notes: dict, out_dir) -> list:
    """Every figure of the experiment, for :func:`extrap.report.figures.figure_plan`."""
    return [("efflen_ppl", lambda: ppl_figure(results)), *heatmap_plan(results, notes)]
