"""Evaluating a run (CLI and Python API): load it, choose window and temperature, report as JSON.

The result follows the schema of ``extrap eval --json``: the run and its provenance, the
protocol, one entry per length (:meth:`LengthResult.to_dict`) and the 000 Definition 0.1 verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import torch

from extrap.errors import ExtrapError
from extrap.evaluate.protocols import PROTOCOLS, LengthResult, check_settings, evaluate
from extrap.evaluate.streaming import CHUNK
from extrap.evaluate.verdict import verdict
from extrap.evaluate.window_error import window_error
from extrap.memory import check_fits
from extrap.run import Run, eval_stream
from extrap.theory.receptive import WINDOW_AUTO_TRF

log = logging.getLogger(__name__)

WINDOW_CHECK_MAX = 8192  # the exact-attention comparison of a windowed length runs up to this length
# Scored tokens per length by default: byte-level losses spread about 2 nats per token, and neighbours
# correlate, so 2^16 tokens keep the standard error of a loss near 0.01 nats, half of δ = 0.02.
DEFAULT_TOKENS = 2**16
DEFAULT_TARGETS = 256  # last-token targets by default: the verdict compares them paired, target by target


def resolve_window(run: Run, mode: str | None, eps: float) -> tuple[Callable[[int], int | None] | None, dict]:
    """``none``, a fixed W, or ``auto``: the theory's TRF(eps) of the trained bias, when its series converges.

    The ``auto`` window is a safety window (:data:`WINDOW_AUTO_TRF`'s reduction, the widest head);
    its info records ``trf_eps`` and ``trf_reduce``.
    """
    if mode in (None, "none"):
        return None, {"mode": "none", "size": None, "reason": "exact attention"}
    if mode != "auto":
        try:
            w = int(mode)
        except ValueError:
            raise ExtrapError(f"window must be auto, none or an integer, got {mode!r}") from None
        if w < 1:
            raise ExtrapError("window must be >= 1")
        return (lambda L: w if w < L else None), {"mode": "fixed", "size": w, "reason": "set by the user"}
    if not 0 < eps < 1:
        raise ExtrapError(f"eps must be in (0, 1), got {eps}")
    if run.model.scheme is None:
        raise ExtrapError(
            "an automatic window reads the trained bias of an extrap run; give a window size for hf: models"
        )
    w, reason = model_trf_window(run.model, eps, _checkpoint_values(run))
    info = {
        "mode": "auto",
        "size": w,
        "trf_eps": eps,
        "trf_reduce": WINDOW_AUTO_TRF.reduce,
        "reason": reason,
    }
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
    from extrap.erf import trained_bias_values

    path, scheme = getattr(run, "path", None), run.model.scheme
    if scheme is None or not scheme.is_toeplitz or not isinstance(path, (str, Path)):
        return None
    if str(path).startswith("hf:") or not Path(path).is_dir():
        return None
    try:
        return trained_bias_values(path)
    except ExtrapError:
        return None


def resolve_temperature(
    run: Run,
    spec,
    stream: torch.Tensor,
    lengths: list[int],
    mode: str = "pmax",
    segments: int = 4,
    per_layer: bool = False,
    max_length: int | None = None,
):
    """None (τ untouched), a fixed τ, one τ per layer, or ``auto`` (004: the aligned τ for each L_ex).

    ``spec``: what :func:`extrap.align.parse_temperature_spec` reads: None / "none", a τ, one τ per
    layer (a list, or "1.1,1.2,..."; its length must be the model's layer count), "auto",
    "auto:per-layer" (Algorithm 1 layer by layer: one aligned τ per layer at each L_ex) or
    "auto:MODE" (a mode named in ``spec`` takes precedence over ``mode``).  ``auto`` calls
    :func:`extrap.align.aligned_temperature` on ``segments`` segments of the evaluation stream (only
    its attention is read); τ = 1 (every layer's, per layer) for L_ex <= L_tr.  Returns
    (temperature_for or None, info for the report).
    """
    from extrap import align
    from extrap.align.formulas import check_lengths, check_mode

    parsed = align.parse_temperature_spec(spec)
    if parsed.kind == "none":
        return None, {"mode": "none"}
    if parsed.kind == "fixed":
        tau = parsed.tau
        return (lambda L: tau), {"mode": "fixed", "tau": tau}
    if parsed.kind == "layers":
        taus = align.check_layer_taus(parsed.tau, run.model.shape.n_layer)
        return (lambda L: list(taus)), {"mode": "fixed", "per_layer": True, "tau": taus}
    mode, per_layer = parsed.mode or mode, per_layer or parsed.per_layer
    check_mode(mode)
    if per_layer and mode not in align.SEARCH_MODES:
        raise ExtrapError(f"per-layer temperatures need the pmax or entropy alignment mode, not {mode}")
    L_tr = run.train_length
    if mode != "log-length":  # probing lengths are capped: fail before evaluating anything
        check_lengths(L_tr, [L for L in lengths if L > L_tr], max_length)
    chosen: dict = {}

    def temperature_for(L: int):
        if L not in chosen:
            chosen[L] = align.aligned_temperature(
                run.model, stream, L_tr, L, mode, per_layer, segments, max_length=max_length
            )
        return chosen[L]

    return temperature_for, {
        "mode": "auto",
        "align_mode": mode,
        "per_layer": per_layer,
        "segments": segments,
        "chosen": chosen,
    }


def _open(source, run: Run | None, corpus: str | None, hf_options: dict | None, backend: str | None) -> Run:
    import extrap

    if run is None:
        run = extrap.load(source, **(hf_options or {}))
    if corpus is not None:
        run.use_corpus(corpus)
    if backend is not None:
        run.use_attention_backend(backend)
    return run


def _starting(length: int) -> None:
    log.info("  L_ex=%s: evaluating...", length)


def _bar(length: int, total: int):
    """A tqdm bar on stderr for the tokens of one length: tokens/s and ETA."""
    from tqdm import tqdm

    return tqdm(total=total, desc=f"L_ex={length}", unit="tok", unit_scale=True, leave=False, mininterval=1.0)


def _check_memory(run: Run, lengths: list[int], protocol: str, tokens, targets: int, batch: int, window_for) -> None:
    """Refuse a length whose hidden states and logits alone cannot fit, before anything runs (a lower bound:
    B rows x L positions x (d per layer boundary x 8 + the logits of every scored position), fp32, plus the
    token ids).  A windowed length streams: it holds a chunk of queries and W cached keys, not L positions."""
    shape = run.model.shape
    for L in lengths:
        rows = min(batch, targets if protocol == "last-token" else max(1, (tokens or max(lengths)) // L))
        W = window_for(L) if window_for else None
        held = L if W is None else min(L, CHUNK + W)
        logits = 0 if protocol == "last-token" or W is not None else shape.vocab_size  # streamed: within a budget
        need = 4 * rows * held * (8 * shape.d_model + logits) + 16 * rows * L
        check_fits(need, f"evaluating {rows} row(s) of {L} tokens", "evaluate fewer rows at once or shorter lengths")


def _show(r: LengthResult) -> None:
    if r.error:
        log.info("  L_ex=%s: %s", r.length, r.error)
        return
    se = f" ± {r.stderr:.4f}" if r.stderr is not None else ""
    log.info("  L_ex=%s: loss %.4f%s, ppl %.3f (%.1f s)", r.length, r.loss, se, r.ppl, r.seconds)


def default_tokens(lengths: list[int], available: int) -> int:
    """Scored tokens at every length: DEFAULT_TOKENS (fewer if the stream is shorter), at least the longest length."""
    return max(max(lengths), min(DEFAULT_TOKENS, available - 1))


def evaluate_run(
    source: str | Path | Run,
    lengths=None,
    protocol="nonoverlapping",
    stride=None,
    targets=DEFAULT_TARGETS,
    tokens=None,
    split="validation",
    window="none",
    eps=WINDOW_AUTO_TRF.eps,
    delta=0.02,
    batch=8,
    progress=False,
    run: Run | None = None,
    exact_check_max: int = WINDOW_CHECK_MAX,
    backend: str | None = None,
    temperature=None,
    align_mode: str = "pmax",
    align_segments: int = 4,
    align_per_layer: bool = False,
    align_max_length: int | None = None,
    corpus: str | None = None,
    hf_options: dict | None = None,
) -> dict:
    """Evaluate a run (a directory, ``hf:PATH`` or a loaded :class:`Run`); returns the JSON-ready report.

    ``tokens``: scored tokens at every length (nonoverlapping, sliding); default
    :data:`DEFAULT_TOKENS`, or the whole split if shorter, and at least the longest length.
    ``window``: "none", W or "auto"; a windowed length is streamed through a rolling KV cache
    (memory set by W, not by L), and the report's ``window.error`` states the theory's bound and
    the measured effect (:mod:`extrap.evaluate.window_error`).
    ``temperature``: None, a τ, or "auto" (004 attention alignment by ``align_mode``; the τ
    used at each length is recorded in its result and under "temperature" in the report).
    ``corpus`` and ``hf_options`` are for hf: models; an extrap run reads its training corpus.
    ``progress``: log each length and show a bar of tokens/s and ETA on stderr.
    """
    if protocol not in PROTOCOLS:
        raise ExtrapError(f"unknown protocol {protocol!r} (choose from {', '.join(PROTOCOLS)})")
    if lengths is not None and not (lengths := list(lengths)):  # None: the default lengths
        raise ExtrapError("no lengths to evaluate: the list of lengths is empty")
    run = _open(source, run or (None if isinstance(source, (str, Path)) else source), corpus, hf_options, backend)
    lengths = _with_reference(lengths, run.train_length)
    check_settings(lengths, protocol, tokens, stride, targets)  # before the stream, τ search and window
    window_for, window_info = resolve_window(run, window, eps)
    _check_memory(run, lengths, protocol, tokens, targets, batch, window_for)
    need = (tokens or max(lengths)) + 1 if protocol != "last-token" else max(lengths) + targets
    stream = eval_stream(run, split, need)
    if tokens is None and protocol != "last-token":
        tokens = default_tokens(lengths, stream.numel())
    temperature_for, temperature_info = resolve_temperature(
        run, temperature, stream, lengths, align_mode, align_segments, align_per_layer, align_max_length
    )
    settings = dict(tokens=tokens, stride=stride, targets=targets, batch=batch, exact_check_max=exact_check_max)
    settings.update(window_for=window_for, temperature_for=temperature_for, **_progress(progress))
    results = evaluate(run.model, stream, lengths, protocol, **settings)
    report = _report(run, protocol, split, delta, window_info, results)
    report["window"] = _window_with_error(run, stream, results, window_for, window_info, progress)
    if temperature is not None:
        report["temperature"] = _temperature_report(temperature_info)
    return report


def _with_reference(lengths: list[int] | None, L_tr: int) -> list[int]:
    """The lengths to evaluate, sorted, always with L_tr (the verdict's reference); default L_tr * 2^k, k < 5."""
    return sorted({*(lengths if lengths is not None else [L_tr * 2**k for k in range(5)]), L_tr})


def _progress(on: bool) -> dict:
    """The callbacks of :func:`evaluate` that log each length and draw its bar (none when ``on`` is false)."""
    return dict(on_result=_show, on_start=_starting, progress=_bar) if on else {}


def _window_with_error(run: Run, stream, results: list[LengthResult], window_for, info: dict, progress: bool) -> dict:
    """``info`` plus, when a window applied at some length, its bound and measured effect.

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
    return {**info, "error": window_error(run.model, stream, W, longest, info)}


def _report(run: Run, protocol: str, split: str, delta: float, window_info: dict, results: list) -> dict:
    """The JSON-ready report of :func:`evaluate_run` (schema in the README's ``extrap eval`` section)."""
    v = verdict(results, run.train_length, delta, independent=protocol == "last-token")
    return {
        "run": str(run.path),
        "pe": run.pe,
        "protocol": protocol,
        "split": split,
        "train_length": run.train_length,
        "delta": delta,
        "extrapolates": v.extrapolates,
        "worst_ratio": v.worst_ratio,
        "worst_ratio_stderr": v.worst_stderr,
        "verdict_reason": v.reason,
        "within_noise": v.within_noise,
        "noise": v.noise,
        "window": window_info,
        "results": [r.to_dict() for r in results],
        "step": run.step,
        **run.provenance(),
    }


def _temperature_report(info: dict) -> dict:
    out = {k: v for k, v in info.items() if k != "chosen"}
    if "chosen" in info:
        out["tau"] = {str(L): t for L, t in sorted(info["chosen"].items())}
    return out
