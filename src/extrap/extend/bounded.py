"""The bounded extension methods (they stream through a rolling cache): StreamingLLM and LM-Infinite."""

from __future__ import annotations

import math

import torch

from extrap.extend.methods import Branch, Method, Option, causal, need, pick, plain, sum_min, zero


class Sinks(Method):
    """StreamingLLM: n attention sinks plus the last W tokens; positions re-indexed inside the cache.

    The cache holds sinks 0..n-1 then the W most recent tokens (the query included), numbered n, n+1, ...
    (mit-han-lab/streaming-llm: keys cached before rotation, start_size + recent_size).  A window key is
    seen at d = t; a sink at d = min(i, n + W - 1) - j, the query's in-cache position minus the sink's.
    """

    name = "sinks"
    summary = "StreamingLLM: n attention sinks + the last W tokens, positions re-indexed within the cache"
    citation = "Xiao et al., ICLR 2024 (Efficient Streaming Language Models with Attention Sinks)"
    OPTIONS = (
        Option("n", int, lambda L: 4, "attention sinks kept at the start"),
        Option("window", int, lambda L: L - 4, "most recent tokens kept, the query included (default L_tr - n)"),
    )

    def validate(self):
        n, W = self.opts["n"], self.opts["window"]
        need(n >= 0, f"sinks: n must be >= 0, got {n}")
        need(W >= 1, f"sinks: window must be >= 1, got {W}")
        need(n + W <= self.L, f"sinks: n + window = {n + W} must be <= the training length {self.L}")
        self.sinks_kept = n

    def branches(self):
        n, W = self.opts["n"], self.opts["window"]
        return (
            Branch("window", plain, plain, True),
            Branch("sink", lambda i: i.clamp(max=n + W - 1), plain, False),
        )

    def kept(self) -> tuple[int, int]:
        """(the first keys every query sees, the most recent keys kept): the two parts of the mask."""
        return self.opts["n"], self.opts["window"]

    def rule(self, i, j):
        first, recent = self.kept()
        t, vis = causal(i, j)
        return pick(t < recent, vis, j < first)

    def usable_length(self):
        return math.inf  # window d <= W - 1, sinks d <= n + W - 1, both <= L_tr - 1 (validate)

    def max_distance(self, length):
        n, W = self.opts["n"], self.opts["window"]
        sink = min(length - 1, n + W - 1) if n >= 1 and length - 1 >= W else -math.inf  # (i, j) = (L' - 1, 0)
        return float(max(min(length - 1, W - 1), sink))

    def keys_per_query(self, i):
        return min(i + 1, self.opts["n"] + self.opts["window"])

    def keys_total(self, length):
        return sum_min(length, self.opts["n"] + self.opts["window"])

    @property
    def bounded(self):
        return self.kept()[1]

    def key_spans(self, q0, q1):
        first, recent = self.kept()
        lo = max(0, q0 - recent + 1)
        return [(0, q1)] if lo <= first else [(0, first), (lo, q1)]

    def no_op(self, length):
        return self.kept()[1] >= length


class LMInfinite(Sinks):
    """LM-Infinite's Λ-shaped mask: keys with t < n_local, and the first n_global keys at distance n_local.

    Glaciohound/LM-Infinite (models/llama.py, lambda_attention.py): the global branch multiplies an
    unrotated key by the query rotated at limit_distance = local_branch, so d = n_local there (the paper's
    "distance L" with n_local = L_tr, one past the largest trained distance L_tr - 1).
    """

    name = "lm-infinite"
    summary = "LM-Infinite: Λ-mask, t < n_local or j < n_global; global keys beyond it seen at distance n_local"
    citation = "Han et al., NAACL 2024 (LM-Infinite: Zero-Shot Extreme Length Generalization)"
    OPTIONS = (
        Option("global", int, lambda L: 10, "first keys every query sees (n_global)"),
        Option("local", int, lambda L: L, "most recent keys seen at their distance (n_local, default L_tr)"),
    )

    def validate(self):
        g, w = self.opts["global"], self.opts["local"]
        need(g >= 0, f"lm-infinite: global must be >= 0, got {g}")
        need(w >= 1, f"lm-infinite: local must be >= 1, got {w}")
        need(w <= self.L, f"lm-infinite: local = {w} must be <= the training length {self.L}")
        self.sinks_kept = g

    def branches(self):
        w = self.opts["local"]
        return (Branch("local", plain, plain, True), Branch("global", lambda i: torch.full_like(i, w), zero, True))

    def kept(self) -> tuple[int, int]:
        return self.opts["global"], self.opts["local"]

    def usable_length(self):
        """Local keys sit at d <= n_local - 1 <= L_tr - 1; global ones at n_local, past training when n_local = L_tr
        (the default), and they enter once L' - 1 >= n_local: then L' <= n_local is the bound."""
        g, w = self.opts["global"], self.opts["local"]
        return w if g >= 1 and w > self.L - 1 else math.inf

    def max_distance(self, length):
        g, w = self.opts["global"], self.opts["local"]
        return float(w if g >= 1 and length - 1 >= w else min(length - 1, w - 1))

    def keys_per_query(self, i):
        g, w = self.opts["global"], self.opts["local"]
        return min(i + 1, w) + min(g, max(0, i + 1 - w))

    def keys_total(self, length):
        g, w = self.opts["global"], self.opts["local"]
        return sum_min(length, w) + sum_min(max(0, length - w), g)
