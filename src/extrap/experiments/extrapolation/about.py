"""What ``extrap study --help`` says of experiments ``extrapolation`` and ``alibi-slopes``, and their default PEs
(read without loading the experiments: it imports the protocol only)."""

from __future__ import annotations

from extrap.experiments.protocol import About, Choice

DEFAULT_PES = (
    "alibi",
    "kerple-log",
    "sandwich",
    "type1",
    "type2",
    "example1",
    "example2",
    "sinusoidal",
    "rope",
    "nope",
)

EXTRAPOLATION = About(
    "which relative PEs extrapolate, and their TRF against the ERF (000)",
    {"pe": Choice("", ", ".join(DEFAULT_PES)), "delta": None},
)
ALIBI_SLOPES = About("ALiBi's slopes shifted, shared and windowed (003 §4): its PEs are the variants", {"delta": None})
