"""Perplexity versus length under three protocols, on any model that follows :class:`extrap.model.protocol.ExtrapLM`.

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
from typing import Any

import torch

from extrap.errors import ExtrapError
from extrap.evaluate.stats import stderr
from extrap.evaluate.streaming import cone, token_nll
from extrap.model.protocol import temperature
from extrap.results.evaluation import LengthResult

PROTOCOLS = ("nonoverlapping", "sliding", "last-token")


@torch.no_grad()
def eval_nonoverlapping(model, stream, length: int, tokens: int, window=None, batch: int = 8, on_tokens=None):
    """Chunks of ``length`` from the first ``tokens`` + 1 tokens of the stream: per-token losses in stream order."""
    n_chunks = tokens // length
    if n_chunks < 1:
        raise ExtrapError(f"nonoverlapping: {tokens} tokens hold no chunk of length {length}; evaluate more tokens")
    out = []
    for c0 in range(0, n_chunks, batch):
        rows = range(c0, min(n_chunks, c0 + batch))
        seg = torch.stack([stream[r * length : (r + 1) * length + 1] for r in rows]).long()
        out.append(token_nll(model, seg[:, :-1], seg[:, 1:], window, None, on_tokens=on_tokens).reshape(-1))
    return torch.cat(out)


@torch.no_grad()
def eval_sliding(model, stream, length: int, tokens: int, stride: int, window=None, batch: int = 8, on_tokens=None):
    """Windows of ``length`` moved by ``stride`` over ``tokens`` tokens; each token scored exactly once."""
    if not 1 <= stride <= length:
        raise ExtrapError(f"sliding: stride must be in [1, L_ex={length}], got {stride}")
    if tokens < length:
        raise ExtrapError(f"sliding: {tokens} tokens are fewer than L_ex={length}; evaluate more tokens")
    first = stream[None, : length + 1].long()
    out = [token_nll(model, first[:, :-1], first[:, 1:], window, None, on_tokens=on_tokens).reshape(-1)]
    starts = list(range(stride, tokens - length + 1, stride))
    for b0 in range(0, len(starts), batch):
        seg = torch.stack([stream[s : s + length + 1] for s in starts[b0 : b0 + batch]]).long()
        out.append(token_nll(model, seg[:, :-1], seg[:, 1:], window, stride, on_tokens=on_tokens).reshape(-1))
    return torch.cat(out)


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
def eval_last_token(model, stream, length: int, targets: list[int], window=None, batch: int = 8, on_tokens=None):
    """Score only stream[p] for each p in ``targets``, from the L_ex - 1 tokens before it: one loss per target."""
    if length < 2:  # L_ex = 1: no context at all; a prediction from an empty prefix is undefined
        raise ExtrapError("last-token: L_ex must be >= 2")
    out = []
    for b0 in range(0, len(targets), batch):
        ps = targets[b0 : b0 + batch]
        ctx = torch.stack([stream[p - length + 1 : p] for p in ps]).long()  # (B, L_ex - 1)
        y = torch.stack([stream[p - length + 2 : p + 1] for p in ps]).long()  # (B, L_ex - 1): the last is scored
        out.append(token_nll(model, ctx, y, window, 1, on_tokens=on_tokens).reshape(-1))
    return torch.cat(out)


def check_protocol(protocol: str, targets: int = 64) -> None:
    """A known protocol; last-token with at least one target."""
    if protocol not in PROTOCOLS:
        raise ExtrapError(f"unknown protocol {protocol!r} (choose from {', '.join(PROTOCOLS)})")
    if protocol == "last-token" and targets < 1:
        raise ExtrapError(f"last-token needs at least 1 target, got {targets}")


def check_settings(
    lengths: list[int], protocol: str, tokens: int | None = None, stride: int | None = None, targets: int = 64
) -> None:
    """Refuse settings that no length could be evaluated with, before anything is evaluated."""
    check_protocol(protocol, targets)
    if not lengths:
        raise ExtrapError("no lengths to evaluate: the list of lengths is empty")
    if any(L < 2 for L in lengths):
        raise ExtrapError("lengths must be integers >= 2")
    if protocol == "last-token":
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
    progress: Callable[[int, int], Any] | None = None,
    longest: int | None = None,
) -> list[LengthResult]:
    """Evaluate at every length; a length that fails is recorded and the rest are kept.

    ``longest``: the last-token targets are those of this longest length (default: the longest of
    ``lengths``), so that lengths evaluated in separate calls score the same targets.

    ``temperature_for(L)``: softmax τ (one, or one per layer) set with ``model.set_temperature``
    while evaluating L (None: leave it); the model's previous τ is restored at the end.
    ``exact_check_max``: where a window was used at a length up to this, the same tokens
    (chunks, windows or targets) are scored again with exact attention (``exact_loss``).
    ``progress(L, total)``: a bar (``update(n)``, ``close()``) told of every processed token.
    """
    check_settings(lengths, protocol, tokens, stride, targets)
    lengths = sorted(set(lengths))
    tokens = tokens or max(lengths)
    longest = max(longest or 0, *lengths)
    need = tokens + 1 if protocol != "last-token" else longest + targets
    if stream.numel() < need:
        raise ExtrapError(
            f"the evaluation stream has {stream.numel():,} tokens; {protocol} at these settings needs {need:,}"
        )
    plan = Plan(model, stream, protocol, tokens, stride, targets, batch, longest)
    results = []
    model.eval()
    with temperature(model):  # every length may set its own τ; the model's τ is restored afterwards
        for L in lengths:
            if on_start:
                on_start(L)
            results.append(_evaluate_length(plan, L, window_for, temperature_for, exact_check_max, progress))
            if on_result:
                on_result(results[-1])
    return results


@dataclass
class Plan:
    """One protocol's settings over one stream: what :func:`evaluate` scores at every length."""

    model: Any
    stream: torch.Tensor
    protocol: str
    tokens: int
    stride: int | None
    targets: int
    batch: int
    longest: int  # the longest L_ex: every last-token target has that much context

    def __post_init__(self):
        last = self.protocol == "last-token"
        self.target_positions = last_token_targets(self.stream.numel(), self.longest, self.targets) if last else None

    def stride_at(self, L: int) -> int:
        return self.stride or max(1, L // 2)

    def score(self, L: int, window: int | None, on_tokens=None) -> torch.Tensor:
        """Per-token losses at L_ex = L, in stream order."""
        m, st, b = self.model, self.stream, self.batch
        if self.protocol == "nonoverlapping":
            return eval_nonoverlapping(m, st, L, self.tokens, window, b, on_tokens)
        if self.protocol == "sliding":
            return eval_sliding(m, st, L, self.tokens, self.stride_at(L), window, b, on_tokens)
        return eval_last_token(m, st, L, self.target_positions, window, b, on_tokens)

    def work(self, L: int, window: int | None) -> int:
        """Tokens run through the model at L (with a window, only the cone of the scored ones)."""
        reach = cone(self.model.shape.n_layer, window) if window is not None else None

        def ran(T: int, scored: int) -> int:
            return T if reach is None else min(T, scored + reach)

        if self.protocol == "nonoverlapping":
            return (self.tokens // L) * L
        if self.protocol == "sliding":
            s = self.stride_at(L)
            return L + len(range(s, self.tokens - L + 1, s)) * ran(L, s)
        return self.targets * ran(L - 1, 1)


_FAILURES = (RuntimeError, MemoryError, ExtrapError)  # what one length may raise without stopping the others


def _failure(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


def _score(plan: Plan, L: int, window: int | None, progress) -> torch.Tensor:
    bar = progress(L, plan.work(L, window)) if progress else None
    try:
        return plan.score(L, window, bar.update if bar else None)
    finally:
        if bar:
            bar.close()


def _evaluate_length(plan: Plan, L, window_for, temperature_for, exact_check_max: int, progress) -> LengthResult:
    """One length of :func:`evaluate`, under ``temperature_for(L)`` when given.

    A failure (out of memory at a long length, positions past a learned table, a non-finite
    loss, an aligned τ that cannot be searched at L) is recorded in ``error`` so that the other
    lengths are kept.
    """
    window = window_for(L) if window_for else None
    t0 = time.perf_counter()
    try:  # ``auto`` searches τ on the model at L: it fails where scoring L would
        tau = temperature_for(L) if temperature_for else None
    except _FAILURES as e:
        why = f"choosing τ at this length failed: {_failure(e)}"
        return LengthResult(L, None, 0, time.perf_counter() - t0, window, error=why)
    try:
        if tau is not None:
            plan.model.set_temperature(tau)
        nll = _score(plan, L, window, progress)
    except _FAILURES as e:
        return LengthResult(L, None, 0, time.perf_counter() - t0, window, error=_failure(e), temperature=tau)
    loss, seconds = float(nll.double().mean()), time.perf_counter() - t0
    if not math.isfinite(loss):
        why = f"the loss is not finite ({loss})"
        return LengthResult(L, None, nll.numel(), seconds, window, error=why, temperature=tau)
    exact_ppl, exact_error = None, None
    if window is not None and L <= exact_check_max:
        exact_ppl, exact_error = _exact_ppl(plan, L, nll.numel(), progress)
    se = stderr(nll, independent=plan.protocol == "last-token")
    return LengthResult(L, loss, nll.numel(), seconds, window, None, exact_ppl, tau, exact_error, stderr=se, nll=nll)


def _exact_ppl(plan: Plan, L: int, scored: int, progress) -> tuple[float | None, str | None]:
    """(exact ppl, why not): the same scored tokens as the windowed pass, only without the window."""
    try:
        exact = _score(plan, L, None, progress)
    except _FAILURES as e:
        return None, f"exact attention failed: {_failure(e)}"
    exact_loss = float(exact.double().mean())
    if math.isfinite(exact_loss) and exact.numel() == scored:
        return math.exp(exact_loss), None
    return None, f"exact attention gave a loss of {exact_loss} on {exact.numel()} tokens"
