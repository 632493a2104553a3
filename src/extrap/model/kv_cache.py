"""KV caches for decoding and streaming evaluation.

A rolling cache keeps the keys and values of the last W tokens of every layer (003 Appendix B): new
tokens then cost O(W) each, whatever the length of the sequence.  Shapes: keys and values are
(B, H, C, Dh) for the C cached tokens.  New tokens attend to the cache through the same path as a
whole sequence (:func:`extrap.model.attention.attend`, with its queries the last of the keys), so
this module only stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerCache:
    """Keys and values of one attention layer, with the positions of the cached keys."""

    window: int | None = None  # keep the keys of at most this many tokens (None: all)
    keys: torch.Tensor | None = None  # (B, H, C, Dh)
    values: torch.Tensor | None = None
    positions: torch.Tensor | None = None  # (C,)
    tables: dict = field(default_factory=dict)  # r(t) tables of this layer, reused while the cache lives
    keep_first: int = 0  # with a window: also keep the first tokens (attention sinks, extrap.extend)

    def extend(self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor):
        """Keys, values and key positions that the new tokens attend to: the cached ones, then theirs.

        The cache then keeps the last ``window`` of them: a rolling cache costs O(W) per token (003 App. B).
        """
        if self.keys is not None:
            k, v = torch.cat([self.keys, k], dim=2), torch.cat([self.values, v], dim=2)
            positions = torch.cat([self.positions, positions])
        W, n = self.window, self.keep_first
        if W is None:
            self.keys, self.values, self.positions = k, v, positions
        elif n and positions.numel() > n + W:  # the first n (attention sinks) and the last W
            self.keys, self.values = (torch.cat([x[:, :, :n], x[:, :, -W:]], dim=2) for x in (k, v))
            self.positions = torch.cat([positions[:n], positions[-W:]])
        elif n:
            self.keys, self.values, self.positions = k, v, positions
        else:
            self.keys, self.values, self.positions = k[:, :, -W:], v[:, :, -W:], positions[-W:]
        return k, v, positions

    def expand(self, n: int) -> None:
        """A cache of one sequence shared by ``n`` continuations (views, no copy)."""
        self.keys = self.keys.expand(n, -1, -1, -1)
        self.values = self.values.expand(n, -1, -1, -1)


@dataclass
class KVCache:
    """One :class:`LayerCache` per layer; ``window`` makes it a rolling cache of that many tokens.

    ``seq_len`` is the length of the whole sequence that runs through the cache (its last position
    + 1).  A length-dependent RoPE scaling (dynamic NTK) and xPos's center take it for every step,
    so keys cached at one step and queries of a later one share θ, as in one pass over the sequence.
    None: the end of the first step fixes it (:meth:`fix_seq_len`).
    """

    window: int | None = None
    layers: list[LayerCache] = field(default_factory=list)
    seq_len: int | None = None
    keep_first: int = 0  # with a window: the first tokens every layer keeps too (attention sinks)

    def fix_seq_len(self, end: int) -> int:
        """The cache's sequence length: as given, else ``end`` (the first step's last position + 1), once."""
        if self.seq_len is None:
            self.seq_len = int(end)
        return self.seq_len

    def layer(self, i: int) -> LayerCache:
        while len(self.layers) <= i:
            self.layers.append(LayerCache(self.window, keep_first=self.keep_first))
        return self.layers[i]

    def expand(self, n: int) -> None:
        for c in self.layers:
            c.expand(n)
