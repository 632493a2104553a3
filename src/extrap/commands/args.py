"""Argument types shared by every command: argparse ``type=`` callables and common option groups.

A bad value fails inside argparse, which prints one line (``extrap: error: argument --x: ...``)
and exits with status 2 before anything is loaded or written.
"""

from __future__ import annotations

import argparse
import os

# --extend lives in its own module; the commands read it here with the other argument types
from extrap.commands.extend_args import (  # noqa: F401
    add_extend_argument,
    apply_extend,
    check_extend_flags,
    check_extend_temperature,
    extend_spec,
)

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


def bounded_int(low: int, high: int | None = None):
    """An integer in [low, high] (``high`` None: no upper bound), refused in one line otherwise."""

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
heads = bounded_int(1, MAX_HEADS)
natural = bounded_int(0)
positive_int = bounded_int(1)
length = bounded_int(2)  # a sequence length: at least one token of context and one to predict
seed = bounded_int(-(2**63), 2**63 - 1)  # what torch's and Python's generators take (a signed 64-bit integer)


def window(text: str) -> str:
    """``--window``: auto | none | W >= 1."""
    from extrap.errors import ExtrapError
    from extrap.evaluate.settings import parse_window

    try:
        return str(parse_window(text))
    except ExtrapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def check_folder_output(flag: str, path: str | None) -> None:
    """A folder to write figures to (``--plot DIR``): new, or a folder; refused before any work otherwise.

    The folder may be a symbolic link (the user chose it), but a figure in it (``*.png``, ``*.svg``) that
    is a link, a FIFO or a folder is refused now: the writer would refuse it after the work, and never
    follows it (:func:`extrap.io.check_file_target`).
    """
    from extrap.errors import ExtrapError
    from extrap.io import check_file_target

    if path and os.path.exists(path) and not os.path.isdir(path):
        raise ExtrapError(f"{flag} {path} is not a folder: give a folder to write the figures to")
    if path and os.path.isdir(path):
        for name in sorted(os.listdir(path)):
            if name.endswith((".png", ".svg")):
                try:
                    check_file_target(os.path.join(path, name))
                except ExtrapError as e:
                    raise ExtrapError(f"{flag} {e}") from None


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
    """The hf: options given on the command line (None when absent), with the evaluation dtype."""
    return {**{k: getattr(args, k, None) for k in ("rope", "factor", "train_length")}, "dtype": eval_dtype(args)}


DTYPE_NAMES = ("bfloat16", "float16", "float32")  # extrap.precision.DTYPES' names (torch is not imported here)


def add_dtype(p) -> None:
    """``--dtype``: what the model computes in when it evaluates (:mod:`extrap.precision`)."""
    p.add_argument(
        "--dtype",
        choices=DTYPE_NAMES,
        help="bfloat16 | float16 | float32: the forward pass's dtype (extrap runs: autocast, the weights, "
        "LayerNorms, softmax and loss stay float32; hf: models: their weights; default bfloat16 on cuda, "
        "float32 on cpu); the JSON records it",
    )


def eval_dtype(args, source: str = "run") -> str | None:
    """``--dtype`` for the model named by ``args.<source>``: given, or the default on its device (extrap runs;
    an hf: model's loader applies the same default on the device it chooses, so None is passed on)."""
    name = getattr(args, "dtype", None)
    if name is not None or str(getattr(args, source)).startswith("hf:"):
        return name
    from extrap.precision import default_dtype

    return default_dtype(loading_device(args) or "cpu")


# A run directory's own files (extrap.run.directory's layout): results may be written beside them, not over them.
RUN_FILES = frozenset({"config.json", "tokenizer.json", "metrics.jsonl", "latest.json", "final.json", ".lock"})
RUN_FOLDERS = ("checkpoints", "tb")


def flags(args, names) -> dict:
    """The flags ``names`` as keyword arguments of the same name, as parsed (settings fields the flags fill)."""
    return {k: getattr(args, k) for k in names}


def given_flags(args, names) -> dict:
    """The flags of ``names`` that were given, as keyword arguments of the same name (one not given: None, which
    leaves the field it fills at its default)."""
    return {k: v for k, v in flags(args, names).items() if v is not None}


def check_outputs(args, runs=(), inputs=(), flags=("out", "csv")) -> None:
    """``--out`` and ``--csv``, refused before any work where writing them would destroy something.

    Each target must be a regular file, a new path or a stream, never a symbolic link (:func:`extrap.io.output_target`),
    must not be one of the files of a run in ``runs`` (a run directory's own files, anything in an
    ``hf:`` folder) nor an input in ``inputs`` (``(flag, path)`` pairs), and two outputs must differ.
    """
    from extrap.errors import ExtrapError
    from extrap.io import output_target

    seen: dict[str, str] = {}
    for flag in flags:
        path = getattr(args, flag, None)
        if not path:
            continue
        name = f"--{flag.replace('_', '-')}"
        try:
            target = output_target(path)
        except ExtrapError as e:
            raise ExtrapError(f"{name} {e}") from None
        if str(target) in seen:
            raise ExtrapError(f"{name} {path} is also {seen[str(target)]}: give each output its own file")
        for what, folder in _owners(runs):
            if _owns(what, folder, target):
                raise ExtrapError(f"{name} {path} is a file of {what} {folder}: writing it would damage the {what}")
        for flag_in, source in inputs:
            if source and os.path.realpath(source) == str(target):
                raise ExtrapError(f"{name} {path} is also {flag_in}: writing it would replace the input")
        seen[str(target)] = name


def _owners(runs) -> list[tuple[str, str]]:
    """(``run`` or ``model folder``, its real path) for each run directory or ``hf:PATH`` of ``runs``."""
    out = []
    for run in runs:
        if not run:
            continue
        text = str(run)
        if text.startswith("hf:"):
            out.append(("model folder", os.path.realpath(os.path.expanduser(text[3:]))))
        else:
            out.append(("run", os.path.realpath(text)))
    return out


def _owns(what: str, folder: str, target) -> bool:
    """Whether ``target`` (a real path) is a file that ``folder`` holds as a run or a model."""
    try:
        rel = target.relative_to(folder)
    except ValueError:
        return False
    if what == "model folder":
        return True  # extrap never writes into a Hugging Face checkpoint
    return str(rel) in RUN_FILES or rel.parts[0] in RUN_FOLDERS


def require_causal(run, command: str) -> None:
    """Refuse an encoder-decoder (a T5 ``hf:PATH``) where ``command`` needs a causal LM, naming what works for it."""
    from extrap.errors import ExtrapError
    from extrap.model.protocol import ExtrapLM

    if not isinstance(run.model, ExtrapLM):
        raise ExtrapError(
            f"{run.path} is an encoder-decoder, not a causal LM: extrap {command} needs one; for T5 use "
            "extrap align (its encoder's attention), extrap task score, or extrap theory --checkpoint"
        )


def state_assumed_length(run) -> None:
    """Say so when L_tr is not the checkpoint's own but a family default (T5's 512, BLOOM's 2048)."""
    import logging

    source = getattr(getattr(run, "config", None), "train_length_source", None)
    if source not in (None, "config", "given"):
        logging.getLogger(__name__).info(
            "extrap: L_tr = %s assumed (%s): the checkpoint records no training length; give --train-length",
            run.train_length,
            source,
        )


def refuse_unread(args, reads, flags, where: str) -> None:
    """Each of ``flags`` (argparse dests that stay None or False unless given) that was given but that the
    asked mode does not read (not in ``reads``) is refused in one line: a flag is never silently dropped."""
    from extrap.errors import ExtrapError

    for name in flags:
        value = getattr(args, name, None)
        if name not in reads and value is not None and value is not False:
            raise ExtrapError(f"--{name.replace('_', '-')} has no effect {where}")
