"""The alignment report and the automatic temperature on a model (004 §6, Algorithm 1).

:func:`closed_forms` (σ and l_max from the layer-0 logits, then Prop. 1, Prop. 2 and the log-length
rule), :func:`aligned_temperature` (the τ that ``--temperature auto`` uses at one L_ex) and
:func:`align_report` (``extrap align``: per L_ex, the chosen τ, Algorithm 1's curve, the closed forms
and P_max / H before and after).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from extrap.align.formulas import (
    DEFAULT_GRID,
    SEARCH_MODES,
    check_grid,
    check_lengths,
    check_mode,
    log_length_tau,
    prop1,
    prop1_tau,
    prop2_tau,
    sigma_of,
)
from extrap.align.probe import DEFAULT_SEGMENTS, ProbedLM, Prober, averaged_layer_logits, segments_of
from extrap.align.records import (
    AlignReport,
    AlignSettings,
    ClosedForms,
    LengthReport,
    LengthStats,
    Tau,
    per_layer_taus,
)
from extrap.align.search import algorithm1
from extrap.errors import ExtrapError
from extrap.model.protocol import temperature

# The averaged sorted layer-0 logit vector at a length (004 §6): (L,) float64
Averages = Callable[[int], torch.Tensor]


class AveragedLogits:
    """004 §6's averaged sorted layer-0 logits per length, over ``segments`` windows of ``stream``, computed once."""

    def __init__(self, model: ProbedLM, stream: torch.Tensor, segments: int = DEFAULT_SEGMENTS):
        self.model, self.stream, self.segments = model, stream, segments
        self.cache: dict[int, torch.Tensor] = {}

    def __call__(self, length: int) -> torch.Tensor:
        if length not in self.cache:
            self.cache[length] = averaged_layer_logits(self.model, segments_of(self.stream, length, self.segments), 0)
        return self.cache[length]


def closed_forms(
    model: ProbedLM,
    stream: torch.Tensor | None,
    train_length: int,
    length: int,
    segments: int = DEFAULT_SEGMENTS,
    max_length: int | None = None,
    *,
    averages: Averages | None = None,
) -> ClosedForms:
    """σ_tr, σ_ex, l_max, P from layer 0 (τ = 1), and the τs of Prop. 1, Prop. 2 and the log-length rule.

    ``averages``: where the averaged layer-0 logits come from (default: ``segments`` windows of ``stream``;
    a caller that probes several lengths shares one :class:`AveragedLogits`).
    """
    check_lengths(train_length, [length], max_length)
    avg = averages or AveragedLogits(model, stream, segments)
    with temperature(model, 1.0):
        a_tr, a_ex = avg(train_length), avg(length)
    s_tr, s_ex = sigma_of(a_tr), sigma_of(a_ex)
    lmax_tr, lmax_ex = float(a_tr.max()), float(a_ex.max())
    P_softmax = float(torch.softmax(a_tr, -1).max())
    P = math.exp(lmax_tr - math.log(train_length) - s_tr**2 / 2)  # 004 Eq. (2) solved for P
    d2 = s_tr**2 + 2 * math.log(length / train_length)
    return ClosedForms.of(
        prop1(train_length, length, s_tr, s_ex, P),
        length,
        (s_tr, s_ex),
        (lmax_tr, lmax_ex),
        P_softmax=P_softmax,
        prop1_softmax_P=prop1_tau(train_length, length, s_tr, s_ex, P_softmax),
        prop2=prop2_tau(train_length, length, s_tr, s_ex) if d2 > 0 else None,
        log_length=log_length_tau(train_length, length),
    )


def aligned_temperature(
    model: ProbedLM,
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
        tau = algorithm1(
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
        ).tau
        return list(tau) if isinstance(tau, tuple) else tau
    cf = closed_forms(model, stream, train_length, length, segments, max_length)
    tau = cf.tau(mode)
    if tau is None or not (tau > 0 and math.isfinite(tau)):
        raise ExtrapError(
            (
                cf.prop1_note
                if mode == "prop1"
                else f"{mode} gives no usable temperature at "
                f"L_ex={length} (σ_tr={cf.sigma_tr:.3g}, σ_ex={cf.sigma_ex:.3g})"
            )
            + "; use pmax, entropy or log-length"
        )
    return float(tau)


def align_report(model: ProbedLM, stream: torch.Tensor, settings: AlignSettings) -> AlignReport:
    """Per L_ex: the chosen τ, Algorithm 1's curve(s), the closed-form τs, and P_max/H before and after."""
    mode = check_mode(settings.mode)
    if settings.per_layer and mode not in SEARCH_MODES:
        raise ExtrapError(f"per-layer temperatures need an Algorithm 1 mode (pmax or entropy), not {mode}")
    lengths = sorted(set(settings.lengths))
    check_lengths(settings.train_length, lengths, settings.max_length)
    check_grid(settings.grid)
    probe = Prober(model, stream, settings.segments)
    ref = probe(settings.train_length, [1.0] * model.shape.n_layer)
    averages = AveragedLogits(model, stream, settings.segments)
    rows = [_report_or_error(model, L, probe, averages, settings) for L in lengths]
    return AlignReport(
        train_length=settings.train_length,
        mode=mode,
        per_layer=settings.per_layer,
        segments=settings.segments,
        grid=settings.grid,
        refine=settings.refine,
        reference=LengthStats(settings.train_length, ref),
        lengths=tuple(rows),
    )


def _report_or_error(model, L: int, probe: Prober, averages: Averages, settings: AlignSettings) -> LengthReport:
    """One L_ex of :func:`align_report`, or its failure recorded (``error``): the other lengths are kept."""
    try:
        return _report_length(model, L, probe, averages, settings)
    except ExtrapError as e:
        return LengthReport(L, error=str(e))
    except torch.OutOfMemoryError:
        return LengthReport(L, error=f"out of memory at L = {L}")


def _report_length(model, L: int, probe: Prober, averages: Averages, s: AlignSettings) -> LengthReport:
    """One L_ex of :func:`align_report`; probes and closed forms are shared across lengths through the caches."""
    R = model.shape.n_layer
    cf = closed_forms(model, None, s.train_length, L, s.segments, s.max_length, averages=averages)
    a1, note = None, None
    tau: Tau | None
    if s.mode in SEARCH_MODES:
        a1 = algorithm1(
            model,
            None,
            s.train_length,
            L,
            s.mode,
            grid=s.grid,
            per_layer=s.per_layer,
            segments=s.segments,
            refine=s.refine,
            prober=probe,
            max_length=s.max_length,
        )
        tau = a1.tau
    elif s.mode == "log-length":
        tau = cf.log_length
    else:
        tau = cf.tau(s.mode) if cf.tau(s.mode) is not None and cf.tau(s.mode) > 0 else None
        if tau is None:
            note = cf.prop1_note if s.mode == "prop1" else f"{s.mode} gives no usable temperature"
    before = probe(L, [1.0] * R)
    after = probe(L, per_layer_taus(tau, R)) if tau is not None else None
    return LengthReport(L, tau=tau, closed_form=cf, algorithm1=a1, note=note, before=before, after=after)
