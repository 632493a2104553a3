"""Token-by-token decoding with a KV cache, optionally a rolling cache of W tokens (003 Appendix B).

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

import torch

from extrap.errors import ExtrapError
from extrap.model.kv_cache import KVCache, LayerCache
from extrap.model.protocol import ExtrapLM


@torch.no_grad()
def step_logits(model: ExtrapLM, token: torch.Tensor, position: int, cache) -> torch.Tensor:
    """Logits (B, V) for one new token (B,) at ``position``, updating ``cache``."""
    return model.step(token[:, None], position, cache)[:, -1]


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

    The prompt goes through the cache token by token, so a rolling cache sees exactly what it
    would during generation.  ``temperature`` divides the output logits when sampling.  The cache's
    sequence length is L + max_new_tokens from the first step: a length-dependent RoPE scaling
    (dynamic NTK, longrope) rotates every token with the θ of that final length, so each token is
    scored as one pass over the finished sequence scores it, and cached keys never go stale.
    """
    if max_new_tokens < 0 or (cache_window is not None and cache_window < 1):
        raise ExtrapError("max_new_tokens must be >= 0 and cache_window >= 1")
    model.eval()
    cache = model.new_cache(cache_window, seq_len=prompt.shape[1] + max_new_tokens)
    out = prompt
    logits = None
    for p in range(prompt.shape[1]):
        logits = step_logits(model, prompt[:, p], p, cache)
    for p in range(prompt.shape[1], prompt.shape[1] + max_new_tokens):
        if greedy:
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)[:, 0]
        out = torch.cat([out, nxt[:, None]], dim=1)
        logits = step_logits(model, nxt, p, cache)
    return out


__all__ = ["KVCache", "LayerCache", "generate", "step_logits"]
