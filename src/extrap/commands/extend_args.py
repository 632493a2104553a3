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
        "string, options as in 'extrap pe list --extend' (not with --rope or a window); with --temperature, "
        "logits s(i)·q·k/(τ√d) at the method's positions, s(i) its own log-length option",
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


def check_extend_temperature(args, align_mode: str | None = None) -> None:
    """``--extend`` with ``--temperature auto`` on an hf: model: refused where the mode probes attention.

    A τ reaches the extension on both paths (GPT: each layer's ``temperature`` divides its scale; hf: the
    module's ``scaling``, which the extension's attention reads).  Algorithm 1 and Props. 1-2 read attention
    probabilities or logits, which an hf: model does not expose under an extension; log-length reads none.
    """
    from extrap.align import parse_temperature_spec
    from extrap.errors import ExtrapError

    if getattr(args, "extend", None) is None or not str(args.run).startswith("hf:"):
        return
    spec = parse_temperature_spec(getattr(args, "temperature", None))
    if spec.kind == "auto" and (spec.mode or align_mode or "pmax") != "log-length":
        raise ExtrapError(
            f"--extend with --temperature {args.temperature} on hf: models: the search probes attention, which "
            "an extension does not expose there (extrap runs only); give a τ, or --temperature auto:log-length"
        )
