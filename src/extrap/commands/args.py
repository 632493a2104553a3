"""Argument types shared by every command: argparse ``type=`` callables and common option groups.

A bad value fails inside argparse, which prints one line (``extrap: error: argument --x: ...``)
and exits with status 2 before anything is loaded or written.
"""

from __future__ import annotations

import argparse

MAX_LENGTH = 10**7  # longest evaluation length accepted on the command line
SPLITS = ("validation", "test", "heldout")


def lengths(text: str, minimum: int = 2) -> list[int]:
    """Comma-separated token counts, sorted and deduplicated; each an integer >= ``minimum``."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}") from None
    if not values:  # an empty list is a mistake, not a request for the defaults
        raise argparse.ArgumentTypeError("is empty: give comma-separated lengths")
    if any(not v.is_integer() or v < minimum or v > MAX_LENGTH for v in values):
        raise argparse.ArgumentTypeError(f"must be integers >= {minimum} (and at most {MAX_LENGTH:.0e})")
    return sorted({int(v) for v in values})


def lengths_from(minimum: int):
    """:func:`lengths` with another lower bound (theory accepts L = 1)."""

    def parse(text: str) -> list[int]:
        return lengths(text, minimum)

    parse.__name__ = "lengths"
    return parse


def pe(text: str) -> str:
    """A positional scheme spec that the registry builds (a name, a name with options, or a formula)."""
    from extrap import positional
    from extrap.errors import ExtrapError

    try:
        positional.get(text)
    except ExtrapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def names(text: str) -> list[str]:
    """Comma-separated names, in order, without blanks."""
    out = [v.strip() for v in text.split(",") if v.strip()]
    if not out:
        raise argparse.ArgumentTypeError("is empty")
    return out


def pes(text: str) -> list[str]:
    """Comma-separated positional scheme specs, each one checked by :func:`pe`."""
    return [pe(v) for v in names(text)]


def floats(text: str) -> list[float]:
    """Comma-separated numbers (a τ grid, a list of eps)."""
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, got {text!r}") from None
    if not out:
        raise argparse.ArgumentTypeError("is empty")
    return out


def fractions(text: str) -> list[float]:
    """Comma-separated numbers in (0, 1), deduplicated in order (a list of eps)."""
    out = []
    for v in floats(text):
        if not 0 < v < 1:  # NaN fails this too
            raise argparse.ArgumentTypeError(f"{v} must lie strictly between 0 and 1")
        out.append(v)
    return list(dict.fromkeys(out))


def _bounded_int(low: int, high: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


MAX_HEADS = 1024  # heads per layer the theory analyses on request; each is its own exact series
heads = _bounded_int(1, MAX_HEADS)
natural = _bounded_int(0)
positive_int = _bounded_int(1)
length = _bounded_int(2)  # a sequence length: at least one token of context and one to predict


def fraction(text: str) -> float:
    """A number strictly between 0 and 1 (eps, a threshold)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def temperature_spec(text: str):
    """A softmax temperature (004): ``none``, ``TAU``, ``TAU_1,...,TAU_R`` (one per layer) or
    ``auto[:MODE][:per-layer]``; returns None, a float, a list of floats or the canonical ``auto`` text.

    Only the model knows its layer count: a list of the wrong length is refused once it is loaded.
    """
    from extrap.align import parse_temperature_spec
    from extrap.errors import ExtrapError

    try:
        return parse_temperature_spec(text).value()
    except ExtrapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def device(text: str) -> str:
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N``, checked on this machine (:func:`extrap.devices.resolve_device`):
    CUDA asked for where there is none, or a GPU index past the last, fails here, before anything is loaded."""
    from extrap.devices import resolve_device
    from extrap.errors import ExtrapError

    try:
        resolve_device(text)
    except ExtrapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def add_device(p, default: str | None = None, note: str = "") -> None:
    """``--device``: where the model runs (every command that runs one takes it, with this one meaning)."""
    said = note or (f"default {default}" if default else "default: the run's own")
    p.add_argument(
        "--device",
        type=device,
        default=default,
        metavar="DEVICE",
        help=f"auto | cpu | cuda | cuda:N: where the model and its inputs live; auto is cuda when available ({said})",
    )


def loading_device(args) -> str | None:
    """``--device`` as the ``device`` of :func:`extrap.load` (``auto`` resolved); None when not given."""
    from extrap.devices import resolve_device

    name = getattr(args, "device", None)
    return None if name is None else str(resolve_device(name))


def add_split(p) -> None:
    p.add_argument(
        "--split", default="validation", choices=SPLITS, help="validation | test | heldout (validation then test)"
    )


def add_rope_arguments(p) -> None:
    """``--rope`` and ``--factor``: RoPE re-scaling at inference, for hf: models and runs trained with rope or xpos."""
    p.add_argument(
        "--rope",
        metavar="KIND[:key=value,...]",
        help="re-scale RoPE at inference, L = the run's L_tr: linear | ntk | dynamic | ntk-by-parts | yarn | "
        "truncated | llama3 (extrap's frequencies, with that scaling's options from `extrap pe list --options`, "
        "e.g. llama3:low_freq_factor=1,high_freq_factor=4), or for hf: models hf:TYPE[:key=value,...], any "
        "type of transformers' ROPE_INIT_FUNCTIONS with its rope_parameters keys "
        "(e.g. hf:llama3:original_max_position_embeddings=8192)",
    )
    p.add_argument("--factor", type=positive_float, help="RoPE scale factor s for --rope (default 1)")


def rope_options(args) -> dict:
    """``rope`` and ``factor`` from the command line, for :func:`extrap.load`."""
    return {"rope": getattr(args, "rope", None), "factor": getattr(args, "factor", None)}


def add_hf_arguments(p, corpus: bool = True) -> None:
    """Options of hf:PATH models (refused for extrap runs when given; --rope and --factor also rotary runs)."""
    g = p.add_argument_group("hf:PATH models (--rope, --factor: also extrap runs trained with rope or xpos)")
    g.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        help="hf: float32 | bfloat16 | float16 (default float32 on cpu, bfloat16 on cuda)",
    )
    add_rope_arguments(g)
    g.add_argument(
        "--train-length",
        type=length,
        dest="train_length",
        help="hf: L_tr (default: max_position_embeddings / n_positions of the config)",
    )
    if corpus:
        g.add_argument(
            "--corpus",
            help="hf: evaluation corpus, tokenized with the model's tokenizer (stdlib, text:PATH, ...; default stdlib)",
        )


def hf_options(args) -> dict:
    """The hf: options given on the command line (None when absent)."""
    return {k: getattr(args, k, None) for k in ("dtype", "rope", "factor", "train_length")}
