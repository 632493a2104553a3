"""Figures, the claims checklist and a self-contained HTML report for ``extrap study``.

Input is the ``results.json`` dict written by :mod:`extrap.study`; every section
of it may be missing or partial (a run that failed, a study without ERF), and the
report then says what is missing instead of failing.

* :func:`compute_claims` checks the papers' claims against our numbers (000 =
  Qin et al. 2024, 003 = Chi et al. 2023).  A claim is ``True`` only when the
  data reproduce it, ``False`` when they contradict it, ``None`` when the data
  needed are missing: nothing is forced.
* :func:`write_figures` draws the analogues of 000 Figs. 3/4 (PPL vs length),
  5 (ERF), 6 (normalised TRF curves), 7 (exp(RPE) heatmaps) and 003 Fig. 4
  (cumulative normalised gradient) as PNG and SVG.
* :func:`write_report` writes the figures and ``report.html`` (inline CSS, no
  external resources; images by relative path).
"""

from __future__ import annotations

import html
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Callable

from extrap.io import atomic_write_bytes, atomic_write_text

PROTOCOLS = ("nonoverlapping", "sliding", "last-token")
VERDICT_PROTOCOLS = ("last-token", "nonoverlapping", "sliding")  # 003 §3.4's protocol first
PAPER_SLIDING_RELATIVE = 44.35  # 000 Table 1: sliding window vs nonoverlapping inference time
SLIDING_SLOWER_FACTOR = 10.0  # "much slower": our threshold for the Table 1 claim
SPEARMAN_MIN = 0.5  # TRF and ERF trends "agree" (000 Figs. 5-6) when rho >= this
SPEARMAN_MIN_N = 3  # below 3 PEs a rank correlation says nothing
HEATMAP_LENGTH = 32  # positions shown in each exp(RPE) heatmap (000 Fig. 7)
HEATMAP_HEAD = 0
DEFAULT_HEADS = 8  # when results.json does not record the number of heads
MAX_HEATMAPS = 12

# 003 Table 1 (ArXiv, L_tr = 512): perplexity vs L_ex for the three ALiBi-slope experiments.
PAPER_003_TABLE1 = {
    "source": "Chi et al. 2023 (003), Table 1, ArXiv, L_tr = 512",
    "train_length": 512,
    "lengths": [512, 1024, 2048, 4096, 8192],
    "groups": [
        {"group": "shift", "title": "Shift all h by Δ", "labels": ["Δ=-3", "Δ=0", "Δ=2", "Δ=4", "Δ=6", "Δ=8"],
         "ppl": [[5.76, 5.57, 5.50, 5.63, 5.70, 5.70],
                 [7.15, 5.64, 5.31, 5.81, 55.4, 55.4],
                 [7.15, 5.94, 5.89, 6.92, 94.4, 94.4],
                 [7.15, 5.95, 5.92, 6.94, 96.0, 96.0],
                 [7.15, 5.95, 5.92, 6.94, 96.0, 96.0]]},
        {"group": "same-h", "title": "Same h for all heads", "labels": ["h=0", "h=2", "h=4", "h=6", "h=8"],
         "ppl": [[9.45, 6.65, 5.85, 5.60, 5.70],
                 [9.20, 7.01, 8.66, 25.4, 55.4],
                 [9.21, 7.08, 8.66, 31.7, 94.4],
                 [9.21, 7.08, 8.66, 31.8, 96.0],
                 [9.21, 7.08, 8.66, 31.8, 96.0]]},
        {"group": "window", "title": "Windowed attention with size w",
         "labels": ["w=40", "w=80", "w=100", "w=120", "w=160", "w=320"],
         "ppl": [[8.27, 7.28, 7.04, 6.77, 6.41, 6.04],
                 [8.27, 7.29, 7.02, 8.90, 67.4, 178],
                 [8.27, 7.29, 7.03, 8.90, 67.5, 202],
                 [8.27, 7.29, 7.02, 8.90, 67.5, 202],
                 [8.27, 7.29, 7.02, 8.90, 67.5, 202]]},
    ],
}


# ---------------------------------------------------------------------------
# reading results.json
# ---------------------------------------------------------------------------
def load_results(path: str | os.PathLike) -> dict:
    """``results.json`` (a file, or the study folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _num(x: Any) -> float | None:
    """A finite float, or None for missing / NaN / inf / non-numbers."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        return f"{x:.{digits}g}"
    return str(x)


def _base(pe: str) -> str:
    """Scheme name of a spec ("window:64" -> "window")."""
    return pe.split(":", 1)[0].strip()


def _pes(results: dict) -> list[str]:
    """Every PE the results mention, in the study's order first."""
    seen = list(results.get("pes") or [])
    for section in ("runs", "eval", "erf"):
        seen += [pe for pe in (results.get(section) or {}) if pe not in seen]
    seen += [r.get("pe") for r in results.get("theory") or [] if r.get("pe") and r.get("pe") not in seen]
    return list(dict.fromkeys(seen))


def _match(keys, name: str) -> str | None:
    """The spec among ``keys`` whose scheme name is ``name`` (the exact spec preferred)."""
    keys = list(keys)
    if name in keys:
        return name
    return next((k for k in keys if _base(k) == name), None)


def pe_verdict(results: dict, pe: str) -> tuple[bool | None, float | None, str | None]:
    """(extrapolates, worst_ratio, protocol) of ``pe``: last-token first, then nonoverlapping."""
    ev = (results.get("eval") or {}).get(pe) or {}
    for proto in VERDICT_PROTOCOLS:
        rep = ev.get(proto)
        if rep and rep.get("extrapolates") is not None:
            return rep["extrapolates"], _num(rep.get("worst_ratio")), proto
    return None, None, None


def theory_rows(results: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in results.get("theory") or []:
        if row.get("pe") is not None:
            out.setdefault(row["pe"], []).append(row)
    return out


def _eps_keys(rows: list[dict]) -> list[str]:
    """ε keys of the TRF dicts, largest ε first."""
    keys = {k for r in rows for k in (r.get("trf") or {})}

    def val(k):
        try:
            return -float(k)
        except ValueError:
            return math.inf

    return sorted(keys, key=val)


def _trf_at(rows: list[dict], eps: str) -> int | None:
    """TRF of a PE at ε: the largest over heads (a layer sees as far as its widest head)."""
    vals = [v for r in rows if (v := _num((r.get("trf") or {}).get(eps))) is not None]
    return int(max(vals)) if vals else None


# ---------------------------------------------------------------------------
# claims checklist
# ---------------------------------------------------------------------------
def _claim(claim: str, ok: bool | None, evidence: str, source: str) -> dict:
    return {"claim": claim, "ok": ok, "evidence": evidence, "source": source}


def _verdict_text(results: dict, pe: str) -> str:
    ext, worst, proto = pe_verdict(results, pe)
    if proto is None:
        return f"{pe}: no verdict"
    word = "extrapolates" if ext else "does not extrapolate"
    return f"{pe}: {word} (worst |Δppl|/ppl {_fmt(worst, 3)}, {proto})"


def _claim_convergent(results: dict) -> dict:
    name, src = "Convergent RPEs extrapolate", "000 Theorem 0.4, Figs. 3/4"
    conv = [pe for pe, rows in theory_rows(results).items()
            if rows and all(r.get("verdict") == "converges" for r in rows)]
    judged = [pe for pe in conv if pe_verdict(results, pe)[0] is not None]
    unjudged = [pe for pe in conv if pe not in judged]
    if not judged:
        why = "no PE with a convergent series was evaluated" if conv else "no PE has a convergent verdict"
        return _claim(name, None, why, src)
    ok = all(pe_verdict(results, pe)[0] for pe in judged)
    ev = "; ".join(_verdict_text(results, pe) for pe in judged)
    if unjudged:
        ev += f". Not evaluated: {', '.join(unjudged)}"
    return _claim(name, ok, ev, src)


def _claim_not_extrapolate(results: dict, claim: str, names: list[str], source: str) -> dict:
    """Every PE in ``names`` must have extrapolates == False."""
    found = {n: _match(results.get("eval") or {}, n) for n in names}
    verdicts = {n: pe_verdict(results, pe)[0] if pe else None for n, pe in found.items()}
    parts = [_verdict_text(results, pe) if pe else f"{n}: not evaluated" for n, pe in found.items()]
    if any(v is True for v in verdicts.values()):
        ok = False  # one counterexample is enough, whatever else is missing
    elif any(v is None for v in verdicts.values()):
        ok = None
    else:
        ok = True
    return _claim(claim, ok, "; ".join(parts), source)


def _claim_trf_types(results: dict) -> dict:
    name, src = "TRF(Type2) < TRF(Type1)", "000 Theorem 0.5, Fig. 6"
    rows = theory_rows(results)
    t1, t2 = (rows.get(_match(rows, n) or "", []) for n in ("type1", "type2"))
    if not t1 or not t2:
        return _claim(name, None, "theory rows for type1 and type2 are both needed", src)
    pairs = [(e, _trf_at(t1, e), _trf_at(t2, e)) for e in _eps_keys(t1 + t2)]
    pairs = [(e, a, b) for e, a, b in pairs if a is not None and b is not None]
    if not pairs:
        return _claim(name, None, "no ε with a TRF for both type1 and type2", src)
    ok = all(b < a for _, a, b in pairs)
    ev = "; ".join(f"ε={e}: Type1 {a}, Type2 {b}" for e, a, b in pairs)
    return _claim(name, ok, ev, src)


def _slope_claim(results: dict, group: str, claim: str, source: str) -> dict:
    """003 §4: within a group, the mildest variants extrapolate and the most extreme one does not."""
    variants = [v for v in (results.get("slopes") or {}).get("variants", []) if v.get("group") == group]
    seen = [(v["label"], *pe_verdict(results, v["pe"])[:2]) for v in variants]
    seen = [x for x in seen if x[1] is not None]
    if len(seen) < 2:
        return {"claim": claim, "ok": None, "evidence": "fewer than two variants evaluated", "source": source}
    evidence = "; ".join(f"{lab}: {'extrapolates' if ok else 'does not'} ({w:.3g})" for lab, ok, w in seen)
    ok = seen[0][1] is True and seen[-1][1] is False
    return {"claim": claim, "ok": ok, "evidence": evidence, "source": source}


def _slope_claims(results: dict) -> list[dict]:
    return [
        _slope_claim(results, "shift", "Shifting every slope down (larger Δ) breaks extrapolation", "003 §4.1, Table 1"),
        _slope_claim(results, "same-h", "One slope for all heads extrapolates only when it is large (small h)",
                     "003 §4.2, Table 1"),
        _slope_claim(results, "window", "Windowed attention extrapolates for small w and fails for large w",
                     "003 §4.3, Table 1"),
    ]


def _claim_spearman(results: dict) -> dict:
    name, src = "TRF and ERF trends agree", "000 Figs. 5-6"
    sp = results.get("spearman") or {}
    grad, attn, n = _num(sp.get("grad")), _num(sp.get("attn")), sp.get("n")
    rho, kind = (grad, "gradient") if grad is not None else (attn, "attention")
    ev = f"Spearman ρ(TRF, grad ERF) = {_fmt(grad, 3)}, ρ(TRF, attn ERF) = {_fmt(attn, 3)}, n = {_fmt(n)} PEs"
    if rho is None:
        return _claim(name, None, ev + " (no correlation computed)", src)
    if not isinstance(n, int) or n < SPEARMAN_MIN_N:
        return _claim(name, None, ev + f" (fewer than {SPEARMAN_MIN_N} PEs: too few to rank)", src)
    return _claim(name, rho >= SPEARMAN_MIN, ev + f"; judged on the {kind} ERF, threshold ρ ≥ {SPEARMAN_MIN}", src)


def _timing_row(results: dict, method: str) -> dict | None:
    return next((r for r in (results.get("timing") or {}).get("rows") or [] if r.get("method") == method), None)


def _mean(xs) -> float | None:
    vals = [v for x in xs or [] if (v := _num(x)) is not None]
    return sum(vals) / len(vals) if vals else None


def sliding_relative(results: dict) -> float | None:
    """Average sliding-window time relative to nonoverlapping (000 Table 1)."""
    row = _timing_row(results, "sliding")
    if row is None:
        return None
    rel = _num(row.get("relative"))
    if rel is None:  # recompute from the raw seconds when the ratio was not stored
        base, slow = _mean((_timing_row(results, "nonoverlapping") or {}).get("seconds")), _mean(row.get("seconds"))
        rel = slow / base if base and slow is not None else None
    return rel


def _claim_timing(results: dict) -> dict:
    name, src = "Sliding-window inference is much slower than non-overlapping", "000 Table 1"
    rel = sliding_relative(results)
    if rel is None:
        return _claim(name, None, "no sliding / nonoverlapping timing", src)
    ev = (f"sliding / nonoverlapping average time = {rel:.2f}× (paper: {PAPER_SLIDING_RELATIVE}×); "
          f"threshold ≥ {SLIDING_SLOWER_FACTOR:g}×")
    return _claim(name, rel >= SLIDING_SLOWER_FACTOR, ev, src)


def compute_claims(results: dict) -> list[dict]:
    """The claims checklist: [{"claim", "ok": True | False | None, "evidence", "source"}]."""
    if results.get("experiment") == "alignment":  # 004's claims (extrap.report_alignment)
        from extrap.report_alignment import alignment_claims

        return alignment_claims(results)
    if results.get("experiment") == "alibi-slopes":
        return _slope_claims(results) + [_claim_spearman(results)]
    return [
        _claim_convergent(results),
        _claim_not_extrapolate(results, "1/n and 1/(n ln n) do not extrapolate", ["example1", "example2"],
                               "000, Validating the Necessity, Fig. 4"),
        _claim_not_extrapolate(results, "Sinusoidal does not extrapolate", ["sinusoidal"], "000 Fig. 3"),
        _claim_trf_types(results),
        _claim_spearman(results),
        _claim_timing(results),
    ]


# ---------------------------------------------------------------------------
# figures (matplotlib's object API: no pyplot state, safe beside other plots)
# ---------------------------------------------------------------------------
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


def _run_path(results: dict, out_dir: Path | None, pe: str) -> Path | None:
    run = (results.get("runs") or {}).get(pe)
    if out_dir is None or not isinstance(run, dict) or not run.get("run_dir"):
        return None
    path = Path(out_dir) / run["run_dir"]
    return path if path.is_dir() else None


def num_heads(results: dict, out_dir: Path | None = None) -> int:
    """Heads per layer: results["n_head"], else a trained run's config.json, else DEFAULT_HEADS."""
    if isinstance(results.get("n_head"), int):
        return results["n_head"]
    for pe in results.get("runs") or {}:
        path = _run_path(results, out_dir, pe)
        try:
            n = json.loads((path / "config.json").read_text())["model"]["n_head"] if path else None
        except (OSError, ValueError, KeyError, TypeError):
            n = None
        if isinstance(n, int) and n > 0:
            return n
    return DEFAULT_HEADS


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


def _erf_table(results: dict) -> list[dict]:
    """Per PE: TRF (from the ERF section, else the theory at the smallest ε), grad and attn ERF."""
    rows = theory_rows(results)
    out = []
    for pe in _pes(results):
        e = (results.get("erf") or {}).get(pe)
        if e is None:
            continue
        trf = _num(e.get("trf"))
        if trf is None and rows.get(pe):
            keys = _eps_keys(rows[pe])
            trf = _trf_at(rows[pe], keys[-1]) if keys else None
        out.append({"pe": pe, "trf": trf, "grad_erf": _num(e.get("grad_erf")), "attn_erf": _num(e.get("attn_erf"))})
    return out


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


def _slope_groups(results: dict) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for v in (results.get("slopes") or {}).get("variants") or []:
        if v.get("pe"):
            groups.setdefault(v.get("group") or "variants", []).append(v)
    return groups


def _slopes_protocol(results: dict, variants: list[dict]) -> str | None:
    ev = results.get("eval") or {}
    return next((p for p in VERDICT_PROTOCOLS if any(p in (ev.get(v["pe"]) or {}) for v in variants)), None)


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


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _figure_plan(results: dict, notes: dict, out_dir: Path) -> list[tuple[str, Callable[[], Any]]]:
    if results.get("experiment") == "alignment":
        from extrap.report_alignment import figure_plan

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


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------
class Raw(str):
    """Already-escaped HTML for a table cell."""


def _esc(x: Any) -> str:
    return x if isinstance(x, Raw) else html.escape(x if isinstance(x, str) else _fmt(x))


def _table(headers: list[str], rows: list[list[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _missing(text: str) -> str:
    return f'<p class="missing">Missing: {html.escape(text)}</p>'


def _figure_html(figures: dict, notes: dict, name: str, caption: str) -> str:
    err = notes.get(f"error:{name}")
    if err:
        return f'<p class="missing">Figure {html.escape(name)} could not be drawn: {html.escape(err)}</p>'
    if name not in figures:
        return ""
    f = figures[name]
    cap = html.escape(notes.get(name, caption))
    return (f'<figure><img src="{html.escape(f["png"])}" alt="{cap}" loading="eager">'
            f'<figcaption>{cap} <a href="{html.escape(f["svg"])}">SVG</a></figcaption></figure>')


_STATUS = {True: ("✔", "ok"), False: ("✘", "bad"), None: ("–", "na")}


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
        from extrap.report_alignment import missing

        return missing(results) + _recorded_errors(results)
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
        from extrap.report_alignment import section

        body = [_section_header(results), _section_claims(claims), _section_missing(results, notes),
                _section_runs(results), section(results, figures, notes)]
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
