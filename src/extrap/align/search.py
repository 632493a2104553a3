"""004 Algorithm 1 on a model: the τ at L_ex whose attention sharpness matches L_tr's at τ = 1.

* **Global** (:func:`algorithm1`): target S_tr = S(L_tr, τ=1); curve
  S_ex(τ) for τ = 1.0, 0.95, ..., 0.5 (the paper's grid, 004 Table 5); the grid
  τ is the one with the *smallest absolute difference* |S_ex(τ) - S_tr| (ties:
  the larger τ, i.e. the smaller intervention).  The 0.05 step moves P_max by
  much more than 0.01 on small models, so by default a second stage refines it:
  if S_ex(τ) - S_tr changes sign between the chosen grid point and a grid
  neighbour, that bracket is bisected ``refine_steps`` times (default 6, a
  resolution of 0.05 / 64 < 0.001) and the best τ seen overall is returned.
  ``refine=False`` gives the paper's grid answer exactly.  When the target lies
  outside the curve (it needs τ < 0.5, or L_ex <= L_tr) the grid end is kept and
  ``at_grid_edge`` is set.
* **Per layer** (``per_layer=True``, 004 §8 suggests it): greedy, layer by
  layer.  Layer l's softmax rows depend only on τ_0..τ_l, so with τ_0..τ_{l-1}
  already fixed, τ_l is searched (same grid and refinement) so that layer l's
  statistic matches *layer l's own* L_tr value.  Each search runs the layers
  up to l only.  Independent per-layer matching under one shared τ sweep
  would be inconsistent (layer l's curve moves when earlier layers change).
  Measured on 4-layer, d=64 models trained 400 steps at L_tr = 64 (KERPLE-log,
  ALiBi, RoPE; L_ex = 128..1024): per-layer τ matches every layer's P_max to
  1e-4 where one global τ leaves per-layer gaps of 0.002-0.05, and its
  perplexity is slightly lower than the global P_max τ's in 10 of 11 cases
  (ALiBi at 1024: 14.24 vs 14.30) -- but on these causal LMs neither beats
  τ = 1 (13.71): aligning sharpness is not the same as lowering perplexity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from extrap.align.formulas import (
    DEFAULT_GRID,
    REFINE_STEPS,
    SEARCH_MODES,
    Search,
    check_grid,
    check_lengths,
    check_mode,
    search_tau,
)
from extrap.align.probe import DEFAULT_SEGMENTS, ProbedLM, Prober
from extrap.align.records import Algorithm1, Stats

# A cache of probes: (length, one τ per layer, last layer run) -> Stats (:class:`Prober` and the study's own)
Probe = Callable[..., Stats]


def algorithm1(
    model: ProbedLM,
    stream: torch.Tensor | None,
    train_length: int,
    length: int,
    mode: str = "pmax",
    *,
    grid: Sequence[float] = DEFAULT_GRID,
    per_layer: bool = False,
    segments: int = DEFAULT_SEGMENTS,
    refine: bool = True,
    refine_steps: int = REFINE_STEPS,
    max_length: int | None = None,
    prober: Probe | None = None,
) -> Algorithm1:
    """004 Algorithm 1: the τ at L_ex whose average P_max (or entropy) matches L_tr's at τ = 1.

    With ``per_layer`` the result holds one search per layer (its ``tau`` is a tuple).  ``prober`` lets a
    caller share its cache of probes (any callable like :class:`Prober`; then ``stream`` may be None).
    """
    check_mode(mode, SEARCH_MODES)
    check_lengths(train_length, [length], max_length)
    grid = check_grid(grid)
    R = model.shape.n_layer
    probe = prober or Prober(model, stream, segments)
    ref = probe(train_length, [1.0] * R)
    if not per_layer:
        res = search_tau(lambda t: probe(length, [t] * R).get(mode), ref.get(mode), grid, refine, refine_steps)
        return Algorithm1(res.target, search=res)
    return Algorithm1(ref.get(mode), layers=_layer_by_layer(probe, ref, R, length, mode, grid, refine, refine_steps))


def _layer_by_layer(
    probe, ref: Stats, R: int, length: int, mode: str, grid, refine, refine_steps
) -> tuple[Search, ...]:
    """Greedy per-layer search: τ_l with τ_0..τ_{l-1} fixed and later layers not run."""
    taus: list[float] = []
    layers = []
    for layer in range(R):

        def stat(t, layer=layer):
            return probe(length, taus + [t] + [1.0] * (R - layer - 1), upto=layer).get(mode, layer)

        res = search_tau(stat, ref.get(mode, layer), grid, refine, refine_steps)
        taus.append(res.tau)
        layers.append(res)
    return tuple(layers)
