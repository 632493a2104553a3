"""The figures of the bias shapes themselves: exp(RPE) heatmaps (000 Fig. 7) and TRF curves (000 Fig. 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extrap.experiments.extrapolation.lookup import eps_keys, num_heads, widest_head_trf
from extrap.experiments.extrapolation.results import all_pes, block
from extrap.experiments.extrapolation.values import HEATMAP_HEAD, HEATMAP_LENGTH, MAX_HEATMAPS
from extrap.plotting import new_figure
from extrap.results import StudyResults
from extrap.theory.plots import HEATMAP_CMAP, weight_direction

CAPTIONS = {
    "heatmaps": "exp(r(i − j)), the weight that the bias gives the key at column j for the query at row i before "
    "the softmax, for head {head} of {heads} over the first {n} positions (analogue of 000 Fig. 7); {direction} "
    "= more weight ({cmap} colormap), white above the diagonal: future keys, masked. Each panel has its own colour "
    "scale (its colour bar). {note}",
    "trf_curves": "TRF n(ε) in tokens (000 Eq. 22) of the widest head of each PE whose series converges, at the "
    "initial parameters, against ε; log axes, ε decreasing to the right. A higher curve is a larger TRF at that ε "
    "(analogue of 000 Fig. 6, which divides every curve by one constant). {note}",
    "trf_curves_fallback": "TRF n(ε) in tokens of each head's series, largest over heads, at the initial parameters "
    "and the ε values in results.json, on log axes, ε decreasing to the right; a higher curve is a larger TRF "
    "(analogue of 000 Fig. 6); {why}.",
}


def colormap(name: str):
    import matplotlib

    return matplotlib.colormaps[name]


def via_theory_plots(name: str, ax, *args, **kw) -> str | None:
    """Draw with ``extrap.theory.plots.<name>(*args, ax=ax, **kw)``.

    Returns None when it drew, else why not (module or function missing, or a
    signature other than the one assumed here); the caller then falls back to
    the data in the results, and says so in the caption.
    """
    try:
        from extrap.theory import plots
    except ImportError:
        return f"extrap.theory.plots.{name} unavailable"
    fn = getattr(plots, name, None)
    if fn is None:
        return f"extrap.theory.plots.{name} unavailable"
    try:
        fn(*args, ax=ax, **kw)
    except TypeError as e:
        ax.clear()
        return f"extrap.theory.plots.{name} could not be called ({e})"
    return None


def bias_schemes(results: StudyResults) -> list[tuple[str, Any]]:
    from extrap import positional

    out = []
    for pe in all_pes(results):
        try:
            scheme = positional.get(pe)
        except Exception:  # a spec this version cannot build: nothing to draw
            continue
        if scheme.adds_bias:
            out.append((pe, scheme))
    return out[:MAX_HEATMAPS]


def trained_values(results: StudyResults, study_dir: Path | None, pe: str) -> dict | None:
    """Layer-0 bias values of ``pe``'s trained model, or None (no run folder, or it does not load)."""
    path = results.run_path(pe, study_dir)
    if path is None:
        return None
    try:
        import extrap

        layers = extrap.load(path).model.bias_values()
        return {k: v.detach().double() for k, v in layers[0].items()} if layers else None
    except Exception:  # a half-written or foreign run: fall back to the initial values
        return None


def heatmaps_figure(results: StudyResults, notes: dict, study_dir: Path | None = None):
    schemes = bias_schemes(results)
    if not schemes:
        return None
    heads = num_heads(results, study_dir)
    cols = min(4, len(schemes))
    rows = -(-len(schemes) // cols)
    fig = new_figure(2.6 * cols, 2.5 * rows)
    trained, init, fallback = [], [], None
    for k, (pe, scheme) in enumerate(schemes):
        ax = fig.add_subplot(rows, cols, k + 1)
        learned = scheme.learned
        values = trained_values(results, study_dir, pe) if learned else None
        extra = {"values": values} if values is not None else {}
        why = via_theory_plots("heatmap", ax, pe, head=HEATMAP_HEAD, size=HEATMAP_LENGTH, num_heads=heads, **extra)
        fallback = why or fallback
        ax.xaxis.label.set_fontsize(7)
        ax.yaxis.label.set_fontsize(7)
        ax.tick_params(labelsize=6)
        if learned:
            (trained if values is not None else init).append(pe)
        tag = " (trained, layer 0)" if pe in trained else " (init)" if pe in init else ""
        ax.set_title(pe + tag, fontsize=8)
    note = []
    if trained:
        note.append(f"Learned PEs {', '.join(trained)}: trained values of layer 0.")
    if init:
        note.append(f"Learned PEs {', '.join(init)}: initial values (no trained run found).")
    if fallback:
        note.append(f"Some panels could not be drawn: {fallback}.")
    notes["heatmaps"] = CAPTIONS["heatmaps"].format(
        head=HEATMAP_HEAD,
        n=HEATMAP_LENGTH,
        heads=heads,
        direction=weight_direction(colormap(HEATMAP_CMAP)),
        cmap=HEATMAP_CMAP,
        note=" ".join(note),
    )
    return fig


def trf_curves_figure(results: StudyResults, notes: dict):
    rows = block(results).theory_by_pe()
    initial = {pe: [r for r in rs if not r.trained] for pe, rs in rows.items()}  # the formulas, as 000 Fig. 6
    convergent = [pe for pe, rs in initial.items() if rs and all(r.verdict == "converges" for r in rs)]
    if not convergent:
        return None
    fig = new_figure(6.4, 4.0)
    ax = fig.add_subplot()
    why = via_theory_plots("trf_curves", ax, convergent, num_heads=num_heads(results), head=None)
    if why is None:
        learned = [pe for pe in convergent if any(r.trained for r in rows[pe])]
        note = f"Trained values of {', '.join(learned)}: see the theory table." if learned else ""
        notes["trf_curves"] = CAPTIONS["trf_curves"].format(note=note).strip()
        return fig
    # fallback: the TRFs the study already computed, at the ε values it used
    drawn = False
    for pe in convergent:
        pts = [(float(e), v) for e in eps_keys(initial[pe]) if (v := widest_head_trf(initial[pe], e)) is not None]
        if pts:
            ax.plot([e for e, _ in pts], [v for _, v in pts], marker="o", label=pe)
            drawn = True
    if not drawn:
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")  # log axes instead of 000's normalisation: PEs stay comparable
    ax.invert_xaxis()  # smaller ε = stricter = larger field, to the right
    ax.set_xlabel("ε (bias mass allowed beyond the receptive field)")
    ax.set_ylabel("TRF n(ε) (tokens)")
    ax.set_title("Theoretical receptive field vs ε")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    notes["trf_curves"] = CAPTIONS["trf_curves_fallback"].format(why=why)
    return fig
