"""Per-head analysis of a positional scheme: verdict, B, TRF, tail weight, growth, dilution.

:func:`analyse` runs 000 Theorem 0.4 (convergence of sum_t exp(r(t))) and, for
convergent heads, B and the TRF of 000 Eq. 22 on every head of a scheme, using
only the scheme's own evaluations (``symbolic`` for the tests and the smooth
tail, ``scalar`` for exact terms, ``bias`` for vectorised partial sums in
:mod:`extrap.theory.numerics`).  :func:`analyse_checkpoint` does the same on learned parameter values, per layer.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import mpmath
import sympy
import sympy.assumptions.wrapper  # noqa: F401  sympy imports these three on first use (a relation on an
import sympy.codegen.ast  # noqa: F401  assumed symbol, a lambdify, a sum of many terms): here they load
import sympy.tensor.tensor  # noqa: F401  with the engine instead of in the middle of an analysis
import torch

from extrap import timeout
from extrap.devices import one_thread
from extrap.errors import ExtrapError
from extrap.positional import get as get_scheme
from extrap.positional import ops
from extrap.positional.base import BiasRPE, Scheme
from extrap.positional.bias import t5_bucket_steps
from extrap.positional.content import ContentBias
from extrap.theory import asymptotics, closed, forms, numerics, quadrature
from extrap.theory.applicability import not_applicable_reason
from extrap.theory.closed import closed_series
from extrap.theory.convergence import Verdict, fmt
from extrap.theory.errors import InfiniteTerm, NotReal, SeriesError
from extrap.theory.numerics import add_numerics, partial_sums
from extrap.theory.piecewise import PiecewiseSeries
from extrap.theory.results import CheckpointAnalysis, HeadResult, LayerResults, check_eps, eps_key
from extrap.theory.static import static_part
from extrap.theory.trf import MAX_DIRECT, Series
from extrap.timeout import TimeLimit, time_limit

DEFAULT_EPS = (1e-3, 1e-6)
DEFAULT_LENGTHS = (1024, 2048, 4096, 8192, 16384)
DEFAULT_TRAIN_LENGTH = 512
SERIES_TIMEOUT = 20.0  # seconds per head for B and the TRFs (a formula like exp(exp(exp(t))) never ends)
SYMBOLIC_TIMEOUT = 10.0  # seconds per head for the symbolic form and its verdict
NUMERICS_TIMEOUT = 10.0  # seconds per scheme for the partial sums (torch)

_UNKNOWN_CUTOFF = (
    "the distance from which min/max keeps its eventual argument lies beyond 2**64 or could not be bounded, "
    "so the terms before it cannot be told from the tail"
)


# ---------------------------------------------------------------------------
# caches: one analysis per distinct (scheme, head parameters, eps), and one
# series per distinct symbolic bias (KERPLE-power at r2=1 is ALiBi, head by head)
# ---------------------------------------------------------------------------
_CACHE: dict[tuple, HeadResult] = {}
_SERIES: dict[tuple, tuple] = {}


def clear_cache() -> None:
    """Forget cached analyses and every table filled on first use (benchmarks measure cold runs)."""
    _CACHE.clear()
    _SERIES.clear()
    forms.clear()
    numerics.clear()
    closed.clear()
    asymptotics.clear()
    quadrature.clear()
    t5_bucket_steps.cache_clear()


@contextlib.contextmanager
def _cyclic_gc_paused():
    """No cyclic garbage collection while the engine runs (reference counting still frees its objects).

    sympy allocates thousands of short-lived objects per head; with torch and sympy loaded, a full
    collection they trigger scans every live object of the process (~0.1 s), several times the
    analysis itself.  The collector runs again as usual once the analysis returns.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _head_key(values: Mapping[str, torch.Tensor], head: int) -> tuple:
    return tuple((k, tuple(v[head].detach().double().flatten().tolist())) for k, v in sorted(values.items()))


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------
def resolve(scheme: Scheme | str) -> Scheme:
    """A scheme from its spec (a Scheme is returned as it is)."""
    return get_scheme(scheme)


def analyse(
    scheme: Scheme | str,
    num_heads: int = 8,
    values: Mapping[str, torch.Tensor] | None = None,
    eps: Iterable[float] = DEFAULT_EPS,
    lengths: Iterable[int] | None = DEFAULT_LENGTHS,
    train_length: int = DEFAULT_TRAIN_LENGTH,
    heads: Iterable[int] | None = None,
) -> list[HeadResult]:
    """Analyse the heads of ``scheme`` (default parameter values: ``scheme.init_values``).

    Returns one :class:`HeadResult` per head (all heads, or those in ``heads``), or a
    single one with ``head=None`` when the scheme does not apply (APE, RoPE, FIRE).
    ``lengths`` gives the attention dilution S(L)/S(train_length), S(L) = sum_{t<L} b_t
    (None or () to skip it).
    """
    scheme = resolve(scheme)
    eps = tuple(check_eps(e) for e in ((eps,) if isinstance(eps, (int, float, str)) else eps))
    if not isinstance(num_heads, int) or num_heads <= 0:
        raise ExtrapError(f"number of heads must be a positive integer, got {num_heads}")
    reason = not_applicable_reason(scheme)
    if reason:
        return [HeadResult(scheme.spec, None, "not-applicable", "none", reason, trf={eps_key(x): None for x in eps})]
    if isinstance(scheme, ContentBias):  # CAPE: its static part b, the base RPE's bias
        return static_part(scheme, analyse, num_heads, values, eps, lengths, train_length, heads)
    values = scheme.init_values(num_heads) if values is None else dict(values)
    chosen = list(range(num_heads)) if heads is None else [int(h) for h in heads]
    if any(not 0 <= h < num_heads for h in chosen):
        raise ExtrapError(f"heads must lie in 0..{num_heads - 1}, got {chosen}")
    with _cyclic_gc_paused():
        results = []
        for head in chosen:
            key = (type(scheme).__name__, scheme.spec, _head_key(values, head), eps)
            if key not in _CACHE:
                _CACHE[key] = _analyse_head(scheme, head, values, eps)
            results.append(replace(_CACHE[key], head=head, notes=dict(_CACHE[key].notes)))
        _add_numerics(scheme, values, results, lengths, train_length, chosen)
    return results


def _add_numerics(scheme, values, results: list[HeadResult], lengths, train_length: int, chosen: list[int]) -> None:
    """Partial sums, dilution and evidence (:mod:`extrap.theory.numerics`); a failure nulls them with the reason."""
    try:
        with one_thread(), timeout.time_limit(NUMERICS_TIMEOUT, required=False):
            add_numerics(scheme, values, results, lengths, train_length, chosen)
    except (TimeLimit, OverflowError, RuntimeError) as e:  # e.g. thousands of cosines per distance
        why = f"evaluating the bias {e}" if isinstance(e, TimeLimit) else f"the float64 bias fails ({type(e).__name__})"
        for r in results:
            r.dilution = r.evidence = None
            r.notes["dilution"] = f"partial sums not computed: {why}"


def collapse(results: list[HeadResult], scheme: Scheme | None = None) -> list[HeadResult]:
    """One row with ``head=None`` ('all') when every head has the same result
    (always for a head-independent scheme, i.e. one without per-head parameters)."""
    if not results or results[0].head is None:
        return results
    shared = scheme is not None and isinstance(scheme, BiasRPE) and not scheme.params(len(results))
    if shared or (len(results) > 1 and all(r.same_as(results[0]) for r in results[1:])):
        return [replace(results[0], head=None)]
    return results


# ---------------------------------------------------------------------------
# one head
# ---------------------------------------------------------------------------
def _analyse_head(scheme: BiasRPE, head: int, values, eps: tuple) -> HeadResult:
    v = _verdict(scheme, head, values)
    res = HeadResult(
        scheme.spec,
        head,
        v.verdict,
        v.test,
        v.explanation,
        growth=v.growth,
        exponents=[fmt(q) for q in v.exponents],
        detail=v,
        trf={eps_key(x): None for x in eps},
    )
    if v.verdict != "converges":
        return res
    if v.cutoff is None:  # the eventual branch is known (so is the verdict), but not from where on
        res.trf_note = f"B and TRF not computed: {_UNKNOWN_CUTOFF}"
        return res
    # without a cutoff every term comes from the symbolic form: equal forms give equal series
    skey = (v.expr, eps) if not v.cutoff else None  # sympy's == is structural, exact numbers included
    if skey in _SERIES:
        res.series_sum, res.series_sum_error, trf, res.trf_note = _SERIES[skey]
        res.trf = dict(trf)
        return res
    try:
        notes = _sum_series(res, scheme, head, values, v, eps)
    except (SeriesError, TimeLimit) as e:
        return _series_failed(res, v, eps, e)
    res.trf_note = "; ".join(notes) or None
    if skey is not None:
        _SERIES[skey] = (res.series_sum, res.series_sum_error, dict(res.trf), res.trf_note)
    return res


def _verdict(scheme: BiasRPE, head: int, values) -> Verdict:
    """The symbolic verdict; a form too large or too odd for the tests is inconclusive, with the reason."""
    try:
        with timeout.time_limit(SYMBOLIC_TIMEOUT, required=False):
            return forms.head_verdict(scheme, values, head)
    except ExtrapError:
        raise
    except TimeLimit as e:
        why = f"building and testing the symbolic form of r(t) {e}"
    except (TypeError, ValueError, ArithmeticError, AttributeError, NotImplementedError, RecursionError) as e:
        why = " ".join(f"the convergence tests failed on r(t): {type(e).__name__} {e}".split())
    return Verdict("inconclusive", "none", why)


def _sum_series(res: HeadResult, scheme: BiasRPE, head: int, values, v: Verdict, eps: tuple) -> list[str]:
    """Set B and the TRFs of ``res`` from the head's series; returns why any TRF stays null."""
    with time_limit(SERIES_TIMEOUT, required=False):
        r, cutoff = _numeric_r(scheme, head, values), v.cutoff or 0
        tail = None if v.finite else v.expr
        if cutoff > MAX_DIRECT:  # too far to sum term by term: piece by piece between the switch points
            series = PiecewiseSeries(r, scheme.symbolic(head, values), tail, cutoff, v.fast)
        else:
            series = (tail is not None and closed_series(r, tail, cutoff, v.fast)) or Series(
                r, tail, cutoff, fast=v.fast
            )
        notes = []
        for x in eps:
            try:
                res.trf[eps_key(x)] = series.trf(x)
            except SeriesError as e:
                res.trf[eps_key(x)] = None
                notes.append(f"eps={eps_key(x)}: {e}")
        res.series_sum, res.series_sum_error = series.total, series.total_err  # after any refinement
    return notes


def _numeric_r(scheme: BiasRPE, head: int, values) -> Callable:
    """r(k) at mpmath precision.  Where mpmath fails (a pole, a value beyond its range), the
    float64 bias tells a masked distance (r = -inf, weight 0) from an infinite weight; any
    other value has no exact evaluation, so the series is not summed."""

    hv = {  # the head's parameters once (as ``scheme.scalar`` reads them), not once per distance
        k: (mpmath.mpf(v) if not isinstance(v, list) else [mpmath.mpf(e) for e in v])
        for k, v in scheme.head_values(values, head, exact=False).items()
    }

    def r(k):
        try:
            return scheme.fn(ops.MPMATH, mpmath.mpf(k), hv)
        except (ZeroDivisionError, OverflowError) as e:
            row = scheme.bias(torch.tensor([float(k)], dtype=torch.float64), values)
            x = float(row[min(head, row.shape[0] - 1), 0])
            if x == -math.inf:
                return mpmath.mpf("-inf")
            if x == math.inf:
                raise
            raise SeriesError(f"r(t) has no exact value at t={k} ({type(e).__name__}; in float64 it is {x})") from None

    return r


def _series_failed(res: HeadResult, v: Verdict, eps: tuple, e: SeriesError | TimeLimit) -> HeadResult:
    """``res`` when its series cannot be summed: an infinite or non-real weight also changes the verdict."""
    no_trf = {eps_key(x): None for x in eps}
    if isinstance(e, InfiniteTerm):  # the tail converges but a finite distance has infinite weight
        return replace(
            res,
            verdict="diverges",
            test="infinite term",
            series_sum=None,
            trf=no_trf,
            explanation=f"{e}; (the tail alone converges: {v.explanation})",
        )
    if isinstance(e, NotReal):
        return replace(
            res,
            verdict="not-applicable",
            test="none",
            series_sum=None,
            trf=no_trf,
            explanation=f"{e}: exp(r) is not a series of positive weights",
        )
    res.series_sum = None
    res.trf = no_trf
    res.trf_note = f"B and TRF not computed: {e}"
    return res


# ---------------------------------------------------------------------------
# checkpoints: stored (raw) parameters per layer
# ---------------------------------------------------------------------------
StoredParams = Mapping[str, Mapping[str, torch.Tensor]]  # layer -> {param name: stored tensor}
Loader = Callable[[Path], tuple[str, int, StoredParams]]


def analyse_checkpoint(
    source: str | Path | StoredParams,
    spec: str | Scheme | None = None,
    num_heads: int | None = None,
    *,
    eps: Iterable[float] = DEFAULT_EPS,
    lengths: Iterable[int] | None = None,
    train_length: int | None = None,
    loader: Loader | None = None,
) -> CheckpointAnalysis:
    """Per-layer, per-head analysis of learned bias parameters.

    ``source`` is either a run directory, read by ``loader(path) -> (spec, num_heads,
    {layer: {name: tensor}})`` (default :func:`extrap.run.read_bias_parameters`), or that mapping itself
    (then ``spec`` and ``num_heads`` are required).  Tensors are the *stored*
    parameters (raw for positive ones); ``scheme.values`` maps them to the values the
    bias uses (e.g. softplus for KERPLE's r1, r2).

    ``train_length`` (the L_tr of the dilution): given, else the run's own when ``source`` is a run
    directory read by the default loader, else 512.

    Returns every layer's :class:`HeadResult` rows, in the order of ``source``.
    """
    if isinstance(source, (str, Path)):
        if loader is None:
            from extrap.run.parameters import read_checkpoint_bias

            ckpt = read_checkpoint_bias(Path(source))
            file_spec, file_heads, stored = ckpt.spec, ckpt.heads, ckpt.layers
            train_length = train_length or ckpt.train_length
        else:
            file_spec, file_heads, stored = loader(Path(source))
        spec = spec if spec is not None else file_spec
        num_heads = num_heads if num_heads is not None else file_heads
    else:
        stored = source
    if spec is None or num_heads is None:
        raise ExtrapError("analyse_checkpoint needs the scheme spec and the number of heads")
    scheme = resolve(spec)
    train_length = train_length or DEFAULT_TRAIN_LENGTH
    layers = []
    for layer, params in stored.items():
        if not_applicable_reason(scheme):
            layers.append(LayerResults(str(layer), tuple(analyse(scheme, num_heads))))
            continue
        missing = [q.name for q in scheme.params(num_heads) if q.name not in params]
        if missing:
            raise ExtrapError(f"layer {layer}: missing parameter(s) {', '.join(missing)} for {scheme.spec}")
        tensors = {k: torch.as_tensor(v).detach().double() for k, v in params.items()}
        values = scheme.values(tensors, num_heads)
        heads = analyse(scheme, num_heads, values, eps=eps, lengths=lengths, train_length=train_length)
        layers.append(LayerResults(str(layer), tuple(heads)))
    return CheckpointAnalysis(pe=scheme.spec, num_heads=num_heads, layers=tuple(layers))


__all__ = [
    "CheckpointAnalysis",
    "DEFAULT_EPS",
    "DEFAULT_LENGTHS",
    "DEFAULT_TRAIN_LENGTH",
    "SERIES_TIMEOUT",
    "HeadResult",
    "LayerResults",
    "analyse",
    "analyse_checkpoint",
    "check_eps",
    "clear_cache",
    "collapse",
    "eps_key",
    "not_applicable_reason",
    "partial_sums",
    "resolve",
]
