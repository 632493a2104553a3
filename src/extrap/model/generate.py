"""Decoding with a KV cache, optionally a rolling cache of W tokens (003 Appendix B).

The prompt goes through the cache in blocks (:func:`prefill`: one forward pass per block of
:data:`PREFILL_BLOCK` tokens, so a 20k-token prompt costs 20 passes, not 20k), then each new token
is one step.

With a rolling cache each new token attends to itself and the W - 1 most recent
cached keys, so generating L tokens costs O(L W) instead of O(L^2).  For a
relative PE this is exactly attention restricted to a window of W keys, which
``model(x, window=W)`` computes in one pass; :func:`step_logits` checks that
identity in the tests.

Decoding runs through the model's own ``step`` (:class:`extrap.model.protocol.ExtrapLM`): for
:class:`extrap.model.GPT` that is its one layer loop with a cache, the same bias blocks, scheme
function and attention kernel (:mod:`extrap.model.kernel`) as the full forward pass.
"""

from __future__ import annotations

import logging
import time

import torch

from extrap.cost import STATE_AFTER, duration
from extrap.errors import ExtrapError
from extrap.model.kv_cache import KVCache, LayerCache
from extrap.model.protocol import ExtrapLM

log = logging.getLogger(__name__)

PREFILL_BLOCK = 1024  # prompt tokens per forward pass (each computes its last position's logits only)
WARM_TOKENS, TIMED_TOKENS = 4, 16  # new tokens before the timing (warm-up), and timed before the rest is estimated


@torch.no_grad()
def step_logits(model: ExtrapLM, token: torch.Tensor, position: int, cache) -> torch.Tensor:
    """Logits (B, V) for one new token (B,) at ``position``, updating ``cache``."""
    return model.step(token[:, None], position, cache)[:, -1]


@torch.no_grad()
def prefill(model: ExtrapLM, prompt: torch.Tensor, cache) -> torch.Tensor:
    """Run ``prompt`` (B, L) through ``cache`` in blocks of :data:`PREFILL_BLOCK` tokens; the last logits (B, V).

    Each block is one forward pass against the cached keys, with the cache's window applied to every query,
    so the cache ends as token-by-token decoding would leave it, at a cost of L / PREFILL_BLOCK passes;
    only the last position's logits are computed.
    """
    logits = None
    for s in range(0, prompt.shape[1], PREFILL_BLOCK):
        logits = model.step(prompt[:, s : s + PREFILL_BLOCK], s, cache, last=1)[:, -1]
    return logits


@torch.no_grad()
def generate(
    model: ExtrapLM,
    prompt: torch.Tensor,
    max_new_tokens: int,
    cache_window: int | None = None,
    greedy: bool = True,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
):
    """Continue ``prompt`` (B, L) by ``max_new_tokens`` tokens; returns (B, L + max_new_tokens).

    The prompt is prefilled blockwise (:func:`prefill`), then each new token is one step through the
    cache.  ``temperature`` divides the output logits when sampling.  Once the first tokens are timed,
    a generation that will take longer than :data:`extrap.cost.STATE_AFTER` seconds says how long.  The
    cache's sequence length is L + max_new_tokens from the first step: a length-dependent RoPE scaling
    (dynamic NTK, longrope) rotates every token with the θ of that final length, so each token is
    scored as one pass over the finished sequence scores it, and cached keys never go stale.
    """
    if max_new_tokens < 0 or (cache_window is not None and cache_window < 1):
        raise ExtrapError("max_new_tokens must be >= 0 and cache_window >= 1")
    if prompt.shape[1] < 1:
        raise ExtrapError("the prompt is empty: give at least one token")
    model.eval()
    cache = model.new_cache(cache_window, seq_len=prompt.shape[1] + max_new_tokens)
    logits = prefill(model, prompt, cache)
    out, L, t0 = [prompt], prompt.shape[1], 0.0
    for i, p in enumerate(range(L, L + max_new_tokens)):
        if i == WARM_TOKENS:
            t0 = time.perf_counter()
        if greedy:
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)[:, 0]
        out.append(nxt[:, None])
        logits = step_logits(model, nxt, p, cache)
        if i + 1 == WARM_TOKENS + TIMED_TOKENS:
            _state_time(max_new_tokens, TIMED_TOKENS / max(time.perf_counter() - t0, 1e-9))
    return torch.cat(out, dim=1)


def _state_time(total: int, rate: float) -> None:
    """Log how long ``total`` new tokens take at ``rate`` tokens/s, when that is long."""
    seconds = total / rate
    if seconds >= STATE_AFTER:
        log.info(
            "extrap: generating %d tokens at %.1f tokens/s: about %s (Ctrl-C stops it)", total, rate, duration(seconds)
        )


__all__ = ["KVCache", "LayerCache", "generate", "prefill", "step_logits"]
