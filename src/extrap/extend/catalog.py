"""The extension methods that remap distances, and the registry of all seven (``name:key=value,...`` specs).

Each rule was checked against its paper and the authors' code; where the code differs from the
paper's one-line rule, the code is followed and the comment says so.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from extrap.errors import ExtrapError
from extrap.extend.bounded import LMInfinite, Sinks
from extrap.extend.methods import MASKED, Branch, Method, Option, causal, log_scale, need, pick, plain, zero


class SelfExtend(Method):
    """Self-Extend: neighbour attention (d = t) for t < W, grouped attention beyond.

    Grouped: q(i) = ⌊i/G⌋ + s, k(j) = ⌊j/G⌋.  datamllab/LongLM shifts by s = W - W/G with true division
    on its prefill paths (self_extend_patch/Llama.py, Llama_4_40.py's flash prefill), the default here;
    ``floor=1`` takes s = W - ⌊W/G⌋, as Llama_4_40.py's eager path and the flash decoding path do.  The two
    agree when G divides W (the defaults) and share the in-distribution bound G·(L_tr - W + ⌊W/G⌋).
    ``log=B`` (LongLM's scale_base, off by default) multiplies the query at i by max(1, ln(i + 1)/ln B).
    """

    name = "self-extend"
    summary = "Self-Extend: d = t below W, ⌊i/G⌋ - ⌊j/G⌋ + W - W/G beyond"
    citation = "Jin et al., ICML 2024 (LLM Maybe LongLM: Self-Extend LLM Context Window Without Tuning)"
    OPTIONS = (
        Option("group", int, lambda L: 8, "group size G (LongLM's group_size_1)"),
        Option("window", int, lambda L: L // 4, "neighbour window W (group_size_2, default L_tr/4)"),
        Option("floor", int, lambda L: 0, "1: shift by W - ⌊W/G⌋ (Llama_4_40.py's eager path), 0: W - W/G", False),
        Option("log", float, lambda L: 0.0, "B > 1: query × max(1, ln(i+1)/ln B) (LongLM's scale_base; 0: off)", False),
    )

    def validate(self):
        G, W = self.opts["group"], self.opts["window"]
        need(G >= 1, f"self-extend: group must be >= 1, got {G}")
        need(1 <= W < self.L, f"self-extend: window must be in [1, {self.L}) (the training length), got {W}")
        need(self.opts["floor"] in (0, 1), f"self-extend: floor must be 0 or 1, got {self.opts['floor']}")
        log = self.opts["log"]
        need(log == 0 or log > 1, f"self-extend: log must be 0 (off) or > 1, got {log}")

    @property
    def shift(self) -> float:
        G, W = self.opts["group"], self.opts["window"]
        return W - W // G if self.opts["floor"] else W - W / G

    def branches(self):
        G, s = self.opts["group"], self.shift
        return (
            Branch("neighbour", plain, plain, True),
            Branch("group", lambda i: torch.div(i, G, rounding_mode="floor") + s,
                   lambda j: torch.div(j, G, rounding_mode="floor"), False),
        )  # fmt: skip

    def rule(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["window"], vis)

    def usable_length(self):
        """Grouped pairs peak at (L' - 1, 0): ⌊(L' - 1)/G⌋ + s <= L_tr - 1 iff ⌊(L' - 1)/G⌋ <= L_tr - 1 - W + ⌊W/G⌋
        (either shift), i.e. L' <= G·(L_tr - W + ⌊W/G⌋); Jin et al. 2024, §3's (L - w_n)·G + w_n when G divides W."""
        G, W = self.opts["group"], self.opts["window"]
        return G * (self.L - W + W // G)

    def max_distance(self, length):
        G, W = self.opts["group"], self.opts["window"]
        if length - 1 < W:
            return float(length - 1)
        return max(float(W - 1), (float((length - 1) // G) + self.shift) - 0.0)

    def query_scale(self, i, length):
        return log_scale(i, self.opts["log"])

    def no_op(self, length):
        return self.opts["window"] >= length and not (self.opts["log"] and length > self.opts["log"])


class DualChunk(Method):
    """Dual Chunk Attention: chunks of c = s - w; keys at j mod c, queries by chunk relation.

    Same chunk: q = i mod c; previous chunk: min(i mod c + c, s); older chunks: HKUNLP/ChunkLlama
    (chunkllama_attn_replace.py) reads the successive table at c - 1, min(2c - 1, s), which is the
    paper's s whenever c > w (the defaults).  ``mscale=1``: ChunkLlama's current code multiplies q's and k's
    cos and sin by m = 0.05·ln(L'/L_tr) + 1 once the sequence is longer than L_tr (scores × m²); off by default.
    """

    name = "dca"
    summary = "Dual Chunk Attention: intra-chunk, successive-chunk and inter-chunk position maps"
    citation = "An et al., ICML 2024 (Training-Free Long-Context Scaling of Large Language Models)"
    OPTIONS = (
        Option("chunk", int, lambda L: 3 * L // 4, "chunk size s (default 3 L_tr / 4)"),
        Option("local", int, lambda L: L // 16, "local window w (default L_tr / 16); c = s - w"),
        Option("mscale", int, lambda L: 0, "1: scores × (0.05 ln(L'/L_tr) + 1)² beyond L_tr (ChunkLlama)", False),
    )

    def validate(self):
        s, w = self.opts["chunk"], self.opts["local"]
        need(s < self.L, f"dca: chunk = {s} must be < the training length {self.L}")
        need(0 <= w < s, f"dca: local must be in [0, chunk = {s}), got {w}")
        need(self.opts["mscale"] in (0, 1), f"dca: mscale must be 0 or 1, got {self.opts['mscale']}")

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

    def rule(self, i, j):
        t, vis = causal(i, j)
        gap = i // self.c - j // self.c
        return torch.where(vis, torch.where(gap == 0, 0, torch.where(gap == 1, 1, 2)), MASKED).to(torch.int8)

    def usable_length(self):
        return math.inf  # every distance <= s <= L_tr - 1

    def max_distance(self, length):
        """Same chunk: i mod c - j mod c <= c - 1; previous chunk: min(i mod c + c, s) at j mod c = 0, which
        reaches min(L' - 1, 2c - 1, s); older chunks: min(2c - 1, s).  Together min(L' - 1, 2c - 1, s)."""
        return float(min(length - 1, 2 * self.c - 1, self.opts["chunk"]))

    def query_scale(self, i, length):
        if not self.opts["mscale"] or length <= self.L:
            return None
        return torch.full(i.shape, (0.05 * math.log(length / self.L) + 1) ** 2, dtype=torch.float64)

    def no_op(self, length):
        return self.c >= length and not (self.opts["mscale"] and length > self.L)


class ReRoPE(Method):
    """ReRoPE: d = t below w, d = w beyond (the query at w, the key at 0).  bojone/rerope.

    bojone/rerope (rerope_patch.py, leaky_rerope_patch.py) always multiplies the query at i by
    max(1, ln(i + 1)/ln L_tr); here ``log=1`` turns that on (off by default: the distance map alone).
    """

    name = "rerope"
    summary = "ReRoPE: d = min(t, w)"
    citation = "Su 2023 (Rectified Rotary Position Embeddings, kexue.fm/archives/9708)"
    OPTIONS = (
        Option("window", int, lambda L: L // 8, "w (default L_tr / 8)"),
        Option("log", int, lambda L: 0, "1: query × max(1, ln(i+1)/ln L_tr), as bojone/rerope always does", False),
    )

    def validate(self):
        w = self.opts["window"]
        need(1 <= w < self.L, f"{self.name}: window must be in [1, {self.L}) (the training length), got {w}")
        need(self.opts["log"] in (0, 1), f"{self.name}: log must be 0 or 1, got {self.opts['log']}")

    def branches(self):
        w = self.opts["window"]
        return (Branch("near", plain, plain, True), Branch("far", lambda i: torch.full_like(i, w), zero, True))

    def rule(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["window"], vis)

    def usable_length(self):
        return math.inf  # d <= w < L_tr

    def max_distance(self, length):
        return float(min(length - 1, self.opts["window"]))

    def query_scale(self, i, length):
        return log_scale(i, self.L if self.opts["log"] else 0)

    def no_op(self, length):
        return self.opts["window"] >= length and not (self.opts["log"] and length > self.L)


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
        return math.floor((self.L - 1 - w) * Fraction(k)) + w + 1  # w + (L' - 1 - w)/k <= L_tr - 1, exactly

    def max_distance(self, length):
        w, k = self.opts["window"], self.opts["k"]
        if length - 1 < w:
            return float(length - 1)
        return ((length - 1) / k + (w - w / k)) - 0 / k  # the far branch at (L' - 1, 0), as the map computes it


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

    def rule(self, i, j):
        t, vis = causal(i, j)
        return pick(t < self.opts["shift"], vis)

    def usable_length(self):
        return self.L + self.opts["shift"] - self.opts["local"]  # t - S + W <= L_tr - 1 at t = L' - 1

    def max_distance(self, length):
        S, W = self.opts["shift"], self.opts["local"]
        return float(length - 1 if length - 1 < S else max(S - 1, length - 1 - S + W))

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
