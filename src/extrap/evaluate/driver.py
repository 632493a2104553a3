"""Evaluating a run (CLI and Python API): choose window and temperature, evaluate, report.

:func:`evaluate_run` takes a loaded run and :class:`~extrap.evaluate.settings.EvalSettings` and
returns an :class:`~extrap.results.EvalReport`: the run and its provenance, the protocol, one
:class:`~extrap.results.LengthResult` per length and the 000 Definition 0.1 verdict (its
``to_json()`` is ``extrap eval --json``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

import torch

from extrap.errors import ExtrapError
from extrap.evaluate.protocols import check_settings, evaluate
from extrap.evaluate.settings import DEFAULT_TOKENS, EvalSettings, parse_window
from extrap.evaluate.streaming import CHUNK, chunk_size
from extrap.evaluate.verdict import verdict, with_ratios
from extrap.evaluate.window_error import window_error
from extrap.memory import check_fits, evaluation_bytes
from extrap.results.evaluation import EvalReport, LengthResult, TemperatureInfo
from extrap.results.window import WindowInfo
from extrap.run import Run, eval_stream
from extrap.theory.receptive import WINDOW_AUTO_TRF

log = logging.getLogger(__name__)


def resolve_window(
    run: Run, mode: str | int | None, eps: float
) -> tuple[Callable[[int], int | None] | None, WindowInfo]:
    """``none``, a fixed W, or ``auto``: the theory's TRF(eps) of the trained bias, when its series converges.

    The ``auto`` window is a safety window (:data:`WINDOW_AUTO_TRF`'s reduction, the widest head);
    its info records ``trf_eps`` and ``trf_reduce``.
    """
    mode = parse_window(mode)
    if mode == "none":
        return None, WindowInfo("none", None, "exact attention")
    if mode != "auto":
        return (lambda L: mode if mode < L else None), WindowInfo("fixed", mode, "set by the user")
    if not 0 < eps < 1:
        raise ExtrapError(f"eps must be in (0, 1), got {eps}")
    if run.model.scheme is None:
        raise ExtrapError(
            "an automatic window reads the trained bias of an extrap run; give a window size for hf: models"
        )
    w, reason = model_trf_window(run.model, eps, _checkpoint_values(run))
    info = WindowInfo("auto", w, reason, trf_eps=eps, trf_reduce=WINDOW_AUTO_TRF.reduce)
    if w is None:
        return None, info
    return (lambda L: w if w < L else None), info


def model_trf_window(model, eps: float, values: list[dict] | None = None) -> tuple[int | None, str]:
    """The attention window that the theory allows: max over layers and heads of TRF(eps).

    Only for Toeplitz bias RPEs whose series converges in every head (000 Theorem 0.4):
    the keys beyond TRF(eps) then hold less than a fraction eps of the bias mass
    (000 Eq. 22), so dropping them changes the output by O(eps).  ``values``: each layer's bias
    values (default: the model's own, ``model.bias_values()``).
    """
    from extrap.theory import receptive_field

    scheme = model.scheme
    if scheme is None or not scheme.is_toeplitz:
        return None, f"{model.shape.pe} is not a Toeplitz bias RPE: exact attention"
    values = model.bias_values() if values is None else values
    trf = receptive_field(scheme, values, eps=eps, reduce=WINDOW_AUTO_TRF.reduce, num_heads=model.shape.n_head)
    if trf.value is None:
        return None, f"{trf.reason}: exact attention"
    return int(trf.value), f"TRF of the trained bias, widest at {trf.widest.where}; keys further back are dropped"


def _checkpoint_values(run: Run) -> list[dict] | None:
    """A run's bias values read from its checkpoint in float64, as ``extrap theory --checkpoint`` reads them,
    so that the window is that command's TRF to the token; None (the model's own values) without one."""
    scheme = run.model.scheme
    return run.checkpoint_bias() if scheme is not None and scheme.is_toeplitz else None


def resolve_temperature(
    run: Run, settings: EvalSettings, stream: torch.Tensor, lengths: list[int]
) -> tuple[Callable[[int], float | list | None] | None, TemperatureInfo]:
    """None (τ untouched), a fixed τ, one τ per layer, or ``auto`` (004: the aligned τ for each L_ex).

    ``settings.temperature`` is read by :func:`extrap.align.parse_temperature_spec`: None / "none",
    a τ, one τ per layer (its length must be the model's layer count), "auto", "auto:per-layer"
    (Algorithm 1 layer by layer: one aligned τ per layer at each L_ex) or "auto:MODE" (a mode named
    there takes precedence over ``settings.align_mode``).  ``auto`` calls
    :func:`extrap.align.aligned_temperature` on ``align_segments`` segments of the evaluation stream
    (only its attention is read); τ = 1 (every layer's, per layer) for L_ex <= L_tr.  Returns
    (temperature_for or None, the info for the report; for ``auto`` without the chosen τ, which each
    length's result records).
    """
    from extrap import align
    from extrap.align.formulas import check_lengths

    parsed = settings.temperature_spec()
    if parsed.kind == "none":
        return None, TemperatureInfo("none")
    if parsed.kind == "fixed":
        tau = parsed.tau
        return (lambda L: tau), TemperatureInfo("fixed", tau)
    if parsed.kind == "layers":
        taus = align.check_layer_taus(parsed.tau, run.model.shape.n_layer)
        return (lambda L: list(taus)), TemperatureInfo("fixed", list(taus), per_layer=True)
    mode, per_layer = parsed.mode or settings.align_mode, parsed.per_layer or settings.align_per_layer
    segments, max_length, L_tr = settings.align_segments, settings.align_max_length, run.train_length
    if mode != "log-length":  # probing lengths are capped: fail before evaluating anything
        check_lengths(L_tr, [L for L in lengths if L > L_tr], max_length)
    chosen: dict[int, float | list] = {}

    def temperature_for(L: int):
        if L not in chosen:
            chosen[L] = align.aligned_temperature(
                run.model, stream, L_tr, L, mode, per_layer, segments, max_length=max_length
            )
        return chosen[L]

    return temperature_for, TemperatureInfo("auto", per_layer=per_layer, align_mode=mode, segments=segments)


def _starting(length: int) -> None:
    log.info("  L_ex=%s: evaluating...", length)


def _bar(length: int, total: int):
    """A tqdm bar on stderr for the tokens of one length: tokens/s and ETA."""
    from tqdm import tqdm

    return tqdm(total=total, desc=f"L_ex={length}", unit="tok", unit_scale=True, leave=False, mininterval=1.0)


def _check_memory(run: Run, lengths: list[int], settings: EvalSettings, window_for) -> None:
    """Refuse a length whose activations and logits cannot fit, before anything runs (:func:`check_evaluation`)."""
    last = settings.protocol == "last-token"
    plan = []
    for L in lengths:
        rows = min(settings.batch, settings.targets if last else max(1, (settings.tokens or max(lengths)) // L))
        plan.append((L, rows, window_for(L) if window_for else None))
    check_evaluation(run.model, plan, logits=not last, hint="evaluate fewer rows at once or shorter lengths")


def check_evaluation(model, plan, logits: bool = True, hint: str = "give shorter lengths") -> None:
    """Refuse, in one line naming the estimate and the memory free on the model's device (a CUDA device's
    free memory, else the system's available RAM), the first (length, rows, window) of ``plan`` whose
    :func:`evaluation_estimate` cannot fit.  ``logits``: every position is scored (False: the last
    token's only, so no (L, V) logits are held)."""
    from extrap.model import model_device

    device, dtype = model_device(model), _activation_dtype(model)
    for L, rows, W in plan:
        what = f"evaluating {rows} row(s) of {L:,} tokens on {device} ({str(dtype).replace('torch.', '')})"
        check_fits(evaluation_estimate(model, L, rows, W, logits), what, hint, device)


def _activation_dtype(model) -> torch.dtype:
    return getattr(model, "compute_dtype", None) or next(model.parameters()).dtype


def evaluation_estimate(model, length: int, rows: int, window: int | None, logits: bool = True) -> int:
    """:func:`extrap.memory.evaluation_bytes` of ``rows`` rows of ``length`` tokens on ``model`` (its shape and
    activation dtype; a model with ``chunked_head`` holds the logits of one chunk of positions, not of L)."""
    shape, act = model.shape, 2 if _activation_dtype(model) in (torch.bfloat16, torch.float16) else 4
    vocab = shape.vocab_size if logits else 0
    head = chunk_size(rows, shape.vocab_size) if getattr(model, "chunked_head", False) else None
    return evaluation_bytes(rows, length, shape.d_model, shape.n_layer, vocab, window, CHUNK, act, head)


def _show(r: LengthResult) -> None:
    if r.error:
        log.info("  L_ex=%s: %s", r.length, r.error)
        return
    se = f" ± {r.stderr:.4f}" if r.stderr is not None else ""
    log.info("  L_ex=%s: loss %.4f%s, ppl %.3f (%.1f s)", r.length, r.loss, se, r.ppl, r.seconds)


def default_tokens(lengths: list[int], available: int) -> int:
    """Scored tokens at every length: DEFAULT_TOKENS (fewer if the stream is shorter), at least the longest length."""
    return max(max(lengths), min(DEFAULT_TOKENS, available - 1))


def evaluation_stream(run: Run, s: EvalSettings, lengths: list[int]) -> tuple[torch.Tensor, int | None]:
    """(the stream that :func:`evaluate_run` reads at ``lengths``, the tokens it scores at each: None for
    last-token); the same for every caller that re-reads what an evaluation scored (LongPPL)."""
    last = s.protocol == "last-token"
    stream = eval_stream(run, s.split, max(lengths) + s.targets if last else (s.tokens or max(lengths)) + 1)
    return stream, default_tokens(lengths, stream.numel()) if s.tokens is None and not last else s.tokens


def evaluate_run(run: Run, settings: EvalSettings) -> EvalReport:
    """Evaluate a loaded run (:func:`extrap.run.load`: a directory or ``hf:PATH``) as ``settings`` say.

    Lengths whose evaluation fails are recorded with their error and the others kept.  A windowed
    length is streamed through a rolling KV cache (memory set by W, not by L), and the report's
    ``window.error`` states the theory's bound and the measured effect
    (:mod:`extrap.evaluate.window_error`); the τ used at each length is recorded in its result and,
    for ``auto``, under ``temperature.tau``.  ``settings.corpus`` and ``settings.backend`` are set on
    the run first.
    """
    if settings.corpus is not None:
        run.use_corpus(settings.corpus)
    if settings.backend is not None:
        run.use_attention_backend(settings.backend)
    s, lengths = settings, _with_reference(settings.lengths, run.train_length)
    check_settings(lengths, s.protocol, s.tokens, s.stride, s.targets)  # before the stream, τ search and window
    window_for, window_info = resolve_window(run, s.window, s.eps)
    _check_memory(run, lengths, s, window_for)
    stream, tokens = evaluation_stream(run, s, lengths)
    temperature_for, temperature = resolve_temperature(run, s, stream, lengths)
    results = evaluate(
        run.model,
        stream,
        lengths,
        s.protocol,
        tokens=tokens,
        stride=s.stride,
        targets=s.targets,
        batch=s.batch,
        exact_check_max=s.exact_check_max,
        window_for=window_for,
        temperature_for=temperature_for,
        **_progress(s.progress),
    )
    window = _window_with_error(run, stream, results, window_for, window_info, s.progress)
    if temperature.mode == "auto":  # the τ chosen at each length, as its result records it
        temperature = replace(
            temperature, tau={str(r.length): r.temperature for r in results if r.temperature is not None}
        )
    return _report(run, s, window, results, temperature if s.temperature is not None else None)


def _with_reference(lengths: tuple[int, ...] | None, L_tr: int) -> list[int]:
    """The lengths to evaluate, sorted, always with L_tr (the verdict's reference); default L_tr * 2^k, k < 5."""
    return sorted({*(lengths if lengths is not None else [L_tr * 2**k for k in range(5)]), L_tr})


def _progress(on: bool) -> dict:
    """The callbacks of :func:`evaluate` that log each length and draw its bar (none when ``on`` is false)."""
    return dict(on_result=_show, on_start=_starting, progress=_bar) if on else {}


def _window_with_error(
    run: Run, stream, results: list[LengthResult], window_for, info: WindowInfo, progress: bool
) -> WindowInfo:
    """``info`` with, when a window applied at some length, its bound and measured effect.

    The effect is measured at the longest windowed length that was evaluated without error (a failed
    length, such as one past a learned position table, would fail the measurement too).
    """
    windows = [(r.length, window_for(r.length), r.error is None) for r in results] if window_for else []
    applied = [(L, W) for L, W, ok in windows if W is not None and ok]
    applied = applied or [(L, W) for L, W, _ in windows if W is not None]  # none succeeded: the note says why
    if not applied:
        return info
    longest, W = applied[-1]
    if progress:
        log.info("  window W=%s: measuring its effect against exact attention...", W)
    return replace(info, error=window_error(run.model, stream, W, longest, info))


def _report(
    run: Run, s: EvalSettings, window: WindowInfo, results: list[LengthResult], temperature: TemperatureInfo | None
) -> EvalReport:
    """The report of :func:`evaluate_run`, with 000 Definition 0.1's verdict over ``results``."""
    v = verdict(results, run.train_length, s.delta, independent=s.protocol == "last-token")
    return EvalReport(
        run=str(run.path),
        pe=run.pe,
        protocol=s.protocol,
        split=s.split,
        train_length=run.train_length,
        delta=s.delta,
        extrapolates=v.extrapolates,
        worst_ratio=v.worst_ratio,
        worst_ratio_stderr=v.worst_stderr,
        verdict_reason=v.reason,
        within_noise=v.within_noise,
        noise=v.noise,
        window=window,
        results=tuple(with_ratios(results, v)),
        step=run.step,
        provenance=run.provenance(),
        temperature=temperature,
    )
