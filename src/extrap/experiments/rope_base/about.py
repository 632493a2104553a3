"""What ``extrap study --help`` says of experiment ``rope-base``, and its default PEs (read without loading the
experiment: it imports the protocol only)."""

from __future__ import annotations

from extrap.experiments.protocol import About, Choice

# Plain RoPE at five bases, p-RoPE, partial rotary and NoPE.  The p= and partial= options must be in the
# registry (extrap.positional.rotary); build() refuses a spec it does not know.
ROPE_BASES = (100, 1000, 10000, 100000, 1000000)
DEFAULT_PES = (*(f"rope:base={b}" for b in ROPE_BASES), "rope:p=0.75", "rope:partial=0.5", "nope")

ABOUT = About(
    "RoPE's theory against trained models: bases, p-RoPE, partial rotary and NoPE up to 16 × L_tr",
    {"pe": Choice("", ", ".join(DEFAULT_PES)), "delta": None},
)
