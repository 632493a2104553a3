"""What ``extrap study --help`` says of experiment ``extension``, and its methods (read without loading the
experiment: it imports the protocol only)."""

from __future__ import annotations

from extrap.experiments.protocol import About, Choice

# One RoPE model, trained as rope-base trains it, read with each inference-time method ("none": as trained).
METHODS = (
    "none", "pi", "ntk", "dynamic", "yarn", "llama3", "rerope", "leaky-rerope",
    "self-extend", "dca", "lm-infinite", "string", "window", "sinks",
)  # fmt: skip

ABOUT = About(
    "one RoPE model read with each training-free extension method (its PEs are not chosen)",
    {"methods": Choice(", ".join(METHODS), "all"), "delta": None},
)
