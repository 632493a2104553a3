"""Per-token losses of a model, whole or streamed through a rolling KV cache.

With a window of W keys per layer (``--window``), a sequence of any length is scored in chunks of
queries: every layer keeps the keys and values of its last W tokens (003 Appendix B), so memory
depends on W and the chunk, never on the length L.  Each layer only looks W - 1 tokens back, so
after n_layer layers a position depends on at most n_layer (W - 1) tokens before it (the *cone*):
scored positions that start deep inside a row need only that much of the row before them, at
their absolute positions, and the result is the same as the whole windowed forward pass.  The cache
is told the row's length T up front: a RoPE scaling whose θ depends on the sequence length (dynamic
NTK, longrope) then rotates every chunk with the θ of T, as the one pass does, instead of each
chunk with its own.

Shapes: x and y are (B, T) token ids with y = x shifted by one; scores are (B, S) for the last
S = ``score_last`` (default T) positions.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from extrap.model.protocol import model_device
from extrap.model.scoring import CHUNK, LOGITS_BUDGET, MIN_CHUNK, chunk_size, logits_nll

__all__ = ["CHUNK", "LOGITS_BUDGET", "MIN_CHUNK", "chunk_size", "cone", "stream_nll", "token_nll"]


def cone(n_layer: int, window: int) -> int:
    """How far back the output of the last layer can depend on the input, with a window of W keys."""
    return n_layer * (window - 1)


def token_nll(
    model,
    x: torch.Tensor,
    y: torch.Tensor,
    window: int | None = None,
    score_last: int | None = None,
    chunk: int | None = None,
    on_tokens: Callable[[int], None] | None = None,
) -> torch.Tensor:
    """-log p(y) at the scored positions of each row, (B, S).

    ``window`` None: one whole forward pass with exact attention; a model with ``token_nll``
    (:class:`extrap.model.protocol.ExtrapLM`) scores it, its head over chunks of positions
    (:mod:`extrap.model.scoring`: no (L, V) logits), others through their full logits.  A window W: the rows are
    streamed (:func:`stream_nll`).  ``on_tokens(n)`` is told how many tokens were just processed.
    """
    ext = getattr(model, "extension", None)
    if window is None and getattr(ext, "streams", False) and ext.window is not None:
        window = ext.window  # a bounded extension (extrap.extend) streams through its rolling cache
    if window is None:
        x, y = x.to(model_device(model)), y.to(model_device(model))  # token ids come from a cpu stream
        if hasattr(model, "token_nll"):  # the model's own: its head over chunks of positions where it can
            nll = model.token_nll(x, y, last=score_last)
        else:
            nll = logits_nll(
                model(x, window=None, last=score_last).logits, y if score_last is None else y[:, -score_last:]
            )
        if on_tokens:
            on_tokens(x.numel())
        return nll
    return stream_nll(model, x, y, window, score_last, chunk, on_tokens)


@torch.no_grad()
def stream_nll(
    model,
    x: torch.Tensor,
    y: torch.Tensor,
    window: int,
    score_last: int | None = None,
    chunk: int | None = None,
    on_tokens: Callable[[int], None] | None = None,
) -> torch.Tensor:
    """:func:`token_nll` with a window of W keys, chunk by chunk through a rolling KV cache of W tokens.

    Only the cone of the scored positions is run: tokens more than n_layer (W - 1) before the first
    scored one cannot change its output.  Positions stay absolute (the model's ``step(idx, start)``),
    and the sequence length that fixes a length-dependent RoPE's θ is T for every chunk.
    """
    B, T = x.shape
    x, y = x.to(model_device(model)), y.to(model_device(model))  # token ids come from a cpu stream
    first = T - (score_last if score_last is not None else T)
    start = max(0, first - cone(model.shape.n_layer, window))
    if getattr(model, "extension", None) is not None:
        start = 0  # an extension's keys at the start (attention sinks) reach every position
    step = chunk_size(B, model.shape.vocab_size, chunk)
    cache = model.new_cache(window, seq_len=T)
    scores = []
    for s in range(start, T, step):
        e = min(T, s + step)
        logits = model.step(x[:, s:e], s, cache)
        if e > first:
            lo = max(s, first)
            scores.append(logits_nll(logits[:, lo - s :], y[:, lo:e]))
        if on_tokens:
            on_tokens(B * (e - s))
    return torch.cat(scores, dim=1)
