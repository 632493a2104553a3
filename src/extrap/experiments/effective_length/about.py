"""What ``extrap study --help`` says of experiment ``effective-length``, and its default PEs (read without loading
the experiment: it imports the protocol only)."""

from __future__ import annotations

from extrap.experiments.protocol import About, Choice

# Three bias PEs with a finite TRF (ALiBi, KERPLE-log, 000's Type 1) beside the two whose TRF is not applicable
# (RoPE, NoPE): five models, so the cpu preset fits ~12 minutes on two cores.
DEFAULT_PES = ("alibi", "kerple-log", "type1", "rope", "nope")

ABOUT = About(
    "RULER-style effective length beside the TRF, with perplexity and LongPPL",
    {
        "pe": Choice("", ", ".join(DEFAULT_PES)),
        "tasks": Choice("RULER-style tasks that fit L_tr with their answer", "the preset's tasks"),
        "delta": None,
    },
)
