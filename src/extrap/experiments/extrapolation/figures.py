"""The report's figures as PNG and SVG: 000 Figs. 3/4 (PPL vs length), 5 (ERF), 6 (TRF curves),
7 (exp(RPE) heatmaps), 003 Fig. 4 (cumulative gradient) and the ALiBi-slope curves."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extrap.experiments.extrapolation.lookup import erf_table, slope_groups, slopes_protocol
from extrap.experiments.extrapolation.results import SlopeVariant, block
from extrap.experiments.extrapolation.shapes import heatmaps_figure, trf_curves_figure
from extrap.experiments.extrapolation.values import PARAMS_WORDS, PROTOCOLS, trf_setting
from extrap.plotting import new_figure
from extrap.report.values import num
from extrap.results import EvalReport, StudyResults, slug
from extrap.results.evaluation import Z95
from extrap.theory.plots import curve_style

CAPTIONS = {
    "ppl": "Protocol {protocol}, evaluation length in tokens on a log₂ axis. Left: the change against the training "
    "length L_tr on the same scored tokens, Δppl/ppl = ppl(L_ex)/ppl(L_tr) − 1, the ratio that 000 Definition 0.1's "
    "verdict compares with δ (dotted lines at ±δ; the axis is linear within ±δ and logarithmic beyond). Error bars: "
    "the verdict's 95% interval, ± 1.96 standard errors of |Δppl|/ppl (ratio_stderr in results.json), at every "
    "length above L_tr: paired standard errors (of the per-token loss difference) where both lengths scored "
    "the same targets (always under last-token); dashed where they did not, from the two lengths' own standard "
    "errors. A results.json of an earlier version, which recorded only worst_ratio_stderr, has a bar at each "
    "PE's worst length only. Right, with the legend of both panels: "
    "perplexity per token as lines (logarithmic axis when the curves span a factor of 10), without the interval "
    "of each length's mean (ppl_ci95 in results.json): that spread across targets is shared by every PE and "
    'would hide their differences. Dashed line: L_tr. A PE marked "did not learn" has a loss at L_tr above '
    "the set fraction of the unigram entropy (see Training runs): its flat curve says nothing about "
    "extrapolation (analogue of 000 Figs. 3/4).",
    "trf_erf": "TRF ({setting}) beside gradient and attention ERF, in tokens, each measure divided by its own "
    "largest value over the PEs: bars compare PEs within one measure, not the measures with each other{scale}. "
    '"no TRF": the series diverges or the PE adds no bias; "did not learn": its ERFs measure an untrained '
    "model. TRF from {params} (analogue of 000 Figs. 5-6).",
    "grad_curves": "Cumulative normalised gradient: the fraction of the input gradient of the last prediction "
    "that falls on the k most recent tokens{at}, against k in tokens (log₂ axis); the gradient ERF is the k where a "
    'curve crosses the dotted line at 0.99; dashed line: training length L_tr. "did not learn": the curve of an '
    "untrained model (analogue of 003 Fig. 4).",
    "slopes": "ALiBi-slope experiment '{group}': perplexity per token vs length in tokens ({protocol}), "
    "dashed line: L_tr; cf. 003 Table 1.",
}


def pe_label(results: StudyResults, pe: str) -> str:
    """A PE's name in a legend, marked when its model did not learn."""
    return f"{pe} (did not learn)" if results.learned(pe) is False else pe


@dataclass(frozen=True)
class Curve:
    """One PE's perplexity against length, drawn as a line without a band."""

    label: str
    xs: list[int]  # lengths, tokens
    ys: list[float]  # perplexity per token
    flat: bool  # the PE extrapolates (000 Definition 0.1)
    style: int  # its colour and line style (curve_style), the same in every panel


@dataclass(frozen=True)
class Change:
    """One PE's change against L_tr on the same targets, Δppl/ppl at each length >= L_tr, and the verdict's
    standard error of |Δppl|/ppl at each length where results.json records it."""

    label: str
    xs: list[int]  # lengths >= L_tr, tokens
    ys: list[float]  # ppl(L) / ppl(L_tr) - 1
    stderrs: list[float | None]  # the verdict's standard error at each of ``xs``; None: no bar there
    paired: list[bool]  # that standard error is paired (both lengths scored the same targets)
    style: int


def _points(rep: EvalReport | None) -> list:
    return sorted((r for r in (rep.results if rep else []) if isinstance(r.length, int) and num(r.ppl)), key=_len)


def _len(r) -> int:
    return r.length


def ppl_curve(label: str, rep: EvalReport | None, style: int) -> Curve | None:
    """The finite points of one protocol report."""
    pts = _points(rep)
    if not pts:
        return None
    return Curve(label, [r.length for r in pts], [r.ppl for r in pts], rep.extrapolates is True, style)


def change_curve(label: str, rep: EvalReport | None, train_length, style: int) -> Change | None:
    """Δppl/ppl against L_tr, the verdict's ratio with its sign, from the recorded perplexities, with the
    verdict's standard error of |Δppl|/ppl at every length that records one (``ratio_stderr``).

    A report of an earlier version records only ``worst_ratio_stderr``: that bar goes on the length whose
    |Δppl|/ppl is the recorded ``worst_ratio``, and only where that comparison was paired (the verdict pairs
    two lengths when they scored as many tokens, the same targets).
    """
    pts = [r for r in _points(rep) if isinstance(train_length, int) and r.length >= train_length]
    ref = pts[0] if pts and pts[0].length == train_length else None
    if ref is None or len(pts) < 2:
        return None
    xs, ys = [r.length for r in pts], [r.ppl / ref.ppl - 1 for r in pts]
    stderrs = [num(r.ratio_stderr) for r in pts]
    if not any(se is not None for se in stderrs):
        stderrs = _worst_stderr(rep, pts, ys)
    paired = [r.ratio_paired if r.ratio_paired is not None else _same_targets(r, ref) for r in pts]
    return Change(label, xs, ys, stderrs, paired, style)


def _same_targets(r, ref) -> bool:
    """The verdict pairs two lengths when they scored as many tokens: the same targets."""
    return r.tokens is not None and r.tokens == ref.tokens


def _worst_stderr(rep: EvalReport, pts: list, ys: list[float]) -> list[float | None]:
    """``worst_ratio_stderr`` at the worst length, when it is that length's paired comparison; None elsewhere."""
    worst = max(range(1, len(pts)), key=lambda k: abs(ys[k]))
    se, w = num(rep.worst_ratio_stderr), num(rep.worst_ratio)
    paired = _same_targets(pts[worst], pts[0])
    known = se is not None and w is not None and math.isclose(abs(ys[worst]), w, rel_tol=1e-9, abs_tol=1e-15)
    return [se if k == worst and known and paired else None for k in range(len(pts))]


def spans_decades(curves: list[Curve]) -> bool:
    """A log axis when the curves span a factor of 10 or more: exploding PEs would flatten the rest."""
    ys = [y for c in curves for y in c.ys]
    return bool(ys) and min(ys) > 0 and max(ys) / min(ys) >= 10


def length_axes(ax, train_length, ylabel: str, title: str, legend: bool = True) -> None:
    ax.set_xscale("log", base=2)
    if isinstance(train_length, int):
        ax.axvline(train_length, color="grey", ls="--", lw=1)
    ax.set_xlabel("evaluation length L_ex (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)


def ppl_axes(ax, curves: list[Curve], train_length, title: str) -> None:
    """Perplexity as lines: its spread across targets is unpaired and would hide every difference."""
    for c in curves:
        style = curve_style(c.style)
        ax.plot(c.xs, c.ys, marker="o", ms=3, label=c.label, color=style.color, ls=style.ls)
    if spans_decades(curves):
        ax.set_yscale("log")
    length_axes(ax, train_length, "perplexity (per token)", title)


def change_axes(ax, changes: list[Change], train_length, delta: float, title: str) -> None:
    """Δppl/ppl against L_tr, ±δ dotted, with the verdict's 95% interval (± Z95 se) at every length that records
    its standard error: a solid bar where it is paired, dashed where not."""
    for c in changes:
        style = curve_style(c.style)
        ax.plot(c.xs, c.ys, marker="o", ms=3, label=c.label, color=style.color, ls=style.ls)
        for paired in (True, False):
            at = [
                (x, y, Z95 * se)
                for x, y, se, p in zip(c.xs, c.ys, c.stderrs, c.paired)
                if se is not None and p is paired
            ]
            if at:
                xs, ys, err = zip(*at)
                bar = ax.errorbar(xs, ys, yerr=err, color=style.color, capsize=3, lw=1, ls="none")
                bar.lines[2][0].set_linestyle("-" if paired else "--")
    for y in (-delta, delta):
        ax.axhline(y, color="grey", ls=":", lw=1)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_yscale("symlog", linthresh=delta)  # linear within ±δ, where the verdict is decided
    # the legend is the perplexity panel's: the same colours and styles, and it would hide the bars here
    length_axes(ax, train_length, "Δppl / ppl against L_tr (same targets)", title, legend=False)


def ppl_figure(results: StudyResults, protocol: str):
    """000 Figs. 3/4: each PE's change against L_tr with the verdict's paired interval, beside its perplexity."""
    curves: list[Curve] = []
    changes: list[Change] = []
    for pe in results.all_pes():
        rep = (results.eval.get(pe) or {}).get(protocol)
        c = ppl_curve(pe_label(results, pe), rep, len(curves))
        if c is not None:
            d = change_curve(c.label, rep, results.train_length, c.style)
            curves.append(c)
            changes += [d] if d is not None else []
    if not curves:
        return None
    fig = new_figure(11.0 if changes else 6.4, 4.2)
    if changes:
        delta = num(results.delta) or 0.02  # the verdict's default δ, for results that did not record theirs
        title = f"change against L_tr ({protocol}), ±δ = {delta:g} dotted, bars ± 1.96 se"
        change_axes(fig.add_subplot(1, 2, 1), changes, results.train_length, delta, title)
    ax = fig.add_subplot(1, 2, 2) if changes else fig.add_subplot()
    ppl_axes(ax, curves, results.train_length, f"PPL vs length ({protocol})")
    return fig


def erf_trf_setting(results: StudyResults) -> str:
    """How the ERF section's TRFs were taken (one setting, or "mixed settings")."""
    settings = {(r.trf_eps, r.trf_reduce) for r in erf_table(results)}
    return trf_setting(*settings.pop()) if len(settings) == 1 else "mixed settings: see the table"


def erf_trf_params(results: StudyResults) -> str:
    """Which parameter values the ERF section's TRFs come from, in words."""
    params = {r.params for r in erf_table(results)}
    return PARAMS_WORDS["trained"] if "trained" in params else PARAMS_WORDS["initial"]


def trf_erf_figure(results: StudyResults, notes: dict):
    table = erf_table(results)
    metrics = [
        (k, lab)
        for k, lab in [("trf", "TRF"), ("grad_erf", "grad ERF"), ("attn_erf", "attn ERF")]
        if any(getattr(r, k) for r in table)
    ]
    if not table or not metrics:
        return None
    fig = new_figure(max(6.4, 0.9 * len(table) + 2), 4.2)
    ax = fig.add_subplot()
    width = 0.8 / len(metrics)
    vals_all = []
    for m, (key, label) in enumerate(metrics):
        top = max(getattr(r, key) for r in table if getattr(r, key) is not None)
        ys = [(getattr(r, key) / top) if getattr(r, key) is not None else 0.0 for r in table]
        vals_all += [y for y in ys if y > 0]
        ax.bar([k + (m - (len(metrics) - 1) / 2) * width for k in range(len(table))], ys, width, label=label)
    log = bool(vals_all) and min(vals_all) < 0.01  # a huge TRF (Type1 at small ε) would hide the rest
    if log:
        ax.set_yscale("log")
    ticks = [
        r.pe + ("\nno TRF" if r.trf is None else "") + ("\ndid not learn" if results.learned(r.pe) is False else "")
        for r in table
    ]
    ax.set_xticks(range(len(table)), ticks, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("value / largest value of that measure")
    ax.set_title("TRF vs ERF, each measure relative to its largest")
    ax.legend(fontsize=7)
    notes["trf_erf"] = CAPTIONS["trf_erf"].format(
        setting=erf_trf_setting(results),
        scale="; log scale" if log else "",
        params=erf_trf_params(results),
    )
    return fig


def grad_curves_figure(results: StudyResults, notes: dict):
    erf = block(results).erf
    curves = [(pe, e.grad_curve) for pe, e in erf.items() if isinstance(e.grad_curve, list) and e.grad_curve]
    if not curves:
        return None
    lengths = sorted({len(c) + 1 for _, c in curves})  # the curve has a point per context token: L_ex - 1
    at = f" when predicting token L_ex = {lengths[0]} from the {lengths[0] - 1} before it" if len(lengths) == 1 else ""
    notes["grad_curves"] = CAPTIONS["grad_curves"].format(at=at)
    fig = new_figure(6.4, 4.0)
    ax = fig.add_subplot()
    for k, (pe, curve) in enumerate(curves):
        ys = [num(y) for y in curve]
        ys = [y if y is not None else math.nan for y in ys]
        style = curve_style(k)
        ax.plot(range(1, len(ys) + 1), ys, label=pe_label(results, pe), color=style.color, ls=style.ls)
    ax.set_xscale("log", base=2)
    ax.axhline(0.99, color="grey", ls=":", lw=1)
    if isinstance(results.train_length, int):
        ax.axvline(results.train_length, color="grey", ls="--", lw=1)
    ax.set_xlabel("k most recent context tokens")
    ax.set_ylabel("cumulative gradient (fraction of the total)")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return fig


def slopes_figure(results: StudyResults, group: str, variants: list[SlopeVariant], notes: dict):
    proto = slopes_protocol(results, variants)
    if proto is None:
        return None
    curves: list[Curve] = []
    for v in variants:
        mark = " (did not learn)" if results.learned(v.pe) is False else ""
        c = ppl_curve((v.label or v.pe) + mark, (results.eval.get(v.pe) or {}).get(proto), len(curves))
        if c is not None:
            curves.append(c)
    if not curves:
        return None
    fig = new_figure(6.4, 4.0)
    ppl_axes(fig.add_subplot(), curves, results.train_length, f"ALiBi slopes: {group} ({proto})")
    notes[f"slopes_{slug(group)}"] = CAPTIONS["slopes"].format(group=group, protocol=proto)
    return fig


def extrapolation_figures(results: StudyResults, notes: dict, out_dir: Path) -> list[tuple[str, Callable[[], Any]]]:
    """The extrapolation experiments' figures: 000 Figs. 3-7, 003 Fig. 4 and the ALiBi-slope curves."""
    plan = [(f"ppl_{p}", (lambda p=p: ppl_figure(results, p))) for p in PROTOCOLS]
    plan += [
        ("heatmaps", lambda: heatmaps_figure(results, notes, out_dir)),
        ("trf_curves", lambda: trf_curves_figure(results, notes)),
        ("trf_erf", lambda: trf_erf_figure(results, notes)),
        ("grad_curves", lambda: grad_curves_figure(results, notes)),
    ]
    plan += [
        (f"slopes_{slug(g)}", (lambda g=g, vs=vs: slopes_figure(results, g, vs, notes)))
        for g, vs in slope_groups(results).items()
    ]
    return plan
