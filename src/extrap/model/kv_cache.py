"""KV caches for decoding and streaming evaluation, and attention of new queries against a cache.

A rolling cache keeps the keys and values of the last W tokens of every layer (003 Appendix B): new
tokens then cost O(W) each, whatever the length of the sequence.  Shapes: keys and values are
(B, H, C, Dh) for the C cached tokens; queries are (B, H, T, Dh) for the T new ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from extrap.model.attention import BiasContext, bias_block, toeplitz_vector


@dataclass
class LayerCache:
    """Keys and values of one attention layer, with the positions of the cached keys."""

    window: int | None = None  # keep the keys of at most this many tokens (None: all)
    keys: torch.Tensor | None = None  # (B, H, C, Dh)
    values: torch.Tensor | None = None
    positions: torch.Tensor | None = None  # (C,)
    tables: dict = field(default_factory=dict)  # r(t) tables of this layer, reused while the cache lives

    def extend(self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor):
        """Keys, values and key positions that the new tokens attend to: the cached ones, then theirs.

        The cache then keeps the last ``window`` of them: a rolling cache costs O(W) per token (003 App. B).
        """
        if self.keys is not None:
            k, v = torch.cat([self.keys, k], dim=2), torch.cat([self.values, v], dim=2)
            positions = torch.cat([self.positions, positions])
        W = self.window
        self.keys, self.values, self.positions = (
            (k, v, positions) if W is None else (k[:, :, -W:], v[:, :, -W:], positions[-W:])
        )
        return k, v, positions

    def expand(self, n: int) -> None:
        """A cache of one sequence shared by ``n`` continuations (views, no copy)."""
        self.keys = self.keys.expand(n, -1, -1, -1)
        self.values = self.values.expand(n, -1, -1, -1)


@dataclass
class KVCache:
    """One :class:`LayerCache` per layer; ``window`` makes it a rolling cache of that many tokens."""

    window: int | None = None
    layers: list[LayerCache] = field(default_factory=list)

    def layer(self, i: int) -> LayerCache:
        while len(self.layers) <= i:
            self.layers.append(LayerCache(self.window))
        return self.layers[i]

    def expand(self, n: int) -> None:
        for c in self.layers:
            c.expand(n)


def _consecutive(positions: torch.Tensor) -> bool:
    """Integer key positions p0, p0 + 1, ..., one per cached token."""
    if positions.dim() != 1 or positions.is_floating_point() or positions.numel() == 0:
        return False
    p0 = int(positions[0])
    return torch.equal(positions, torch.arange(p0, p0 + positions.numel(), device=positions.device))


def attend_cached(q, k, v, ctx: BiasContext, temperature: float | torch.Tensor = 1.0) -> torch.Tensor:
    """New queries q (B, H, T, Dh) against all keys k, v (B, H, C, Dh) of a KV cache, the new ones last.

    ``ctx`` holds the positions of the C keys; query a is the key at C - T + a.  Returns (B, H, T, Dh).
    Consecutive key positions with a Toeplitz table (or no bias) take the streaming path: the
    (T, C) bias is a strided view of one vector of T + C - 1 values, as in
    :func:`extrap.model.attention.attend` (no gather, no (H, T, C) index tensor).
    """
    tau = float(temperature)
    scale = 1.0 / (math.sqrt(q.shape[-1]) * tau)
    C, T = k.shape[2], q.shape[2]
    toeplitz = ctx.toeplitz_rows is None and (ctx.table is not None or ctx.scheme is None)
    if toeplitz and _consecutive(ctx.positions):
        table = ctx.table if ctx.table is not None else q.new_zeros(1, C)  # no bias: the window mask only
        # Keys reversed (c' = C - 1 - c): entry (a, c') has t = (C - T + a) - (C - 1 - c') = 1 - T + a + c'.
        w = toeplitz_vector(table.to(q.dtype), 1 - T, T + C - 1, ctx.window)
        if tau != 1.0:
            w = w / tau
        mask = w.as_strided((1, w.shape[0], T, C), (0, w.stride(0), 1, 1))
        return F.scaled_dot_product_attention(q, k.flip(2), v.flip(2), attn_mask=mask, scale=scale)
    mask = bias_block(ctx, C - T, C, 0, C, q.dtype) / tau
    if mask.dim() == 3:
        mask = mask.unsqueeze(0)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
