"""Attention alignment by softmax temperature (004: Chi, Fan, Rudnicky).

Longer inputs flatten attention: more keys compete for the same unit of softmax
mass, so the average maximum probability P_max falls and the average entropy H
rises ("dispersed attention", 004 Table 1).  004 sharpens every softmax at
L_ex with a temperature τ < 1, softmax((q k / sqrt(d) + r) / τ), chosen so that
the sharpness at L_ex matches the sharpness at L_tr with τ = 1.  Nothing is
fine-tuned; τ is applied only through the model's ``set_temperature`` (:class:`extrap.lm.ExtrapLM`).

Where it lives
--------------
* :mod:`extrap.align_probe`: probing a model (P_max / entropy statistics over
  all softmax rows, averaged layer-0 logits).
* :mod:`extrap.align_search`: Algorithm 1, global or layer by layer.
* :mod:`extrap.align_formulas`: the model-free part (Props. 1-2, the log-length
  rule, the τ search itself).
* here: the closed forms on a model (004 §6, :func:`closed_forms`: σ and l_max
  from the layer-0 logits, then Prop. 1, Prop. 2 and the log-length rule),
  :func:`aligned_temperature`, the entry point for an automatic temperature
  (``eval --temperature auto``), and :func:`align_report`.

``extrap.align`` re-exports the public names of all three, so users import
alignment from one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
from extrap.align_probe import (
    DEFAULT_SEGMENTS,
    TOKEN_BUDGET,
    Prober,
    Stats,
    attention_stats,
    averaged_layer_logits,
    current_temperature,
    dispersion,
    layer_logit_blocks,
    segments_of,
)
from extrap.align_search import algorithm1
from extrap.errors import ExtrapError
from extrap.lm import ExtrapLM, temperature

__all__ = [
    "DEFAULT_GRID",
    "DEFAULT_SEGMENTS",
    "MAX_PROBE_LENGTH",
    "MODES",
    "REFINE_STEPS",
    "SEARCH_MODES",
    "TOKEN_BUDGET",
    "TemperatureSpec",
    "algorithm1",
    "align_report",
    "aligned_temperature",
    "attention_stats",
    "averaged_layer_logits",
    "averaged_sorted_logits",
    "check_grid",
    "check_lengths",
    "check_layer_taus",
    "check_mode",
    "check_tau",
    "closed_forms",
    "current_temperature",
    "dispersion",
    "layer_logit_blocks",
    "log_length_tau",
    "logit_row_stats",
    "parse_temperature_spec",
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


PER_LAYER = "per-layer"
TEMPERATURE_FORMS = "none, TAU, TAU_1,...,TAU_R (one per layer) or auto[:MODE][:per-layer]"


@dataclass(frozen=True)
class TemperatureSpec:
    """A temperature request: none, one τ, one τ per layer, or ``auto`` (004 alignment at each L_ex).

    ``kind``: "none" | "fixed" | "layers" | "auto".  ``tau``: the τ (fixed) or the τs (layers).
    ``mode``: the alignment mode named after ``auto:`` (None: the caller's default).  ``per_layer``:
    ``auto:per-layer``, Algorithm 1 layer by layer (one aligned τ per layer).
    """

    kind: str
    tau: float | tuple[float, ...] | None = None
    mode: str | None = None
    per_layer: bool = False

    def value(self) -> float | list[float] | str | None:
        """The canonical form: None, a float, a list of floats, or "auto[:MODE][:per-layer]"."""
        if self.kind == "none":
            return None
        if self.kind == "fixed":
            return float(self.tau)
        if self.kind == "layers":
            return list(self.tau)
        return ":".join(["auto", *([self.mode] if self.mode else []), *([PER_LAYER] if self.per_layer else [])])


def parse_temperature_spec(value) -> TemperatureSpec:
    """Read a temperature given as None, a number, a list of numbers, or text.

    Text: ``none``; ``TAU``; ``TAU_1,...,TAU_R`` (one per layer, checked against the model by
    :func:`check_layer_taus` where the model is known); ``auto``, ``auto:MODE``, ``auto:per-layer``
    or ``auto:MODE:per-layer``.  A mistake raises ExtrapError in one line.
    """
    if isinstance(value, TemperatureSpec):
        return value
    if value is None:
        return TemperatureSpec("none")
    if isinstance(value, (list, tuple)):
        if not value:
            raise ExtrapError("temperature: the list of per-layer values is empty")
        return TemperatureSpec("layers", tuple(check_tau(list(value))))
    if not isinstance(value, str):
        return TemperatureSpec("fixed", check_tau(value))
    text = value.strip().lower()
    if text in ("", "none"):
        return TemperatureSpec("none")
    if text.split(":")[0] == "auto":
        return _auto_spec(text.split(":")[1:])
    try:
        taus = [float(x) for x in text.split(",")]
    except ValueError:
        raise ExtrapError(f"temperature must be {TEMPERATURE_FORMS}, got {value!r}") from None
    if "," in text:
        return TemperatureSpec("layers", tuple(check_tau(taus)))
    return TemperatureSpec("fixed", check_tau(taus[0]))


def _auto_spec(parts: list[str]) -> TemperatureSpec:
    """``auto`` followed by ``parts`` (the words after each colon): at most one mode and ``per-layer``."""
    modes = [p for p in parts if p != PER_LAYER]
    if len(modes) > 1 or parts.count(PER_LAYER) > 1:
        raise ExtrapError(f"temperature must be {TEMPERATURE_FORMS}, got {':'.join(['auto', *parts])!r}")
    mode = check_mode(modes[0]) if modes else None
    per_layer = PER_LAYER in parts
    if per_layer and mode is not None and mode not in SEARCH_MODES:
        raise ExtrapError(f"per-layer temperatures need an Algorithm 1 mode (pmax or entropy), not {mode}")
    return TemperatureSpec("auto", mode=mode, per_layer=per_layer)


def check_layer_taus(taus: Sequence[float], n_layer: int) -> list[float]:
    """One positive finite τ per layer: a list of another length is refused in one line."""
    taus = check_tau(list(taus))
    if len(taus) != n_layer:
        raise ExtrapError(
            f"temperature: {len(taus)} values given for a model with {n_layer} layers (give one τ per layer)"
        )
    return taus


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
