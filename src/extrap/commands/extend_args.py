"""``--extend`` on the command line: parsing, the flags it is not combined with, applying it to a loaded run."""

from __future__ import annotations

import argparse


def extend_spec(text: str) -> str:
    """``--extend METHOD[:k=v,...]``: the method and option names checked now, the values once L_tr is known."""
    from extrap.errors import ExtrapError
    from extrap.extend import split_spec

    try:
        split_spec(text)
    except ExtrapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_extend_argument(p) -> None:
    """``--extend``: a training-free RoPE extension at inference (extrap rope/xpos runs, hf: Llama-family models)."""
    p.add_argument(
        "--extend",
        type=extend_spec,
        metavar="METHOD[:k=v,...]",
        help="training-free RoPE extension: sinks | lm-infinite | self-extend | dca | rerope | leaky-rerope | "
        "string, options as in 'extrap pe list --extend' (not with --rope, --temperature or a window)",
    )


def apply_extend(run, args) -> None:
    """Put ``--extend`` into the loaded run's model (the caller refused its conflicts before loading)."""
    if getattr(args, "extend", None) is not None:
        import logging

        from extrap.extend import extend_run

        method = extend_run(run, args.extend)
        logging.getLogger(__name__).info("extrap: extension %s (L_tr = %s; %s)", method.spec, method.L, method.citation)


def check_extend_flags(args, refused: tuple[str, ...]) -> None:
    """Before anything is loaded: ``--extend`` with a flag it is not tested with is refused."""
    from extrap.errors import ExtrapError

    if getattr(args, "extend", None) is None:
        return
    for name in refused:
        if getattr(args, name, None) not in (None, "none"):
            raise ExtrapError(f"--extend is not combined with --{name.replace('_', '-')}")
