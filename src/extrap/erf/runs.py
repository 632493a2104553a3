"""ERFs of whole runs, their rank correlation with the theory's TRF, and the gradient-curve plot."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from extrap.erf.measures import ATTN_MAX_LENGTH, attention_erf, gradient_erf
from extrap.erf.records import ERF_DEFAULTS, ErfReport, ErfSettings, ErfSpearman, RankCorrelation, RunErf, finite
from extrap.errors import ExtrapError
from extrap.run import Run, eval_stream

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
# the settings a run's ERF record repeats, by the same names
_RECORDED = ("split", "segments", "threshold", "eps", "trf_eps", "trf_reduce", "trf_source")


def run_erf(run_or_dir: Run | str | Path, settings: ErfSettings = ERF_DEFAULTS) -> RunErf:
    """Gradient and/or attention ERF of one run (a Run, a run directory or ``hf:PATH``), with the TRF beside them.

    Numbers that are not finite (a diverging TRF, a NaN gradient) are None, as strict JSON writes them.
    """
    import extrap

    s = settings.checked()
    run = extrap.load(run_or_dir, s.device) if isinstance(run_or_dir, (str, Path)) else run_or_dir
    if s.corpus is not None:
        run.use_corpus(s.corpus)
    length = int(s.length) if s.length is not None else 4 * run.train_length
    if length < 2:
        raise ExtrapError(f"length must be >= 2, got {length}")
    stream = eval_stream(run, s.split, length)
    trf = _run_trf(run, s.trf_eps, s.trf_reduce, s.trf_source)
    value, why = (trf.value, trf.reason) if trf is not None else (None, "the model exposes no positional scheme")
    grad = attn = None
    if s.kind in ("grad", "both"):
        g = gradient_erf(run.model, stream, length, s.segments, s.threshold, s.batch)
        grad = replace(g, erf=finite(g.erf), curve=tuple(finite(v) for v in g.curve))
    if s.kind in ("attn", "both"):
        attn = attention_erf(run.model, stream, min(length, ATTN_MAX_LENGTH), s.segments, s.eps)
    return RunErf(
        run=str(run.path),
        pe=run.pe,
        length=length,
        train_length=run.train_length,
        step=run.step,
        trf=finite(value),
        **{k: getattr(s, k) for k in _RECORDED},
        trf_reason=why,
        grad=grad,
        attn=attn,
        provenance=run.provenance().to_json(),
    )


def _run_trf(run, eps: float, reduce: str, source: str):
    """The theory's TRF(eps) (000 Eq. 22) of the run's scheme, reduced over heads (and layers), or None."""
    from extrap.theory import receptive_field

    scheme = run.model.scheme
    if scheme is None:  # hf: see `extrap theory --checkpoint hf:PATH` for its bias
        return None
    values = None
    if source == "trained":  # the checkpoint's values, else (no checkpoint on disk) the model's in memory
        values = run.checkpoint_bias() or run.model.bias_values()
    return receptive_field(scheme, values, eps=eps, reduce=reduce, num_heads=run.model.shape.n_head)


def spearman_table(runs: Sequence[RunErf]) -> ErfSpearman:
    """Spearman rho of TRF against each ERF, over the runs with a finite TRF and that ERF."""
    out = []
    for get in (lambda r: r.grad.erf if r.grad else None, lambda r: r.attn.summary if r.attn else None):
        pairs = [(r.trf, get(r)) for r in runs if r.trf is not None and get(r) is not None]
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
        out.append(RankCorrelation(rho=rho, n=len(pairs)))
    return ErfSpearman(grad=out[0], attn=out[1])


def compare_trf_erf(
    runs: Sequence[Run | str | Path], settings: ErfSettings = ERF_DEFAULTS, progress: bool = False
) -> ErfReport:
    """TRF (000 Eq. 22) versus gradient and attention ERF over several runs, each measured with ``settings``.

    Runs whose TRF is None (no bias RPE, divergent series) are listed but left out of the correlations.
    """
    rows = []
    for r in runs:
        if progress:
            log.info("  erf: %s", r)
        rows.append(run_erf(r, settings))
    return ErfReport(runs=tuple(rows), spearman=spearman_table(rows))


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------
def plot_gradient_curves(runs: Sequence[RunErf], out_dir: str | Path, name: str = "grad_erf") -> list[Path]:
    """Cumulative normalised gradient against tokens kept (003 Fig. 4 style), PNG + SVG.

    One curve per run (colour, then line style after ten), its legend naming the run and its
    gradient ERF in tokens; dotted: the threshold that defines the ERF, dashed: each L_tr.
    """
    from extrap.plotting import new_figure, save_figure
    from extrap.theory.plots import curve_style

    rows = [r for r in runs if r.grad is not None and r.grad.curve]
    if not rows:
        raise ExtrapError("nothing to plot: no gradient ERF was measured (measure kind grad or both)")
    fig = new_figure(6.4, 4.2)
    ax = fig.add_subplot()
    pes = [r.pe for r in rows]
    lengths = sorted({r.length for r in rows})
    for k, r in enumerate(rows):
        name_ = r.pe if pes.count(r.pe) == 1 else f"{r.pe} [{Path(r.run).name}]"
        erf = f"{r.grad.erf:.1f} tokens" if isinstance(r.grad.erf, (int, float)) else "none"
        at = f", L_ex {r.length}" if len(lengths) > 1 else ""
        curve = [math.nan if y is None else y for y in r.grad.curve]
        style = curve_style(k)
        ax.plot(range(1, len(curve) + 1), curve, label=f"{name_} (ERF {erf}{at})", color=style.color, ls=style.ls)
    thr = rows[0].threshold
    ax.axhline(thr, color="grey", ls=":", lw=1)
    for L_tr in sorted({r.train_length for r in rows}):
        ax.axvline(L_tr, color="grey", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("most recent context tokens kept (k)")
    ax.set_ylabel("cumulative normalised gradient (fraction of the total)")
    where = f"L_ex = {lengths[0]}" if len(lengths) == 1 else "L_ex per run"
    ax.set_title(f"Gradient ERF at {where} (dashed: L_tr, dotted: threshold {thr})", fontsize=10)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return save_figure(fig, out_dir, name)
