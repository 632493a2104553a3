"""Attention alignment by softmax temperature (004: Chi, Fan, Rudnicky).

Longer inputs flatten attention: more keys compete for the same unit of softmax
mass, so the average maximum probability P_max falls and the average entropy H
rises ("dispersed attention", 004 Table 1).  004 sharpens every softmax at
L_ex with a temperature τ < 1, softmax((q k / sqrt(d) + r) / τ), chosen so that
the sharpness at L_ex matches the sharpness at L_tr with τ = 1.  Nothing is
fine-tuned; τ is applied only through the model's ``set_temperature`` (:class:`extrap.lm.ExtrapLM`).

What is here
------------
* **Statistics** (:func:`attention_stats`): the average over *every* softmax
  row (all layers, heads, query positions, segments) of P_max and of H, plus the
  same per layer.  N = R x H x L rows per segment, each with weight 1, as in 004
  §4 ("averaged ... over all logit vectors").  The rows are causal, so row i has
  i + 1 keys; the first row is always one-hot.  Probabilities are consumed one
  layer at a time from the model's ``attention_probs`` stream (each layer's
  blocks are reduced to sums and dropped before the next layer runs), so for
  an extrap GPT at most one layer's lower-triangular blocks exist at once and
  no (L, L) matrix is assembled.  Still O(L^2) time and memory per layer, so
  probing lengths are capped at :data:`MAX_PROBE_LENGTH` (4096; ``max_length=``
  raises the cap).
* **Algorithm 1** (:func:`algorithm1`): target S_tr = S(L_tr, τ=1); curve
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
* **Closed forms** (004 §6, :func:`closed_forms`): σ and l_max from the layer-0
  logits, then Prop. 1, Prop. 2 and the log-length rule of :mod:`extrap.align_formulas`.

:func:`aligned_temperature` is the entry point for an automatic temperature (``eval --temperature auto``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from extrap.align_formulas import (
    DEFAULT_GRID,
    MAX_PROBE_LENGTH,
    MODES,
    REFINE_STEPS,
    SEARCH_MODES,
    Search,
    averaged_sorted_logits,
    check_grid,
    check_lengths,
    check_mode,
    check_tau,
    log_length_tau,
    logit_row_stats,
    prop1,
    prop1_coefficients,
    prop1_explain,
    prop1_pmax,
    prop1_roots,
    prop1_tau,
    prop2_tau,
    resampled,
    row_stats,
    search_tau,
    sigma_of,
    sorted_centred,
)
from extrap.errors import ExtrapError
from extrap.lm import ExtrapLM, model_device, temperature

# The model-free formulas live in extrap.align_formulas; extrap.align re-exports them, so users import
# alignment from one place.
__all__ = [
    "DEFAULT_GRID",
    "DEFAULT_SEGMENTS",
    "MAX_PROBE_LENGTH",
    "MODES",
    "REFINE_STEPS",
    "SEARCH_MODES",
    "TOKEN_BUDGET",
    "algorithm1",
    "align_report",
    "aligned_temperature",
    "attention_stats",
    "averaged_layer_logits",
    "averaged_sorted_logits",
    "check_grid",
    "check_lengths",
    "check_mode",
    "check_tau",
    "closed_forms",
    "current_temperature",
    "dispersion",
    "layer_logit_blocks",
    "log_length_tau",
    "logit_row_stats",
    "prop1",
    "prop1_coefficients",
    "prop1_explain",
    "prop1_pmax",
    "prop1_roots",
    "prop1_tau",
    "prop2_tau",
    "resampled",
    "row_stats",
    "Search",
    "search_tau",
    "segments_of",
    "sigma_of",
    "sorted_centred",
    "Stats",
    "temperature",
]

DEFAULT_SEGMENTS = 4
TOKEN_BUDGET = 4096  # segments batched so that batch x length <= this


# ---------------------------------------------------------------------------
# probing a model: statistics per layer, one layer at a time
# ---------------------------------------------------------------------------
@dataclass
class Stats:
    """Average P_max and entropy over all softmax rows, overall and per layer."""

    pmax: float
    entropy: float
    layers: list  # [{"pmax", "entropy"}] per layer probed
    rows: int  # rows averaged per layer

    def get(self, mode: str, layer: int | None = None) -> float:
        check_mode(mode, SEARCH_MODES)
        return getattr(self, mode) if layer is None else self.layers[layer][mode]

    def to_dict(self) -> dict:
        return {
            "pmax": self.pmax,
            "entropy": self.entropy,
            "rows_per_layer": self.rows,
            "layers": [dict(v) for v in self.layers],
        }


def segments_of(stream: torch.Tensor, length: int, segments: int) -> torch.Tensor:
    """``segments`` windows of ``length`` tokens, starts spread evenly over the stream: (N, length).

    A 2-D ``stream`` (N, >= length) is taken as ready-made segments: the first ``length``
    tokens of every row (``segments`` is then ignored).
    """
    stream = torch.as_tensor(stream)
    if stream.dim() == 2:
        if stream.shape[1] < length:
            raise ExtrapError(f"the segments hold {stream.shape[1]} tokens, fewer than L={length}")
        return stream[:, :length].long()
    stream = stream.reshape(-1)
    if segments < 1:
        raise ExtrapError(f"segments must be >= 1, got {segments}")
    if stream.numel() < length:
        raise ExtrapError(f"the token stream has {stream.numel()} tokens, fewer than L={length}")
    span = stream.numel() - length
    starts = [round(span * i / max(1, segments - 1)) if segments > 1 else 0 for i in range(segments)]
    return torch.stack([stream[s : s + length] for s in starts]).long()


def _batches(seg: torch.Tensor, model: ExtrapLM):
    b = max(1, TOKEN_BUDGET // seg.shape[1])
    device = model_device(model)
    for i in range(0, seg.shape[0], b):
        yield seg[i : i + b].to(device)


@contextmanager
def _eval_mode(model: ExtrapLM):
    """Eval mode (no dropout) in the block; the previous mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def current_temperature(model: ExtrapLM) -> list[float]:
    return model.temperatures()


@torch.no_grad()
def attention_stats(model: ExtrapLM, segments: torch.Tensor, tau=None, *, upto_layer: int | None = None) -> Stats:
    """Average P_max and entropy of every softmax row of every layer, over ``segments`` (N, L).

    ``tau``: temperature for this probe (None: the model's current one).  ``upto_layer``:
    run the layers up to this one only (later layers are not reported).
    """
    last = model.shape.n_layer - 1 if upto_layer is None else int(upto_layer)
    sums = [[0.0, 0.0, 0] for _ in range(last + 1)]
    with _eval_mode(model), temperature(model, tau):
        for x in _batches(segments, model):
            for layer, blocks in model.attention_probs(x, upto_layer=last):
                acc = sums[layer]
                for _, p in blocks:
                    sp, sh, n = row_stats(p)
                    acc[0] += sp
                    acc[1] += sh
                    acc[2] += n
    layers = [{"pmax": s[0] / s[2], "entropy": s[1] / s[2]} for s in sums]
    return Stats(
        pmax=sum(v["pmax"] for v in layers) / len(layers),
        entropy=sum(v["entropy"] for v in layers) / len(layers),
        layers=layers,
        rows=sums[0][2],
    )


# ---------------------------------------------------------------------------
# layer-0 logits (closed forms)
# ---------------------------------------------------------------------------
@torch.no_grad()
def layer_logit_blocks(model: ExtrapLM, idx: torch.Tensor, layer: int = 0) -> list[torch.Tensor]:
    """The pre-softmax logit blocks (B, H, Lq, Lk) of one layer for input ``idx`` (B, L); -inf = masked."""
    return model.layer_logits(idx, layer)


@torch.no_grad()
def averaged_layer_logits(model: ExtrapLM, segments: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """004 §6: the averaged sorted (centred) logit vector of one layer over all H x L rows of all segments."""
    L = segments.shape[1]
    total = torch.zeros(L, dtype=torch.float64, device=model_device(model))
    rows = 0
    with _eval_mode(model):
        for x in _batches(segments, model):
            for blk in model.layer_logits(x, layer):
                s, n = sorted_centred(blk)
                total += resampled(s, n, L).sum(0)
                rows += s.shape[0]
    return (total / rows).cpu()


def closed_forms(
    model: ExtrapLM,
    stream: torch.Tensor,
    train_length: int,
    length: int,
    segments: int = DEFAULT_SEGMENTS,
    max_length: int | None = None,
    _cache: dict | None = None,
) -> dict:
    """σ_tr, σ_ex, l_max, P from layer 0 (τ = 1), and the τs of Prop. 1, Prop. 2 and the log-length rule."""
    check_lengths(train_length, [length], max_length)
    cache = _cache if _cache is not None else {}

    def avg(L):
        if ("avg", L) not in cache:
            cache[("avg", L)] = averaged_layer_logits(model, segments_of(stream, L, segments), 0)
        return cache[("avg", L)]

    with temperature(model, 1.0):
        a_tr, a_ex = avg(train_length), avg(length)
    s_tr, s_ex = sigma_of(a_tr), sigma_of(a_ex)
    lmax_tr, lmax_ex = float(a_tr.max()), float(a_ex.max())
    P_softmax = float(torch.softmax(a_tr, -1).max())
    P = math.exp(lmax_tr - math.log(train_length) - s_tr**2 / 2)  # 004 Eq. (2) solved for P
    p1 = prop1(train_length, length, s_tr, s_ex, P)
    d2 = s_tr**2 + 2 * math.log(length / train_length)
    return {
        "sigma_tr": s_tr,
        "sigma_ex": s_ex,
        "lmax_tr": lmax_tr,
        "lmax_ex": lmax_ex,
        "P": P,
        "P_softmax": P_softmax,
        "A": p1["A"],
        "B": p1["B"],
        "C": p1["C"],
        "prop1": p1["tau"],
        "prop1_status": p1["status"],
        "prop1_roots": p1["roots"],
        "prop1_peak_tau": p1["peak_tau"],
        "prop1_peak_pmax": p1["peak_pmax"],
        "prop1_note": None if p1["tau"] is not None else prop1_explain(p1, length),
        "prop1_softmax_P": prop1_tau(train_length, length, s_tr, s_ex, P_softmax),
        "prop2": prop2_tau(train_length, length, s_tr, s_ex) if d2 > 0 else None,
        "log_length": log_length_tau(train_length, length),
    }


# ---------------------------------------------------------------------------
# Algorithm 1 on a model
# ---------------------------------------------------------------------------
class _Prober:
    """Caches attention statistics per (length, τ-tuple, upto_layer) so the same probe never runs twice."""

    def __init__(self, model, stream, segments: int):
        self.model, self.stream, self.n = model, stream, segments
        self.cache: dict = {}
        self.segs: dict = {}

    def __call__(self, length: int, taus: Sequence[float], upto: int | None = None) -> Stats:
        key = (length, tuple(round(float(t), 12) for t in taus), upto)
        if key not in self.cache:
            if length not in self.segs:
                self.segs[length] = segments_of(self.stream, length, self.n)
            self.cache[key] = attention_stats(self.model, self.segs[length], list(taus), upto_layer=upto)
        return self.cache[key]


def algorithm1(
    model,
    stream: torch.Tensor,
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
    _prober: _Prober | None = None,
) -> dict:
    """004 Algorithm 1: the τ at L_ex whose average P_max (or entropy) matches L_tr's at τ = 1.

    Returns {"tau", "grid_tau", "target", "curve": [(τ, S(τ))], "refined", "at_grid_edge"}; with
    ``per_layer`` ``tau`` is a list (one per layer) and ``layers`` holds each layer's search.
    """
    check_mode(mode, SEARCH_MODES)
    check_lengths(train_length, [length], max_length)
    grid = check_grid(grid)
    R = model.shape.n_layer
    probe = _prober or _Prober(model, stream, segments)
    ref = probe(train_length, [1.0] * R)
    if not per_layer:
        res = search_tau(lambda t: probe(length, [t] * R).get(mode), ref.get(mode), grid, refine, refine_steps)
        return {
            "tau": res.tau,
            "grid_tau": res.grid_tau,
            "target": res.target,
            "value": res.value,
            "curve": res.curve,
            "refined": res.refined,
            "at_grid_edge": res.at_grid_edge,
        }
    taus: list[float] = []
    layers = []
    for layer in range(R):

        def stat(t, layer=layer):
            return probe(length, taus + [t] + [1.0] * (R - layer - 1), upto=layer).get(mode, layer)

        res = search_tau(stat, ref.get(mode, layer), grid, refine, refine_steps)
        taus.append(res.tau)
        layers.append(
            {
                "layer": layer,
                "tau": res.tau,
                "grid_tau": res.grid_tau,
                "target": res.target,
                "value": res.value,
                "curve": res.curve,
                "refined": res.refined,
                "at_grid_edge": res.at_grid_edge,
            }
        )
    return {
        "tau": taus,
        "grid_tau": [v["grid_tau"] for v in layers],
        "target": ref.get(mode),
        "layers": layers,
        "at_grid_edge": any(v["at_grid_edge"] for v in layers),
    }


def aligned_temperature(
    model,
    stream: torch.Tensor,
    train_length: int,
    length: int,
    mode: str = "pmax",
    per_layer: bool = False,
    segments: int = DEFAULT_SEGMENTS,
    *,
    grid: Sequence[float] = DEFAULT_GRID,
    refine: bool = True,
    max_length: int | None = None,
) -> float | list[float]:
    """The τ to use at L_ex = ``length`` (``--temperature auto``): one float, or one per layer.

    ``pmax`` / ``entropy``: Algorithm 1 (with refinement); ``prop1`` / ``prop2``: the closed
    forms from layer 0 (Prop. 1 without a valid root raises ExtrapError, saying why); ``log-length``:
    log_{L_ex} L_tr.  For L_ex <= L_tr the answer is 1.0 (nothing to align: the grid never
    goes above 1).  Only the token stream's attention is read, never its labels.
    """
    check_mode(mode)
    if int(train_length) < 2 or int(length) < 2:
        raise ExtrapError("lengths must be integers >= 2")
    if per_layer and mode not in SEARCH_MODES:
        raise ExtrapError(f"per-layer temperatures need an Algorithm 1 mode (pmax or entropy), not {mode}")
    R = model.shape.n_layer
    if length <= train_length:
        return [1.0] * R if per_layer else 1.0
    if mode == "log-length":
        return log_length_tau(train_length, length)
    if mode in SEARCH_MODES:
        return algorithm1(
            model,
            stream,
            train_length,
            length,
            mode,
            grid=grid,
            per_layer=per_layer,
            segments=segments,
            refine=refine,
            max_length=max_length,
        )["tau"]
    cf = closed_forms(model, stream, train_length, length, segments, max_length)
    tau = cf[mode]
    if tau is None or not (tau > 0 and math.isfinite(tau)):
        raise ExtrapError(
            (
                cf["prop1_note"]
                if mode == "prop1"
                else f"{mode} gives no usable temperature at "
                f"L_ex={length} (σ_tr={cf['sigma_tr']:.3g}, σ_ex={cf['sigma_ex']:.3g})"
            )
            + "; use pmax, entropy or log-length"
        )
    return float(tau)


def dispersion(
    model,
    stream: torch.Tensor,
    lengths: Sequence[int],
    segments: int = DEFAULT_SEGMENTS,
    tau=1.0,
    max_length: int | None = None,
) -> list[dict]:
    """004 Table 1: average P_max and entropy (overall and per layer) at each length, at temperature τ."""
    check_lengths(min(lengths), lengths, max_length)
    return [
        {"length": int(L), **attention_stats(model, segments_of(stream, int(L), segments), tau).to_dict()}
        for L in lengths
    ]


# ---------------------------------------------------------------------------
# a whole alignment report (CLI and Python API)
# ---------------------------------------------------------------------------
def align_report(
    model,
    stream: torch.Tensor,
    train_length: int,
    lengths: Sequence[int],
    mode: str = "pmax",
    *,
    per_layer: bool = False,
    segments: int = DEFAULT_SEGMENTS,
    grid: Sequence[float] = DEFAULT_GRID,
    refine: bool = True,
    max_length: int | None = None,
) -> dict:
    """Per L_ex: the chosen τ, Algorithm 1's curve(s), the closed-form τs, and P_max/H before and after."""
    check_mode(mode)
    if per_layer and mode not in SEARCH_MODES:
        raise ExtrapError(f"per-layer temperatures need an Algorithm 1 mode (pmax or entropy), not {mode}")
    lengths = sorted({int(L) for L in lengths})
    check_lengths(train_length, lengths, max_length)
    grid = check_grid(grid)
    R = model.shape.n_layer
    probe = _Prober(model, stream, segments)
    ref = probe(train_length, [1.0] * R)
    cf_cache: dict = {}
    rows = []
    for L in lengths:
        row: dict = {"length": L}
        cf = closed_forms(model, stream, train_length, L, segments, max_length, _cache=cf_cache)
        row["closed_form"] = cf
        if mode in SEARCH_MODES:
            a1 = algorithm1(
                model,
                stream,
                train_length,
                L,
                mode,
                grid=grid,
                per_layer=per_layer,
                segments=segments,
                refine=refine,
                _prober=probe,
                max_length=max_length,
            )
            row["algorithm1"] = a1
            tau = a1["tau"]
        elif mode == "log-length":
            tau = cf["log_length"]
        else:
            tau = cf[mode] if cf[mode] is not None and cf[mode] > 0 else None
            if tau is None:
                row["note"] = cf.get("prop1_note") if mode == "prop1" else f"{mode} gives no usable temperature"
        row["tau"] = tau
        row["before"] = probe(L, [1.0] * R).to_dict()
        row["after"] = probe(L, tau if isinstance(tau, list) else [tau] * R).to_dict() if tau is not None else None
        rows.append(row)
    return {
        "train_length": train_length,
        "mode": mode,
        "per_layer": per_layer,
        "segments": segments,
        "grid": list(grid),
        "refine": refine,
        "reference": {"length": train_length, **ref.to_dict()},
        "lengths": rows,
    }
