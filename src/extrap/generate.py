"""Token-by-token decoding with a KV cache, optionally a rolling cache of W tokens (003 Appendix B).

With a rolling cache each new token attends to itself and the W - 1 most recent
cached keys, so generating L tokens costs O(L W) instead of O(L^2).  For a
relative PE this is exactly attention restricted to a window of W keys, which
``model(x, window=W)`` computes in one pass; :func:`step_logits` checks that
identity in the tests.

The per-step attention reuses :mod:`extrap.attention` (same bias blocks, same
scheme function), so there is no second implementation of any positional scheme.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from extrap.attention import bias_block
from extrap.errors import ExtrapError


@dataclass
class KVCache:
    window: int | None  # keep at most window keys (the new one included); None: keep all
    keys: list = field(default_factory=list)  # per layer (B, H, C, Dh)
    values: list = field(default_factory=list)
    positions: torch.Tensor | None = None  # (C,) positions of the cached keys

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=2)
            self.values[layer] = torch.cat([self.values[layer], v], dim=2)
        if self.window is not None and self.keys[layer].shape[2] > self.window:
            self.keys[layer] = self.keys[layer][:, :, -self.window:]
            self.values[layer] = self.values[layer][:, :, -self.window:]
        return self.keys[layer], self.values[layer]


@torch.no_grad()
def step_logits(model, token: torch.Tensor, position: int, cache: KVCache) -> torch.Tensor:
    """Logits (B, V) for one new token (B,) at ``position``, updating ``cache``."""
    cfg = model.cfg
    B = token.shape[0]
    pos = torch.tensor([position], device=token.device)
    x = model.embed(token[:, None], pos)  # (B, 1, d)
    new_positions = pos if cache.positions is None else torch.cat([cache.positions, pos])
    if cache.window is not None:
        new_positions = new_positions[-cache.window:]
    for layer, blk in enumerate(model.blocks):
        a = blk.attn
        h = blk.ln1(x)
        q, k, v = a.heads(h, pos)  # the new token's q, k (rotated at its position) and v
        keys, vals = cache.append(layer, k, v)
        ctx = a.bias_context(new_positions, None, x.dtype, x.device)
        C, tau = keys.shape[2], float(a.temperature)
        mask = bias_block(ctx, C - 1, C, 0, C, q.dtype) / tau  # the new token is the last cached position
        y = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask.unsqueeze(0),
                                           scale=1.0 / (math.sqrt(cfg.head_dim) * tau))
        x = x + a.proj(y.transpose(1, 2).reshape(B, 1, -1))
        x = x + blk.mlp(blk.ln2(x))
    cache.positions = new_positions
    return model.head(model.ln_f(x))[:, -1]


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int, cache_window: int | None = None,
             greedy: bool = True, temperature: float = 1.0, generator: torch.Generator | None = None):
    """Continue ``prompt`` (B, L) by ``max_new_tokens`` tokens; returns (B, L + max_new_tokens)."""
    if max_new_tokens < 0 or (cache_window is not None and cache_window < 1):
        raise ExtrapError("max_new_tokens must be >= 0 and cache_window >= 1")
    model.eval()
    cache = KVCache(cache_window)
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
