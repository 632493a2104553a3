"""What ``extrap study --help`` says of experiment ``finetune-extension``, and its methods (read without loading
the experiment: it imports the protocol only)."""

from __future__ import annotations

from extrap.experiments.protocol import About, Choice

EXACT = ("rope-ft", "pi", "ntk", "ntk-16", "yarn", "llama3", "abf", "pose", "dynamic")
APPROXIMATE = ("s2-attn", "lm-infinite", "self-extend")
METHODS = (*EXACT, *APPROXIMATE)

ABOUT = About(
    "the extension base extended by a short fine-tune per method under one budget (LCEG; its PEs are not chosen)",
    {"methods": Choice(", ".join(METHODS), "all"), "delta": None},
)
