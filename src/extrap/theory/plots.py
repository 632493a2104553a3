"""Figures of the theory engine (matplotlib, Agg canvas; every function writes PNG + SVG).

* :func:`heatmap`: exp(r(i - j)) over query i and key j (000 Fig. 7).
* :func:`trf_curves`: TRF(eps) normalised by its value at the smallest eps, eps on a
  log axis (000 Fig. 6).
* :func:`partial_sums_plot`: S(L) = sum_{t<L} b_t against L (convergent series flatten
  out at B, divergent ones keep growing).

The figures are drawn on explicit ``Figure`` objects with an Agg canvas, so
importing this module never changes the pyplot backend of the caller.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from extrap.errors import ExtrapError
from extrap.io import slug
from extrap.plotting import new_figure, save_figure
from extrap.positional.base import BiasRPE, Scheme
from extrap.positional.conventions import distance
from extrap.theory.analysis import analyse, eps_key, not_applicable_reason, partial_sums, resolve

PLOT_MAX = 1e250  # largest S(L) drawn: the axis margins must stay within float64
DEFAULT_EPS_GRID = tuple(float(f"{x:.0e}") for x in np.logspace(-1, -8, 15))


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
    im = ax.imshow(w, cmap="viridis", origin="upper", interpolation="nearest")
    fig.colorbar(im, ax=ax, label=label if own else None, shrink=1.0 if own else 0.8)
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
    head: int = 0,
    num_heads: int = 8,
    normalise: bool = True,
    stem: str = "trf_curves",
    ax=None,
) -> list[Path]:
    """TRF(eps) of each convergent scheme's head, divided by TRF at the smallest eps (000 Fig. 6).

    With ``ax`` it draws on those axes and saves nothing.
    """
    eps_grid = sorted(set(float(e) for e in eps_grid), reverse=True)
    own = ax is None
    fig = new_figure() if own else ax.figure
    ax = fig.add_subplot() if own else ax
    skipped = []
    for s in schemes:
        scheme = resolve(s)
        res = analyse(scheme, num_heads, eps=eps_grid, heads=None if not_applicable_reason(scheme) else [head])
        r = res[0]
        pts = [(e, r.trf.get(eps_key(e))) for e in eps_grid]
        pts = [(e, n) for e, n in pts if n]
        if r.verdict != "converges" or not pts:
            skipped.append(scheme.spec)
            continue
        ref = pts[-1][1] if normalise else 1
        ax.plot([e for e, _ in pts], [n / ref for _, n in pts], marker="o", ms=3, label=scheme.spec)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("eps")
    ax.set_ylabel("TRF(eps) / TRF(eps_min)" if normalise else "TRF(eps)")
    title = f"Theoretical receptive field (000 Eq. 22), head {head}"
    if skipped:
        title += "\nnot convergent / no TRF: " + ", ".join(skipped)
    ax.set_title(title, fontsize=9)
    if ax.lines:
        ax.legend(fontsize=8)
    return save_figure(fig, out_dir, stem) if own else []


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
            ax.plot(np.array(lengths)[shown], row[shown], label=scheme.spec)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("L (distances summed)")
    ax.set_ylabel("S(L) = sum_{t<L} exp(r(t))")
    title = f"Partial sums of the attention weights, head {head}"
    if beyond:
        title += f"\nS(L) is 0 or above {PLOT_MAX:.0e} for some L, not drawn: " + ", ".join(beyond)
    ax.set_title(title, fontsize=9)
    if ax.lines:
        ax.legend(fontsize=8)
    return save_figure(fig, out_dir, stem)
