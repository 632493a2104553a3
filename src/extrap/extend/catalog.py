"""The six extension methods and their registry (``name:key=value,...`` specs).

Each rule was checked against its paper and the authors' code; where the code differs from the
paper's one-line rule, the code is followed and the comment says so.
"""

from __future__ import annotations

import math

import torch

from extrap.errors import ExtrapError
from extrap.extend.methods import MASKED, Branch, Method, Option, causal, need, pick, plain, zero


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

    def select(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["window"], vis, (j < self.opts["n"])[None, :].expand_as(t))

    def usable_length(self):
        return math.inf

    def keys_per_query(self, i):
        return min(i + 1, self.opts["n"] + self.opts["window"])

    @property
    def bounded(self):
        return self.opts["window"]

    def key_spans(self, q0, q1):
        n, W = self.opts["n"], self.opts["window"]
        lo = max(0, q0 - W + 1)
        return [(0, q1)] if lo <= n else [(0, n), (lo, q1)]

    def no_op(self, length):
        return self.opts["window"] >= length


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

    def select(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["local"], vis, (j < self.opts["global"])[None, :].expand_as(t))

    def keys_per_query(self, i):
        g, w = self.opts["global"], self.opts["local"]
        return min(i + 1, w) + min(g, max(0, i + 1 - w))

    @property
    def bounded(self):
        return self.opts["local"]

    def key_spans(self, q0, q1):
        g, w = self.opts["global"], self.opts["local"]
        lo = max(0, q0 - w + 1)
        return [(0, q1)] if lo <= g else [(0, g), (lo, q1)]

    def no_op(self, length):
        return self.opts["local"] >= length


class SelfExtend(Method):
    """Self-Extend: neighbour attention (d = t) for t < W, grouped attention beyond.

    Grouped: q(i) = ⌊i/G⌋ + W - W/G, k(j) = ⌊j/G⌋.  datamllab/LongLM (self_extend_patch/Llama.py, the
    eager and prefill path) shifts by W - W/G with true division; its flash decoding path uses
    W - ⌊W/G⌋.  The two agree when G divides W (the defaults); the prefill path is followed here.
    """

    name = "self-extend"
    summary = "Self-Extend: d = t below W, ⌊i/G⌋ - ⌊j/G⌋ + W - W/G beyond"
    citation = "Jin et al., ICML 2024 (LLM Maybe LongLM: Self-Extend LLM Context Window Without Tuning)"
    OPTIONS = (
        Option("group", int, lambda L: 8, "group size G (LongLM's group_size_1)"),
        Option("window", int, lambda L: L // 4, "neighbour window W (group_size_2, default L_tr/4)"),
    )

    def validate(self):
        G, W = self.opts["group"], self.opts["window"]
        need(G >= 1, f"self-extend: group must be >= 1, got {G}")
        need(1 <= W < self.L, f"self-extend: window must be in [1, {self.L}) (the training length), got {W}")

    def branches(self):
        G, W = self.opts["group"], self.opts["window"]
        return (
            Branch("neighbour", plain, plain, True),
            Branch("group", lambda i: torch.div(i, G, rounding_mode="floor") + (W - W / G),
                   lambda j: torch.div(j, G, rounding_mode="floor"), False),
        )  # fmt: skip

    def select(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["window"], vis)

    def usable_length(self):
        G, W = self.opts["group"], self.opts["window"]
        return (self.L - W) * G + W  # Jin et al. 2024, §3: (L - w_n)·G + w_n

    def no_op(self, length):
        return self.opts["window"] >= length


class DualChunk(Method):
    """Dual Chunk Attention: chunks of c = s - w; keys at j mod c, queries by chunk relation.

    Same chunk: q = i mod c; previous chunk: min(i mod c + c, s); older chunks: HKUNLP/ChunkLlama
    (chunkllama_attn_replace.py) reads the successive table at c - 1, min(2c - 1, s), which is the
    paper's s whenever c > w (the defaults).
    """

    name = "dca"
    summary = "Dual Chunk Attention: intra-chunk, successive-chunk and inter-chunk position maps"
    citation = "An et al., ICML 2024 (Training-Free Long-Context Scaling of Large Language Models)"
    OPTIONS = (
        Option("chunk", int, lambda L: 3 * L // 4, "chunk size s (default 3 L_tr / 4)"),
        Option("local", int, lambda L: L // 16, "local window w (default L_tr / 16); c = s - w"),
    )

    def validate(self):
        s, w = self.opts["chunk"], self.opts["local"]
        need(s < self.L, f"dca: chunk = {s} must be < the training length {self.L}")
        need(0 <= w < s, f"dca: local must be in [0, chunk = {s}), got {w}")

    @property
    def c(self) -> int:
        return self.opts["chunk"] - self.opts["local"]

    def branches(self):
        s, c = self.opts["chunk"], self.c
        return (
            Branch("intra", lambda i: i % c, lambda j: j % c, False),
            Branch("successive", lambda i: (i % c + c).clamp(max=s), lambda j: j % c, False),
            Branch("inter", lambda i: torch.full_like(i, min(2 * c - 1, s)), lambda j: j % c, False),
        )

    def select(self, i, j):
        t, vis = causal(i, j)
        gap = (i // self.c)[:, None] - (j // self.c)[None, :]
        sel = torch.where(gap == 0, 0, torch.where(gap == 1, 1, 2)).to(torch.int8)
        return torch.where(vis, sel, torch.full_like(sel, MASKED))

    def usable_length(self):
        return math.inf

    def no_op(self, length):
        return self.c >= length


class ReRoPE(Method):
    """ReRoPE: d = t below w, d = w beyond (the query at w, the key at 0).  bojone/rerope."""

    name = "rerope"
    summary = "ReRoPE: d = min(t, w)"
    citation = "Su 2023 (Rectified Rotary Position Embeddings, kexue.fm/archives/9708)"
    OPTIONS = (Option("window", int, lambda L: L // 8, "w (default L_tr / 8)"),)

    def validate(self):
        w = self.opts["window"]
        need(1 <= w < self.L, f"{self.name}: window must be in [1, {self.L}) (the training length), got {w}")

    def branches(self):
        w = self.opts["window"]
        return (Branch("near", plain, plain, True), Branch("far", lambda i: torch.full_like(i, w), zero, True))

    def select(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["window"], vis)

    def usable_length(self):
        return math.inf

    def no_op(self, length):
        return self.opts["window"] >= length


class LeakyReRoPE(ReRoPE):
    """Leaky ReRoPE: d = t below w, w + (t - w)/k beyond.  bojone/rerope leaky_rerope_patch.py: the
    query at (i + w(k - 1))/k and the key at j/k (linear scaling by k, offset w(k - 1))."""

    name = "leaky-rerope"
    summary = "Leaky ReRoPE: d = t below w, w + (t - w)/k beyond"
    citation = ReRoPE.citation
    OPTIONS = ReRoPE.OPTIONS + (Option("k", float, lambda L: 16.0, "slope 1/k beyond w (default 16)"),)

    def validate(self):
        super().validate()
        need(self.opts["k"] > 0, f"leaky-rerope: k must be > 0, got {self.opts['k']}")

    def branches(self):
        w, k = self.opts["window"], self.opts["k"]
        return (
            Branch("near", plain, plain, True),
            Branch("far", lambda i: i / k + (w - w / k), lambda j: j / k, True),
        )

    def usable_length(self):
        w, k = self.opts["window"], self.opts["k"]
        return (self.L - 1 - w) * k + w + 1  # w + (L' - 1 - w)/k <= L_tr - 1


class String(Method):
    """STRING: d = t below S, t - S + W beyond (the query shifted back by S - W).

    HKUNLP/STRING (string_for_llama.py) runs the diagonal branch with flash window_size=[S, 0], which
    includes t = S, and the shifted branch from t = S on: the key at t = S enters twice.  A distance map
    gives each key one distance, so t = S is in the shifted branch only here.  The authors also scale
    cos and sin by 0.1 ln 2 + 1 (a temperature), which is not applied.
    """

    name = "string"
    summary = "STRING: d = t below S, t - S + W beyond"
    citation = "An et al., ICLR 2025 (Why Does the Effective Context Length of LLMs Fall Short?)"
    OPTIONS = (
        Option("shift", int, lambda L: L // 3, "shift S (default L_tr / 3)"),
        Option("local", int, lambda L: L // 32, "local value W (default L_tr / 32)"),
    )

    def validate(self):
        S, W = self.opts["shift"], self.opts["local"]
        need(1 <= S < self.L, f"string: shift must be in [1, {self.L}) (the training length), got {S}")
        need(0 <= W <= S, f"string: local must be in [0, shift = {S}], got {W}")

    def branches(self):
        S, W = self.opts["shift"], self.opts["local"]
        return (Branch("diagonal", plain, plain, True), Branch("shifted", lambda i: i - (S - W), plain, True))

    def select(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["shift"], vis)

    def usable_length(self):
        return self.L + self.opts["shift"] - self.opts["local"]

    def no_op(self, length):
        return self.opts["shift"] >= length


METHODS: dict[str, type[Method]] = {
    m.name: m for m in (Sinks, LMInfinite, SelfExtend, DualChunk, ReRoPE, LeakyReRoPE, String)
}


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``name:k=v,...`` -> (name, {k: v}) with the name checked; values are still text."""
    name, _, rest = str(spec).strip().partition(":")
    if name not in METHODS:
        raise ExtrapError(f"unknown extension method {name!r}; one of {', '.join(METHODS)}")
    opts: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ExtrapError(f"{name}: option {item!r} must be key=value")
        if key.strip() in opts:
            raise ExtrapError(f"{name}: option {key.strip()} given twice")
        opts[key.strip()] = value.strip()
    known = {o.name for o in METHODS[name].OPTIONS}
    unknown = sorted(set(opts) - known)
    if unknown:
        raise ExtrapError(f"{name}: unknown option {', '.join(unknown)} (options: {', '.join(sorted(known))})")
    return name, opts


def parse(spec: str, train_length: int) -> Method:
    """The method of ``spec`` for a model trained at ``train_length`` (ExtrapError for a bad spec)."""
    name, text = split_spec(spec)
    cls = METHODS[name]
    kinds = {o.name: o.kind for o in cls.OPTIONS}
    values = {}
    for key, value in text.items():
        try:
            number = float(value)
        except ValueError:
            raise ExtrapError(f"{name}: {key}={value} must be a number") from None
        if not math.isfinite(number) or (kinds[key] is int and not number.is_integer()):
            raise ExtrapError(f"{name}: {key}={value} must be {'an integer' if kinds[key] is int else 'finite'}")
        values[key] = kinds[key](number)
    return cls(train_length, **values)
