"""Stating how long work will take before it starts: a lower bound from the arithmetic it needs.

A forward pass over one token with C tokens of context costs about 2 P (the weights) + 2 R d C (causal
attention scores and values, R layers of width d) floating-point operations (Kaplan et al. 2020, §2.1,
Table 1).  Dividing by the rate this device reaches on a large matrix product, the best case of any
layer, gives a time the work cannot beat: commands state it before work that takes longer than
:data:`STATE_AFTER` seconds, so that a length or a token count typed one digit too long is noticed.
"""

from __future__ import annotations

import logging
import time
from functools import cache

log = logging.getLogger(__name__)

STATE_AFTER = 10.0  # seconds: shorter work starts without a word


def token_flops(params: int, n_layer: int, d_model: int, context: int) -> float:
    """Floating-point operations of one token's forward pass with ``context`` tokens before it."""
    return 2.0 * params + 2.0 * n_layer * d_model * context


def sequence_flops(params: int, n_layer: int, d_model: int, length: int, window: int | None = None) -> float:
    """One causal forward pass over ``length`` tokens, each attending to at most ``window`` keys."""
    context = length / 2 if window is None else min(window, length / 2)  # the mean context of a query
    return length * token_flops(params, n_layer, d_model, int(context))


@cache
def matmul_rate(device: str = "cpu") -> float:
    """Floating-point operations per second of a 512 x 512 float32 matrix product on ``device`` (measured once)."""
    import torch

    n, reps = 512, 8
    a = torch.randn(n, n, device=device)
    a @ a  # warm-up: kernels chosen, memory allocated
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ a
    _sync(device)
    return reps * 2.0 * n**3 / max(time.perf_counter() - t0, 1e-9)


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def state_estimate(what: str, flops: float, device: str = "cpu") -> float:
    """Log ``what`` with its lower-bound time when that exceeds :data:`STATE_AFTER`; returns the seconds."""
    seconds = flops / matmul_rate(str(device))
    if seconds >= STATE_AFTER:
        log.info(
            "extrap: %s needs about %.3g TFLOP: at least %s on %s (Ctrl-C stops it)",
            what,
            flops / 1e12,
            duration(seconds),
            device,
        )
    return seconds


def duration(seconds: float) -> str:
    """``42 s``, ``7.5 min``, ``3.2 h`` or ``4.1 days``."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
