"""What ``extrap study --help`` says of experiment ``alignment``, and its default PEs (read without loading the
experiment: it imports the protocol only)."""

from __future__ import annotations

from extrap.experiments.protocol import About, Choice

DEFAULT_PES = ("t5", "alibi")

ABOUT = About(
    "attention alignment τ and retrieval accuracy by length, with and without 004's alignment (004 §5.2)",
    {
        "pe": Choice("", ", ".join(DEFAULT_PES)),
        "tasks": Choice("retrieval tasks (passkey, line, topic)", "the preset's tasks"),
    },
)
