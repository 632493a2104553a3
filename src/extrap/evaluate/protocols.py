"""Perplexity versus length under three protocols, on any model that follows :class:`extrap.lm.ExtrapLM`.

All protocols read the same token stream (a validation or test split):

* ``nonoverlapping``: the first ``tokens`` tokens cut into chunks of L_ex; every
  token of every chunk is scored (so early tokens of a chunk see little context).
* ``sliding``: windows of L_ex moved by ``stride``; only the last ``stride``
  tokens of each window are scored (the first window scores all of its tokens).
* ``last-token`` (003 §3.4): N fixed target positions; for every L_ex each target
  is predicted from exactly L_ex - 1 preceding tokens, so the same tokens are
  scored at every length and only their context grows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from extrap.errors import ExtrapError
from extrap.lm import temperature

PROTOCOLS = ("nonoverlapping", "sliding", "last-token")


@dataclass
class LengthResult:
    length: int
    loss: float  # mean negative log-likelihood per scored token, nats (NaN when ``error`` is set)
    tokens: int  # scored tokens
    seconds: float
    window: int | None = None
    error: str | None = None
    exact_loss: float | None = None  # the same tokens with exact attention, when a window was used
    temperature: float | list | None = None  # softmax τ used at this length (004), when one was set
    exact_error: str | None = None  # why the exact-attention comparison could not be made

    @property
    def ppl(self) -> float:
        return math.exp(self.loss) if math.isfinite(self.loss) else math.inf

    def to_dict(self) -> dict:
        """JSON-ready and strict: a failed length has null loss, ppl and bits, and its ``error``."""
        ok = self.error is None and math.isfinite(self.loss)
        return {
            "length": self.length,
            "loss": self.loss if ok else None,
            "ppl": self.ppl if ok else None,
            "bits_per_token": self.loss / math.log(2) if ok else None,
            "tokens": self.tokens,
            "seconds": self.seconds,
            "window": self.window,
            **({"temperature": self.temperature} if self.temperature is not None else {}),
            **({"error": self.error} if self.error else {}),
            **(self._window_cost() if ok else {}),
        }

    def _window_cost(self) -> dict:
        """exact_ppl and window_rel_diff = |ppl - exact ppl| / exact ppl, both on the same scored tokens."""
        if self.exact_error is not None:
            return {"exact_ppl": None, "window_rel_diff": None, "exact_error": self.exact_error}
        if self.exact_loss is None:
            return {}
        exact = math.exp(self.exact_loss)
        return {"exact_ppl": exact, "window_rel_diff": abs(self.ppl - exact) / exact}


def _nll_sum(model, x: torch.Tensor, y: torch.Tensor, window: int | None, score_last: int | None) -> torch.Tensor:
    """Sum of -log p(y) over the scored positions of each row of x (B, L)."""
    out = model(x, window=window, last=score_last)
    logits = out.logits.float()
    yy = y if score_last is None else y[:, -score_last:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yy.reshape(-1), reduction="sum")


@torch.no_grad()
def eval_nonoverlapping(model, stream: torch.Tensor, length: int, tokens: int, window=None, batch: int = 8):
    """Chunks of ``length`` from the first ``tokens`` + 1 tokens of the stream."""
    n_chunks = tokens // length
    if n_chunks < 1:
        raise ExtrapError(f"nonoverlapping: {tokens} tokens hold no chunk of length {length}; evaluate more tokens")
    total, count = 0.0, 0
    for c0 in range(0, n_chunks, batch):
        rows = range(c0, min(n_chunks, c0 + batch))
        seg = torch.stack([stream[r * length : (r + 1) * length + 1] for r in rows]).long()
        total += float(_nll_sum(model, seg[:, :-1], seg[:, 1:], window, None))
        count += seg.shape[0] * length
    return total / count, count


@torch.no_grad()
def eval_sliding(model, stream: torch.Tensor, length: int, tokens: int, stride: int, window=None, batch: int = 8):
    """Windows of ``length`` moved by ``stride`` over ``tokens`` tokens; each token scored exactly once."""
    if not 1 <= stride <= length:
        raise ExtrapError(f"sliding: stride must be in [1, L_ex={length}], got {stride}")
    if tokens < length:
        raise ExtrapError(f"sliding: {tokens} tokens are fewer than L_ex={length}; evaluate more tokens")
    total = float(_nll_sum(model, stream[None, :length].long(), stream[None, 1 : length + 1].long(), window, None))
    count = length
    starts = list(range(stride, tokens - length + 1, stride))
    for b0 in range(0, len(starts), batch):
        seg = torch.stack([stream[s : s + length + 1] for s in starts[b0 : b0 + batch]]).long()
        total += float(_nll_sum(model, seg[:, :-1], seg[:, 1:], window, stride))
        count += seg.shape[0] * stride
    return total / count, count


def last_token_targets(stream_len: int, max_length: int, n: int) -> list[int]:
    """N target positions, evenly spread, each with at least ``max_length`` - 1 tokens before it."""
    lo, hi = max_length - 1, stream_len - 1
    if hi - lo + 1 < n:
        raise ExtrapError(
            f"last-token: the stream ({stream_len} tokens) is too short for {n} targets at "
            f"L_ex={max_length}; use fewer targets or a shorter longest length"
        )
    step = (hi - lo + 1) // n
    return [lo + k * step for k in range(n)]


@torch.no_grad()
def eval_last_token(model, stream: torch.Tensor, length: int, targets: list[int], window=None, batch: int = 8):
    """Score only stream[p] for each p in ``targets``, from the L_ex - 1 tokens before it."""
    total = 0.0
    for b0 in range(0, len(targets), batch):
        ps = targets[b0 : b0 + batch]
        ctx = torch.stack([stream[p - length + 1 : p] for p in ps]).long()  # (B, L_ex - 1)
        y = torch.stack([stream[p : p + 1] for p in ps]).long()  # (B, 1)
        if ctx.shape[1] == 0:  # L_ex = 1: no context at all; predict from an empty prefix is undefined
            raise ExtrapError("last-token: L_ex must be >= 2")
        total += float(_nll_sum(model, ctx, y, window, 1))
    return total / len(targets), len(targets)


def check_settings(
    lengths: list[int], protocol: str, tokens: int | None = None, stride: int | None = None, targets: int = 64
) -> None:
    """Refuse settings that no length could be evaluated with, before anything is evaluated."""
    if protocol not in PROTOCOLS:
        raise ExtrapError(f"unknown protocol {protocol!r} (choose from {', '.join(PROTOCOLS)})")
    if not lengths:
        raise ExtrapError("no lengths to evaluate: the list of lengths is empty")
    if any(L < 2 for L in lengths):
        raise ExtrapError("lengths must be integers >= 2")
    if protocol == "last-token":
        if targets < 1:
            raise ExtrapError(f"last-token needs at least 1 target, got {targets}")
        return
    longest = max(lengths)
    if tokens is not None and tokens < longest:
        raise ExtrapError(
            f"{protocol} scores the same {tokens} tokens at every length, fewer than the longest length "
            f"{longest}: at least {longest} tokens are needed"
        )
    if protocol == "sliding" and stride is not None and not 1 <= stride <= min(lengths):
        raise ExtrapError(f"sliding: the stride must be in [1, {min(lengths)}] (the shortest length), got {stride}")


def evaluate(
    model,
    stream: torch.Tensor,
    lengths: list[int],
    protocol: str,
    *,
    tokens: int | None = None,
    stride: int | None = None,
    targets: int = 64,
    window_for: Callable[[int], int | None] | None = None,
    on_result: Callable[[LengthResult], None] | None = None,
    on_start: Callable[[int], None] | None = None,
    batch: int = 8,
    temperature_for: Callable[[int], float | list | None] | None = None,
    exact_check_max: int = 0,
) -> list[LengthResult]:
    """Evaluate at every length; a length that fails is recorded and the rest are kept.

    ``temperature_for(L)``: softmax τ (one, or one per layer) set with ``model.set_temperature``
    while evaluating L (None: leave it); the model's previous τ is restored at the end.
    ``exact_check_max``: where a window was used at a length up to this, the same tokens
    (chunks, windows or targets) are scored again with exact attention (``exact_loss``).
    """
    check_settings(lengths, protocol, tokens, stride, targets)
    lengths = sorted(set(lengths))
    tokens = tokens or max(lengths)
    need = tokens + 1 if protocol != "last-token" else max(lengths) + targets
    if stream.numel() < need:
        raise ExtrapError(
            f"the evaluation stream has {stream.numel():,} tokens; {protocol} at these settings needs {need:,}"
        )
    tgt = last_token_targets(stream.numel(), max(lengths), targets) if protocol == "last-token" else None

    def score(L: int, window: int | None) -> tuple[float, int]:
        if protocol == "nonoverlapping":
            return eval_nonoverlapping(model, stream, L, tokens, window, batch)
        if protocol == "sliding":
            return eval_sliding(model, stream, L, tokens, stride or max(1, L // 2), window, batch)
        return eval_last_token(model, stream, L, tgt, window, batch)

    results = []
    model.eval()
    with temperature(model):  # every length may set its own τ; the model's τ is restored afterwards
        for L in lengths:
            if on_start:
                on_start(L)
            results.append(_evaluate_length(model, score, L, window_for, temperature_for, exact_check_max))
            if on_result:
                on_result(results[-1])
    return results


_FAILURES = (RuntimeError, MemoryError, ExtrapError)  # what one length may raise without stopping the others


def _failure(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


def _evaluate_length(model, score, L, window_for, temperature_for, exact_check_max: int) -> LengthResult:
    """One length of :func:`evaluate`, under ``temperature_for(L)`` when given.

    A failure (out of memory at a long length, positions past a learned table, a non-finite
    loss) is recorded in ``error`` so that the other lengths are kept.
    """
    window = window_for(L) if window_for else None
    tau = temperature_for(L) if temperature_for else None
    if tau is not None:
        model.set_temperature(tau)
    t0 = time.perf_counter()
    try:
        loss, n = score(L, window)
    except _FAILURES as e:
        return LengthResult(L, math.nan, 0, time.perf_counter() - t0, window, error=_failure(e), temperature=tau)
    res = LengthResult(L, loss, n, time.perf_counter() - t0, window, temperature=tau)
    if not math.isfinite(loss):
        res.error = f"the loss is not finite ({loss})"
    elif window is not None and L <= exact_check_max:
        try:  # the same scored tokens, only without the window
            exact, n_exact = score(L, None)
        except _FAILURES as e:
            res.exact_error = f"exact attention failed: {_failure(e)}"
        else:
            if math.isfinite(exact) and n_exact == n:
                res.exact_loss = exact
            else:
                res.exact_error = f"exact attention gave a loss of {exact} on {n_exact} tokens"
    return res
