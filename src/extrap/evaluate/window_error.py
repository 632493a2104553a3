"""What a window W costs, stated twice: the theory's bound and a measurement.

* **Bound** (000 Theorem 0.4, Eq. 22): for a Toeplitz bias whose series B = Σ_t e^{r(t)}
  converges, the keys W or more tokens back carry the bias weight Σ_{t>=W} e^{r(t)}; as a
  fraction of B that is at most ε for every head when W = TRF(ε) (max over layers and heads).
  It bounds the bias weight, not the attention of a trained model, whose q·k also counts.
* **Measurement**: at the longest length where exact attention is affordable (at most
  ``MEASURE_MAX``), the same tokens are scored with and without the window (the relative
  PPL difference), and the exact attention probabilities of sampled query rows give the mass
  that the window drops (the probability on keys W or more tokens back), per layer.
"""

from __future__ import annotations

import math

import torch

from extrap.errors import ExtrapError
from extrap.evaluate.streaming import token_nll
from extrap.model.attention import toeplitz_table
from extrap.model.protocol import model_device
from extrap.results.window import WindowBound, WindowError, WindowInfo, WindowMeasure

MEASURE_MAX = 32768  # exact attention is measured up to this length
SAMPLED_ROWS = 16  # query rows whose exact attention is read


def _tails(scheme, values: dict, W: int) -> list[float | None]:
    """Σ_{t>=W} e^{r(t)} / B per head of one layer: B from the theory engine, the head of the sum in float64."""
    from extrap.theory import analyse

    H = next(iter(values.values())).shape[0] if values else 1
    results = analyse(scheme, H, values, eps=(1e-3,), lengths=())
    with torch.no_grad():  # learned values carry gradients; the bound needs none
        head_sums = toeplitz_table(scheme, values, W - 1, torch.float64, "cpu").exp().sum(dim=-1)  # (H or 1,)
    out = []
    for h, r in enumerate(results):
        if r.verdict != "converges" or r.series_sum is None:
            out.append(None)
            continue
        B = float(r.series_sum)
        out.append(max(0.0, 1.0 - float(head_sums[min(h, head_sums.numel() - 1)]) / B))
    return out


def theory_bound(model, W: int, eps: float | None = None, reduce: str | None = None) -> WindowBound:
    """The bound for a window of W keys on ``model``'s own (trained) bias, layer by layer and head by head."""
    scheme = model.scheme
    if scheme is None or not scheme.is_toeplitz:
        why = "no Toeplitz bias to bound (the model's positions are not a bias RPE of extrap's registry)"
        return WindowBound(W, None, eps=eps, reduce=reduce, reason=why)
    worst, where = -1.0, None
    for layer, values in enumerate(model.bias_values() or [{}]):
        for head, tail in enumerate(_tails(scheme, {k: v.double().cpu() for k, v in values.items()}, W)):
            if tail is None:
                return WindowBound(W, None, eps=eps, reduce=reduce, reason=f"layer {layer} head {head} diverges")
            if tail > worst:
                worst, where = tail, f"layer {layer} head {head}"
    return WindowBound(W, worst, where, eps, reduce)


def _dropped(model, seq: torch.Tensor, W: int, rows: list[int]) -> tuple[list[float], float]:
    """Per layer, the mean (and overall the max) probability that sampled rows put W or more keys back."""
    means, top = [], 0.0
    for _, probs in model.attention_rows(seq, rows):  # (1, H, R, L)
        far = torch.stack([probs[:, :, a, : r - W + 1].sum(-1) for a, r in enumerate(rows)], dim=-1)  # (1, H, R)
        means.append(float(far.mean()))
        top = max(top, float(far.max()))
    return means, top


@torch.no_grad()
def measure(model, stream: torch.Tensor, W: int, length: int, rows: int = SAMPLED_ROWS) -> WindowMeasure:
    """Score the first ``length`` + 1 tokens of ``stream`` exactly and with the window; read sampled rows."""
    seq = stream[: length + 1].long().view(1, -1).to(model_device(model))
    x, y = seq[:, :-1], seq[:, 1:]
    try:
        exact = math.exp(float(token_nll(model, x, y, None).double().mean()))
        windowed = math.exp(float(token_nll(model, x, y, W).double().mean()))
    except (RuntimeError, MemoryError, ExtrapError) as e:
        return WindowMeasure(length, note=f"exact attention failed at L={length}: {str(e).splitlines()[0][:160]}")
    ppl = dict(exact_ppl=exact, window_ppl=windowed, rel_diff=abs(windowed - exact) / exact)
    picked = sorted({int(r) for r in torch.linspace(W, length - 1, rows).round().tolist()}) if W < length else []
    if not picked:
        return WindowMeasure(length, **ppl, note=f"W = {W} covers L = {length}: nothing is dropped")
    try:
        means, top = _dropped(model, x, W, picked)
    except ExtrapError as e:
        return WindowMeasure(length, **ppl, note=f"dropped attention mass not measured: {e}")
    return WindowMeasure(length, **ppl, dropped_mass=tuple(means), dropped_mass_max=top, rows=len(picked))


def window_error(model, stream: torch.Tensor, W: int, longest: int, window: WindowInfo) -> WindowError:
    """The bound and the measurement for a window W (``window.error`` of ``extrap eval``).

    The bound reads the ε and reduction that chose W (``window``, when ``auto``); the measurement
    runs at the longest length up to :data:`MEASURE_MAX` that ``stream`` holds.
    """
    bound = theory_bound(model, W, window.trf_eps, window.trf_reduce)
    L = min(MEASURE_MAX, longest, stream.numel() - 1)
    return WindowError(bound, measure(model, stream, W, L))
