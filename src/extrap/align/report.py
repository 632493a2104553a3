"""The alignment report and the automatic temperature on a model (004 §6, Algorithm 1).

:func:`closed_forms` (σ and l_max from the layer-0 logits, then Prop. 1, Prop. 2 and the log-length
rule), :func:`aligned_temperature` (the τ that ``--temperature auto`` uses at one L_ex) and
:func:`align_report` (``extrap align``: per L_ex, the chosen τ, Algorithm 1's curve, the closed forms
and P_max / H before and after).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from extrap.align.formulas import (
    DEFAULT_GRID,
    SEARCH_MODES,
    check_grid,
    check_lengths,
    check_mode,
    log_length_tau,
    prop1,
    prop1_explain,
    prop1_tau,
    prop2_tau,
    sigma_of,
)
from extrap.align.probe import DEFAULT_SEGMENTS, Prober, averaged_layer_logits, segments_of
from extrap.align.search import algorithm1
from extrap.errors import ExtrapError
from extrap.model.protocol import ExtrapLM, temperature


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
    probe = Prober(model, stream, segments)
    ref = probe(train_length, [1.0] * model.shape.n_layer)
    cf_cache: dict = {}
    settings = dict(mode=mode, per_layer=per_layer, segments=segments, grid=grid, refine=refine, max_length=max_length)
    rows = [_report_or_error(model, stream, train_length, L, probe, cf_cache, settings) for L in lengths]
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


def _report_or_error(model, stream, train_length, L, probe, cf_cache, settings: dict) -> dict:
    """One L_ex of :func:`align_report`, or its failure recorded (``error``): the other lengths are kept."""
    try:
        return _report_length(model, stream, train_length, L, probe, cf_cache, **settings)
    except ExtrapError as e:
        return {"length": L, "tau": None, "error": str(e)}
    except torch.OutOfMemoryError:
        return {"length": L, "tau": None, "error": f"out of memory at L = {L}"}


def _report_length(
    model, stream, train_length, L, probe, cf_cache, *, mode, per_layer, segments, grid, refine, max_length
) -> dict:
    """One L_ex of :func:`align_report`; probes and closed forms are shared across lengths through the caches."""
    R = model.shape.n_layer
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
    return row
