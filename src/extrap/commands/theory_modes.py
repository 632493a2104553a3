"""Which flags each mode of ``extrap theory`` reads: one given where it has no effect is refused in one line.

Every flag of :data:`FLAGS` stays None (or False) unless given; :func:`check` refuses the ones the mode does not
read, then fills in the defaults, so a flag added later is dropped only if someone adds it here on purpose.
"""

from __future__ import annotations

from extrap.commands import args as types
from extrap.errors import ExtrapError

DEFAULT_HEADS = 8
DEFAULT_EPS_TEXT = "1e-3,1e-6"
DEFAULT_LENGTHS_TEXT = "1024,2048,4096,8192,16384"

ROPE_FLAGS = ("length", "pretrain_base", "tune_length")  # the RoPE analysis's: read only with a rotary PE
FLAGS = ("heads", "eps", "lengths", "plot", "compare", "explain", "head_dim", *ROPE_FLAGS)
READS = {
    "--extend": ("head_dim", "length", "pretrain_base"),  # the extension's distance map (theory_extend)
    "--checkpoint": ("eps", "lengths", "plot", "explain", *ROPE_FLAGS),  # the checkpoint sets its heads, head dim
    "PEs": FLAGS,
}


def check(args) -> None:
    """Refuse what the asked mode does not read (before anything is computed), then set the defaults."""
    mode = "--extend" if args.extend is not None else "--checkpoint" if args.checkpoint else "PEs"
    where = "with PEs given by name" if mode == "PEs" else f"with {mode}"
    if mode != "--checkpoint" or args.head_dim is None:  # a checkpoint's --head-dim has its own message
        types.refuse_unread(args, READS[mode], FLAGS, where)
    if mode == "PEs" and args.head_dim is None:
        types.refuse_unread(args, (), ROPE_FLAGS, "without --head-dim D (it turns on the RoPE analysis)")
    if mode == "--extend" and args.head_dim is None:
        types.refuse_unread(args, (), ("pretrain_base",), "with --extend without --head-dim D")
    if args.compare and len(args.pe) < 2 and args.pe != ["all"]:
        raise ExtrapError("--compare compares the first PE with each other one: give at least two PEs")
    args.heads = DEFAULT_HEADS if args.heads is None else args.heads
    args.eps = types.fractions(DEFAULT_EPS_TEXT) if args.eps is None else args.eps
    args.lengths = types.lengths_from(1)(DEFAULT_LENGTHS_TEXT) if args.lengths is None else args.lengths


def refuse_rope_flags(args, why: str) -> None:
    """The RoPE flags given where there is no RoPE to analyse (``why``: which model has none)."""
    types.refuse_unread(args, (), ("head_dim", *ROPE_FLAGS), why)
