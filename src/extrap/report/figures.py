"""The report's figures as PNG and SVG (matplotlib's object API: no pyplot state)."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path
from typing import Any, Callable

from extrap.io import atomic_write_bytes
from extrap.report.results import (HEATMAP_HEAD, HEATMAP_LENGTH, MAX_HEATMAPS, PROTOCOLS, _eps_keys, _erf_table, _num,
                                   _pes, _run_path, _safe, _slope_groups, _slopes_protocol, _trf_at, num_heads,
                                   theory_rows)


CAPTIONS = {
    "ppl": "Perplexity vs evaluation length, protocol {protocol}; dashed line: training length "
           "(analogue of 000 Figs. 3/4).",
    "heatmaps": "exp(RPE) for head {head} of {heads} over the first {n} positions, darker = more weight "
                "(analogue of 000 Fig. 7). {note}",
    "trf_curves": "Normalised TRF curves over ε (analogue of 000 Fig. 6). {note}",
    "trf_curves_fallback": "TRF n(ε) of each head's series, largest over heads, at the ε values in results.json, "
                           "on log axes (analogue of 000 Fig. 6, which normalises instead); {why}.",
    "trf_erf": "TRF beside gradient and attention ERF, each normalised by its maximum over PEs "
               "(analogue of 000 Figs. 5-6).",
    "grad_curves": "Cumulative normalised gradient of the k most recent tokens when predicting the last "
                   "token; dotted line: 0.99, dashed line: training length (analogue of 003 Fig. 4).",
    "slopes": "ALiBi-slope experiment '{group}': perplexity vs length ({protocol}), cf. 003 Table 1.",
}


def _new_figure(w: float = 6.4, h: float = 4.0):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), dpi=100, layout="constrained")


def _save(fig, out_dir: Path, name: str) -> dict[str, str]:
    """PNG and SVG of ``fig`` under ``out_dir/figures``, written atomically; paths relative to out_dir."""
    paths = {}
    for ext in ("png", "svg"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=110 if ext == "png" else None, metadata=_plot_metadata(ext))
        rel = f"figures/{name}.{ext}"
        atomic_write_bytes(out_dir / rel, buf.getvalue())
        paths[ext] = rel
    return paths


def _plot_metadata(ext: str) -> dict:
    # no timestamps or version strings: the same results give the same files
    return {"Software": None} if ext == "png" else {"Date": None, "Creator": None}


def _series(rep: dict) -> tuple[list[int], list[float]]:
    """(lengths, ppl) of one protocol report, finite points only."""
    pts = [(r.get("length"), _num(r.get("ppl"))) for r in rep.get("results") or []]
    pts = sorted((L, p) for L, p in pts if isinstance(L, int) and p is not None)
    return [L for L, _ in pts], [p for _, p in pts]


def _ppl_axes(ax, curves: list[tuple[str, list[int], list[float]]], train_length, title: str) -> None:
    ys = [p for _, _, ps in curves for p in ps]
    for label, xs, ps in curves:
        ax.plot(xs, ps, marker="o", ms=3, label=label)
    ax.set_xscale("log", base=2)
    if ys and min(ys) > 0 and max(ys) / min(ys) > 20:  # exploding PEs would flatten the rest
        ax.set_yscale("log")
    if isinstance(train_length, int):
        ax.axvline(train_length, color="grey", ls="--", lw=1)
    ax.set_xlabel("evaluation length L_ex (tokens)")
    ax.set_ylabel("perplexity")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)


def _fig_ppl(results: dict, protocol: str):
    curves = []
    for pe in _pes(results):
        rep = ((results.get("eval") or {}).get(pe) or {}).get(protocol)
        if rep:
            xs, ps = _series(rep)
            if xs:
                curves.append((pe, xs, ps))
    if not curves:
        return None
    fig = _new_figure()
    _ppl_axes(fig.add_subplot(), curves, results.get("train_length"), f"PPL vs length ({protocol})")
    return fig


def _via_theory_plots(name: str, ax, *args, **kw) -> str | None:
    """Draw with ``extrap.theory.plots.<name>(*args, ax=ax, **kw)``.

    Returns None when it drew, else why not (module or function missing, or a
    signature other than the one assumed here); the caller then falls back to
    the data in results.json or to the registry, and says so in the caption.
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


def _bias_schemes(results: dict) -> list[tuple[str, Any]]:
    from extrap import positional

    out = []
    for pe in _pes(results):
        try:
            scheme = positional.get(pe)
        except Exception:  # a spec this version cannot build: nothing to draw
            continue
        if scheme.kind == "bias" and not getattr(scheme, "is_identity", False):
            out.append((pe, scheme))
    return out[:MAX_HEATMAPS]


def _is_learned(scheme, heads: int) -> bool:
    return any(p.learnable for p in scheme.params(heads))






def _trained_values(results: dict, out_dir: Path | None, pe: str) -> dict | None:
    """Layer-0 bias values of ``pe``'s trained model, or None (no run folder, or it does not load)."""
    path = _run_path(results, out_dir, pe)
    if path is None:
        return None
    try:
        import extrap

        attn = extrap.load(path).model.blocks[0].attn
        return {k: v.detach().double() for k, v in attn.bias_values().items()}
    except Exception:  # a half-written or foreign run: fall back to the initial values
        return None


def _fig_heatmaps(results: dict, notes: dict, out_dir: Path | None = None):
    schemes = _bias_schemes(results)
    if not schemes:
        return None
    heads = num_heads(results, out_dir)
    cols = min(4, len(schemes))
    rows = -(-len(schemes) // cols)
    fig = _new_figure(2.6 * cols, 2.5 * rows)
    trained, init, fallback = [], [], None
    for k, (pe, scheme) in enumerate(schemes):
        ax = fig.add_subplot(rows, cols, k + 1)
        values = _trained_values(results, out_dir, pe) if _is_learned(scheme, heads) else None
        extra = {"values": values} if values is not None else {}
        why = _via_theory_plots("heatmap", ax, pe, head=HEATMAP_HEAD, size=HEATMAP_LENGTH, num_heads=heads,
                                **extra)
        if why is not None:
            fallback = why
        ax.xaxis.label.set_fontsize(7)
        ax.yaxis.label.set_fontsize(7)
        ax.tick_params(labelsize=6)
        if _is_learned(scheme, heads):
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
    notes["heatmaps"] = CAPTIONS["heatmaps"].format(head=HEATMAP_HEAD, n=HEATMAP_LENGTH, heads=heads,
                                                    note=" ".join(note))
    return fig


def _fig_trf_curves(results: dict, notes: dict):
    rows = theory_rows(results)
    convergent = [pe for pe, rs in rows.items() if all(r.get("verdict") == "converges" for r in rs)]
    if not convergent:
        return None
    fig = _new_figure()
    ax = fig.add_subplot()
    why = _via_theory_plots("trf_curves", ax, convergent, num_heads=num_heads(results))
    if why is None:
        notes["trf_curves"] = CAPTIONS["trf_curves"].format(note="Curves from extrap.theory.plots.")
        return fig
    # fallback: the TRFs the study already computed, at the ε values it used
    drawn = False
    for pe in convergent:
        pts = [(float(e), v) for e in _eps_keys(rows[pe]) if (v := _trf_at(rows[pe], e)) is not None]
        if pts:
            ax.plot([e for e, _ in pts], [v for _, v in pts], marker="o", label=pe)
            drawn = True
    if not drawn:
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")  # log axes instead of 000's normalisation: PEs stay comparable
    ax.invert_xaxis()  # smaller ε = stricter = larger field, to the right
    ax.set_xlabel("ε")
    ax.set_ylabel("TRF n(ε) (tokens)")
    ax.set_title("Theoretical receptive field vs ε")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    notes["trf_curves"] = CAPTIONS["trf_curves_fallback"].format(why=why)
    return fig




def _fig_trf_erf(results: dict):
    table = _erf_table(results)
    metrics = [("trf", "TRF"), ("grad_erf", "grad ERF"), ("attn_erf", "attn ERF")]
    metrics = [(k, lab) for k, lab in metrics if any(r[k] for r in table)]
    if not table or not metrics:
        return None
    fig = _new_figure(max(6.4, 0.9 * len(table) + 2), 4.0)
    ax = fig.add_subplot()
    width = 0.8 / len(metrics)
    vals_all = []
    for m, (key, label) in enumerate(metrics):
        top = max(r[key] for r in table if r[key] is not None)
        ys = [(r[key] / top) if r[key] is not None else 0.0 for r in table]
        vals_all += [y for y in ys if y > 0]
        ax.bar([k + (m - (len(metrics) - 1) / 2) * width for k in range(len(table))], ys, width, label=label)
    if vals_all and min(vals_all) < 0.01:  # a huge TRF (Type1 at small ε) would hide the rest
        ax.set_yscale("log")
    ax.set_xticks(range(len(table)), [r["pe"] for r in table], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("value / max over PEs")
    ax.set_title("TRF vs ERF")
    ax.legend(fontsize=7)
    return fig


def _fig_grad_curves(results: dict):
    curves = [(pe, e["grad_curve"]) for pe, e in (results.get("erf") or {}).items()
              if e and isinstance(e.get("grad_curve"), list) and e["grad_curve"]]
    if not curves:
        return None
    fig = _new_figure()
    ax = fig.add_subplot()
    for pe, curve in curves:
        ys = [_num(y) for y in curve]
        ax.plot(range(1, len(ys) + 1), [y if y is not None else math.nan for y in ys], label=pe)
    ax.set_xscale("log", base=2)
    ax.axhline(0.99, color="grey", ls=":", lw=1)
    if isinstance(results.get("train_length"), int):
        ax.axvline(results["train_length"], color="grey", ls="--", lw=1)
    ax.set_xlabel("k most recent context tokens")
    ax.set_ylabel("cumulative normalised gradient")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return fig






def _fig_slopes(results: dict, group: str, variants: list[dict], notes: dict):
    proto = _slopes_protocol(results, variants)
    if proto is None:
        return None
    curves = []
    for v in variants:
        rep = ((results.get("eval") or {}).get(v["pe"]) or {}).get(proto)
        xs, ps = _series(rep or {})
        if xs:
            curves.append((v.get("label") or v["pe"], xs, ps))
    if not curves:
        return None
    fig = _new_figure()
    _ppl_axes(fig.add_subplot(), curves, results.get("train_length"), f"ALiBi slopes: {group} ({proto})")
    notes[f"slopes_{_safe(group)}"] = CAPTIONS["slopes"].format(group=group, protocol=proto)
    return fig




def _figure_plan(results: dict, notes: dict, out_dir: Path) -> list[tuple[str, Callable[[], Any]]]:
    if results.get("experiment") == "alignment":
        from extrap.report.alignment import figure_plan  # here: that module draws with _new_figure

        return figure_plan(results)
    plan = [(f"ppl_{p}", (lambda p=p: _fig_ppl(results, p))) for p in PROTOCOLS]
    plan += [("heatmaps", lambda: _fig_heatmaps(results, notes, out_dir)),
             ("trf_curves", lambda: _fig_trf_curves(results, notes)),
             ("trf_erf", lambda: _fig_trf_erf(results)),
             ("grad_curves", lambda: _fig_grad_curves(results))]
    plan += [(f"slopes_{_safe(g)}", (lambda g=g, vs=vs: _fig_slopes(results, g, vs, notes)))
             for g, vs in _slope_groups(results).items()]
    return plan


def write_figures(results: dict, out_dir: str | os.PathLike, notes: dict | None = None) -> dict[str, dict]:
    """Draw every figure the data allow: {name: {"png": rel, "svg": rel}} (paths relative to out_dir).

    A figure whose data are missing is skipped; one that fails to draw is skipped
    too, with the error in ``notes[name]`` so the report can show it.
    """
    out_dir = Path(out_dir)
    notes = notes if notes is not None else {}
    written = {}
    for name, build in _figure_plan(results, notes, out_dir):
        try:
            fig = build()
            if fig is not None:
                written[name] = _save(fig, out_dir, name)
        except Exception as e:  # one broken figure must not cost the whole report
            notes[f"error:{name}"] = f"{type(e).__name__}: {e}"
    return written

