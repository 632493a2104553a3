"""Figures of the theory engine (matplotlib, Agg canvas; every function writes PNG + SVG).

* :func:`heatmap`: exp(r(i - j)) over query i and key j (000 Fig. 7).
* :func:`trf_curves`: TRF n(eps) in tokens against eps, log axes (000 Fig. 6; optionally
  divided by one constant common to all curves, which keeps their order).
* :func:`partial_sums_plot`: S(L) = sum_{t<L} b_t against L (convergent series flatten
  out at B, divergent ones keep growing, perhaps beyond the drawn L: the legend gives each verdict).

The figures are drawn on explicit ``Figure`` objects with an Agg canvas, so
importing this module never changes the pyplot backend of the caller.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from extrap.errors import ExtrapError
from extrap.io import slug
from extrap.plotting import new_figure, save_figure
from extrap.positional.base import BiasRPE, Scheme
from extrap.positional.content import ContentBias
from extrap.positional.conventions import distance
from extrap.theory.analysis import analyse, eps_key, not_applicable_reason, partial_sums, resolve

HEATMAP_CMAP = "viridis"  # perceptually uniform: brightness rises with the value
PLOT_MAX = 1e250  # largest S(L) drawn: the axis margins must stay within float64
DEFAULT_EPS_GRID = tuple(float(f"{x:.0e}") for x in np.logspace(-1, -8, 15))


LINESTYLES = ("-", "--", ":", "-.")  # after the 10 colours of the default cycle, the next curves change style


@dataclass(frozen=True)
class CurveStyle:
    """A curve's matplotlib colour and line style (``ax.plot(..., color=s.color, ls=s.ls)``)."""

    color: str
    ls: str


def curve_style(k: int) -> CurveStyle:
    """Colour and line style of the k-th curve of a figure: no two of the first 40 curves share both."""
    return CurveStyle(color=f"C{k % 10}", ls=LINESTYLES[(k // 10) % len(LINESTYLES)])


def luminance(rgba) -> float:
    """Relative luminance of an sRGB colour (ITU-R BT.709 weights on linearised channels, WCAG 2.x)."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3]]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def weight_direction(cmap) -> str:
    """ "brighter" when the colormap's colour for the highest value is lighter than for the lowest, else "darker"."""
    return "brighter" if luminance(cmap(1.0)) > luminance(cmap(0.0)) else "darker"


def heatmap(
    scheme: Scheme | str,
    out_dir: str | Path | None = None,
    head: int = 0,
    num_heads: int = 8,
    values: Mapping[str, torch.Tensor] | None = None,
    size: int = 64,
    stem: str | None = None,
    ax=None,
) -> list[Path]:
    """exp(r(i - j)) for 0 <= j <= i < size (upper triangle masked), one head (000 Fig. 7).

    With ``ax`` it draws on those axes (for a panel of a larger figure) and saves nothing.
    """
    scheme = resolve(scheme)
    if not isinstance(scheme, BiasRPE):
        raise ExtrapError(f"{scheme.spec}: {not_applicable_reason(scheme)}; there is no bias to plot")
    if isinstance(scheme, ContentBias) and scheme.static is None:  # Shaw: nothing of i - j alone to draw
        if ax is not None:
            ax.text(0.5, 0.5, "no bias of i - j alone:\nq·a_r depends on the query", ha="center", fontsize=7)
        return []
    if not 0 <= head < num_heads:
        raise ExtrapError(f"head {head} out of range 0..{num_heads - 1}")
    values = scheme.init_values(num_heads) if values is None else values
    values = {k: v.detach().double() for k, v in values.items()}
    i = torch.arange(size, dtype=torch.float64)
    dist = distance(i[:, None], i[None, :]).clamp_min(0)
    kwargs = {"i": i[:, None].expand(size, size)} if scheme.adds_bias and not scheme.is_toeplitz else {}
    r = scheme.bias(dist, values, **kwargs)
    r = r[head if r.shape[0] > 1 else 0]
    label = "exp(r(i - j))"
    w = torch.exp(r)
    if not bool(torch.isfinite(w[torch.isfinite(r)]).all()):  # weights beyond float64: scale by the largest
        w, label = torch.exp(r - r[torch.isfinite(r)].max()), "exp(r(i - j) - max r)"
    w = np.where(np.tril(np.ones((size, size), dtype=bool)), w.numpy(), np.nan)
    own = ax is None
    fig = new_figure(5.2, 4.6) if own else ax.figure
    ax = fig.add_subplot() if own else ax
    im = ax.imshow(w, cmap=HEATMAP_CMAP, origin="upper", interpolation="nearest")
    bar = fig.colorbar(im, ax=ax, shrink=1.0 if own else 0.8)
    bar.set_label(f"{label}, {weight_direction(im.cmap)} = more weight", fontsize=None if own else 6)
    if not own:  # a panel of a larger figure: its scale as small as its label
        bar.ax.tick_params(labelsize=6)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_title(f"{scheme.spec}, head {head}")
    if not own:
        return []
    return save_figure(fig, out_dir, stem or f"heatmap_{slug(scheme.spec)}_h{head}")


def trf_curves(
    schemes: Sequence[Scheme | str],
    out_dir: str | Path | None = None,
    eps_grid: Iterable[float] = DEFAULT_EPS_GRID,
    head: int | None = 0,
    num_heads: int = 8,
    normalise: bool = False,
    stem: str = "trf_curves",
    ax=None,
) -> list[Path]:
    """TRF n(ε) (000 Eq. 22) of each convergent scheme against ε, on log axes with ε decreasing to the right.

    ``head``: one head, or None for the widest head at each ε (the largest n(ε) over heads).
    ``normalise``: divide every curve by one common constant, the largest n(ε) drawn (000 Fig. 6
    normalises for display); one constant for all curves keeps their order, so a scheme whose
    TRF is larger is drawn higher at every ε.  With ``ax`` it draws on those axes and saves nothing.
    """
    eps_grid = sorted(set(float(e) for e in eps_grid), reverse=True)
    own = ax is None
    fig = new_figure() if own else ax.figure
    ax = fig.add_subplot() if own else ax
    curves, skipped = trf_points(schemes, eps_grid, head, num_heads)
    top = max((n for _, pts in curves for _, n in pts), default=1)
    scale = top if normalise else 1
    for k, (label, pts) in enumerate(curves):
        style = curve_style(k)
        ax.plot(
            [e for e, _ in pts],
            [n / scale for _, n in pts],
            marker="o",
            ms=3,
            label=label,
            color=style.color,
            ls=style.ls,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()  # smaller ε (stricter) to the right, where the TRF is larger
    ax.set_xlabel("ε (bias mass allowed beyond the receptive field)")
    ax.set_ylabel(f"TRF n(ε) / {top:,} (the largest drawn)" if normalise else "TRF n(ε) (tokens)")
    which = "widest head" if head is None else f"head {head}"
    title = f"Theoretical receptive field (000 Eq. 22), {which}"
    if skipped:
        title += "\nnot convergent / no TRF: " + ", ".join(skipped)
    ax.set_title(title, fontsize=9)
    if ax.lines:
        ax.legend(fontsize=8)
    return save_figure(fig, out_dir, stem) if own else []


def trf_points(
    schemes: Sequence[Scheme | str], eps_grid: list[float], head: int | None, num_heads: int
) -> tuple[list[tuple[str, list[tuple[float, int]]]], list[str]]:
    """([(spec, [(ε, n(ε))])] of the convergent schemes, [specs skipped]); ``head`` None: widest head."""
    curves, skipped = [], []
    for s in schemes:
        scheme = resolve(s)
        heads = None if not_applicable_reason(scheme) or head is None else [head]
        res = analyse(scheme, num_heads, eps=eps_grid, heads=heads)
        pts = []
        for e in eps_grid:
            ns = [r.trf.get(eps_key(e)) for r in res]
            if ns and all(n is not None for n in ns):
                pts.append((e, max(ns)))
        if any(r.verdict != "converges" for r in res) or not pts:
            skipped.append(scheme.spec)
        else:
            curves.append((scheme.spec, pts))
    return curves, skipped


def series_verdict(scheme: Scheme, head: int, num_heads: int) -> str:
    """The legend's word for a head's series (000 Theorem 0.4): a divergent one can look flat over the drawn L."""
    r = analyse(scheme, num_heads, eps=(), lengths=(), heads=[min(head, num_heads - 1)])[0]
    if r.verdict == "converges" and r.series_sum is not None:
        return f"converges, B = {float(r.series_sum):.4g}"
    return r.verdict


def partial_sums_plot(
    schemes: Sequence[Scheme | str],
    out_dir: str | Path,
    max_length: int = 16384,
    head: int = 0,
    num_heads: int = 8,
    stem: str = "partial_sums",
) -> list[Path]:
    """S(L) = sum_{t<L} exp(r(t)) against L on log-log axes, one curve per scheme."""
    lengths = sorted({int(round(x)) for x in np.logspace(0, math.log10(max_length), 40)})
    fig = new_figure()
    ax = fig.add_subplot()
    beyond = []
    for s in schemes:
        scheme = resolve(s)
        if not_applicable_reason(scheme):
            continue
        S = partial_sums(scheme, lengths, num_heads)
        row = S[min(head, S.shape[0] - 1)].numpy()
        shown = (row > 0) & (row < PLOT_MAX)  # a log axis (with its margins) holds neither 0 nor ~1e308
        if not shown.all():
            beyond.append(scheme.spec)
        if shown.any():
            label = f"{scheme.spec} ({series_verdict(scheme, head, num_heads)})"
            style = curve_style(len(ax.lines))
            ax.plot(np.array(lengths)[shown], row[shown], label=label, color=style.color, ls=style.ls)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("L (distances t = 0 … L−1 summed, in tokens)")
    ax.set_ylabel("S(L) = sum_{t<L} exp(r(t))")
    title = f"Partial sums of the bias weights exp(r(t)) before the softmax, head {head}"
    if beyond:
        title += f"\nS(L) is 0 or above {PLOT_MAX:.0e} for some L, not drawn: " + ", ".join(beyond)
    ax.set_title(title, fontsize=9)
    if ax.lines:
        ax.legend(fontsize=8)
    return save_figure(fig, out_dir, stem)
