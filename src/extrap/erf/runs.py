"""ERFs of whole runs, their rank correlation with the theory's TRF, and the gradient-curve plot."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from extrap.erf.measures import (
    ATTN_EPS,
    ATTN_MAX_LENGTH,
    DEFAULT_SEGMENTS,
    GRAD_THRESHOLD,
    KINDS,
    TRF_SOURCES,
    attention_erf,
    check_eps,
    check_positive,
    check_threshold,
    gradient_erf,
)
from extrap.errors import ExtrapError
from extrap.run import Run, eval_stream
from extrap.theory.receptive import ERF_TRF

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# rank correlation
# ---------------------------------------------------------------------------
def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho (scipy: Pearson correlation of average ranks, ties handled); None if undefined."""
    from scipy.stats import spearmanr

    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} values against {len(y)}")
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:  # a constant ranking has no order to correlate with
        return None
    return float(spearmanr(x, y).statistic)


# ---------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------
def run_erf(
    run_or_dir,
    kind: str = "both",
    length: int | None = None,
    segments: int = DEFAULT_SEGMENTS,
    threshold: float = GRAD_THRESHOLD,
    eps: float = ATTN_EPS,
    split: str = "validation",
    batch: int = 4,
    trf_reduce: str = ERF_TRF.reduce,
    trf_source: str = "init",
    device: str = "cpu",
    corpus: str | None = None,
    trf_eps: float = ERF_TRF.eps,
) -> dict:
    """Gradient and/or attention ERF of one run, JSON-ready (strict: a number that is not finite is null).

    ``eps`` is the attention ERF's n_emp(eps); the TRF beside it is n(``trf_eps``) reduced over
    heads by ``trf_reduce`` (defaults: :data:`extrap.theory.receptive.ERF_TRF`).

    ``length`` defaults to 4 x the training length (003 measures at L_ex = 4 L_tr);
    the attention ERF uses min(length, ATTN_MAX_LENGTH).  ``trf_source``: ``init``
    (the scheme's formula parameters, as in 000) or ``trained`` (this run's
    learned bias parameters, every layer).  ``corpus``: the corpus of an ``hf:PATH`` model
    (default stdlib; a project run always reads its training corpus).
    """
    import extrap

    _check(kind, trf_source, segments, batch)
    threshold, eps, trf_eps = check_threshold(threshold), check_eps(eps), check_eps(trf_eps)
    run = extrap.load(run_or_dir, device) if isinstance(run_or_dir, (str, Path)) else run_or_dir
    if corpus is not None:
        run.use_corpus(corpus)
    length = int(length) if length is not None else 4 * run.train_length
    if length < 2:
        raise ExtrapError(f"length must be >= 2, got {length}")
    stream = eval_stream(run, split, length)
    row = _row(run, length, split, segments, threshold, eps)
    trf = _run_trf(run, trf_eps, trf_reduce, trf_source)
    value, why = (trf.value, trf.reason) if trf is not None else (None, "the model exposes no positional scheme")
    row.update(trf=value, trf_eps=trf_eps, trf_reduce=trf_reduce, trf_source=trf_source, trf_reason=why)
    if kind in ("grad", "both"):
        g = gradient_erf(run.model, stream, length, segments, threshold, batch)
        row.update(
            grad_erf=g.erf,
            grad_erf_of_mean_curve=g.erf_of_mean_curve,
            grad_per_segment=g.per_segment,
            grad_curve=g.curve,
        )
    if kind in ("attn", "both"):
        row["attn_erf"] = attention_erf(run.model, stream, min(length, ATTN_MAX_LENGTH), segments, eps).to_dict()
    return _finite(row)


def _finite(obj):
    """``obj`` with every float that is not finite (a diverging TRF, a NaN gradient) made None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _check(kind: str, trf_source: str, segments: int, batch: int) -> None:
    if kind not in KINDS:
        raise ExtrapError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if trf_source not in TRF_SOURCES:
        raise ExtrapError(f"trf_source must be one of {', '.join(TRF_SOURCES)}, got {trf_source!r}")
    check_positive("segments", segments)
    check_positive("batch", batch)


def _row(run: Run, length: int, split: str, segments: int, threshold: float, eps: float) -> dict:
    """The JSON row of one run before anything is measured: every key present, measurements None."""
    return {
        "run": str(run.path),
        "pe": run.pe,
        "length": length,
        "train_length": run.train_length,
        "split": split,
        "segments": segments,
        "step": run.step,
        "grad_erf": None,
        "grad_erf_of_mean_curve": None,
        "grad_per_segment": None,
        "grad_curve": None,
        "threshold": threshold,
        "attn_erf": None,
        "eps": eps,  # of the attention ERF's n_emp
        "trf": None,
        "trf_eps": None,
        "trf_reduce": None,
        "trf_source": None,
        "trf_reason": None,  # why ``trf`` is None
        **run.provenance(),
    }


def trained_bias_values(run_dir) -> list[dict]:
    """Each layer's bias values in float64, read as ``extrap theory --checkpoint`` reads them.

    The stored tensors of the run's latest checkpoint (:func:`extrap.run.read_bias_parameters`),
    in float64, then the scheme's map to the values the bias uses (softplus for KERPLE's r1, r2):
    the same numbers the command analyses, to the last bit.
    """
    from extrap import positional
    from extrap.run import read_bias_parameters

    spec, heads, stored = read_bias_parameters(run_dir)
    scheme = positional.get(spec)
    return [scheme.values({k: v.detach().double() for k, v in p.items()}, heads) for p in stored.values()]


def _run_trf(run, eps: float, reduce: str, source: str):
    """The theory's TRF(eps) (000 Eq. 22) of the run's scheme, reduced over heads (and layers), or None."""
    from extrap.theory import receptive_field

    scheme = run.model.scheme
    if scheme is None:  # hf: see `extrap theory --checkpoint hf:PATH` for its bias
        return None
    values = None
    if source == "trained":
        try:
            values = trained_bias_values(run.path)
        except ExtrapError as e:  # a model with no checkpoint on disk: its parameters in memory
            log.debug("erf: %s; the TRF uses the model's parameters in memory", e)
            values = run.model.bias_values()
    return receptive_field(scheme, values, eps=eps, reduce=reduce, num_heads=run.model.shape.n_head)


def spearman_table(rows: list[dict]) -> dict:
    """Spearman rho of TRF against each ERF, over the rows with a finite TRF and that ERF."""
    out = {}
    for key, get in (
        ("grad", lambda r: r["grad_erf"]),
        ("attn", lambda r: r["attn_erf"]["summary"] if r["attn_erf"] else None),
    ):
        pairs = [(r["trf"], get(r)) for r in rows if r["trf"] is not None and get(r) is not None]
        out[key] = {"rho": spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None, "n": len(pairs)}
    return out


def compare_trf_erf(runs: list, eps: float = ATTN_EPS, kind: str = "both", progress: bool = False, **kwargs) -> dict:
    """TRF (000 Eq. 22) versus gradient and attention ERF over several runs.

    Returns {"rows": [{"run", "pe", "trf", "grad_erf", "attn_erf", ...}], "spearman": {"grad": {"rho", "n"},
    "attn": {"rho", "n"}}}; runs whose TRF is None (no bias RPE, divergent series)
    are listed but left out of the correlations.  ``eps`` is the attention ERF's; ``kwargs``
    (``trf_eps``, ``trf_reduce``, ...) go to :func:`run_erf`.
    """
    rows = []
    for r in runs:
        if progress:
            log.info("  erf: %s", r)
        rows.append(run_erf(r, kind=kind, eps=eps, **kwargs))
    return {"rows": rows, "spearman": spearman_table(rows)}


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------
def plot_gradient_curves(rows: list[dict], out_dir: str | Path, name: str = "grad_erf") -> list[Path]:
    """Cumulative normalised gradient against tokens kept (003 Fig. 4 style), PNG + SVG.

    One curve per run (colour, then line style after ten), its legend naming the run and its
    gradient ERF in tokens; dotted: the threshold that defines the ERF, dashed: each L_tr.
    """
    from extrap.plotting import new_figure, save_figure
    from extrap.theory.plots import curve_style

    rows = [r for r in rows if r.get("grad_curve")]
    if not rows:
        raise ExtrapError("nothing to plot: no gradient ERF was measured (measure kind grad or both)")
    fig = new_figure(6.4, 4.2)
    ax = fig.add_subplot()
    pes = [r["pe"] for r in rows]
    lengths = sorted({r["length"] for r in rows})
    for k, r in enumerate(rows):
        name_ = r["pe"] if pes.count(r["pe"]) == 1 else f"{r['pe']} [{Path(r['run']).name}]"
        erf = f"{r['grad_erf']:.1f} tokens" if isinstance(r.get("grad_erf"), (int, float)) else "none"
        at = f", L_ex {r['length']}" if len(lengths) > 1 else ""
        curve = [math.nan if y is None else y for y in r["grad_curve"]]
        ax.plot(range(1, len(curve) + 1), curve, label=f"{name_} (ERF {erf}{at})", **curve_style(k))
    thr = rows[0]["threshold"]
    ax.axhline(thr, color="grey", ls=":", lw=1)
    for L_tr in sorted({r["train_length"] for r in rows}):
        ax.axvline(L_tr, color="grey", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("most recent context tokens kept (k)")
    ax.set_ylabel("cumulative normalised gradient (fraction of the total)")
    where = f"L_ex = {lengths[0]}" if len(lengths) == 1 else "L_ex per run"
    ax.set_title(f"Gradient ERF at {where} (dashed: L_tr, dotted: threshold {thr})", fontsize=10)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return save_figure(fig, out_dir, name)
