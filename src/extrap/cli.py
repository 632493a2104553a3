"""The ``extrap`` command line.

Each command lives in its own module that exposes ``register(subparsers)``; this
file only wires them together and turns user errors into one-line messages.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import sys

from extrap import process
from extrap.errors import ExtrapError
from extrap.io import bind_closed_streams, silence_stdout

# module path -> registers one or more subcommands
COMMAND_MODULES = [
    "extrap.commands.pe",
    "extrap.commands.theory",
    "extrap.commands.data",
    "extrap.commands.train",
    "extrap.commands.eval",
    "extrap.commands.align",
    "extrap.commands.erf",
    "extrap.commands.study",
    "extrap.commands.generate",
    "extrap.commands.task",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, status 2
        self.exit(2, f"extrap: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="extrap", description="Length extrapolation of transformer LMs.")
    from extrap.version import __version__

    parser.add_argument("--version", action="version", version=f"extrap {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:  # a command whose module is not installed yet
            if e.name == name:
                continue
            raise
        mod.register(sub)
    return parser


def _protect_formulas(argv: list[str]) -> list[str]:
    """A formula such as ``-2*log(n)`` starts with '-', which argparse would read as an option.

    Arguments that start with '-' but contain formula syntax are rewritten to the
    equivalent registry spec ``formula:-2*log(n)``.
    """
    out = []
    for a in argv:
        if a.startswith("-") and not a.startswith("--") and any(c in a for c in "()*/^+") and "=" not in a:
            a = "formula:" + a
        out.append(a)
    return out


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (it may be swapped, as in tests)."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


def _log_to_stderr() -> None:
    """The library reports progress through ``logging``; the CLI shows extrap's INFO lines as plain text."""
    logger = logging.getLogger("extrap")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler())
    logger.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    bind_closed_streams()
    _log_to_stderr()
    parser = build_parser()
    try:  # argparse reports a bad flag or value in one line and exits 2; --help and --version exit 0
        args = parser.parse_args(_protect_formulas(list(sys.argv[1:] if argv is None else argv)))
    except SystemExit as e:
        return int(e.code or 0)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a write error (a full disk, /dev/full) surfaces here, not at exit
        return code
    except ExtrapError as e:
        return _fail(str(e))
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as command-line tools do
        silence_stdout()
        return 141  # 128 + SIGPIPE
    except OSError as e:
        if e.errno not in ENVIRONMENT_ERRORS:
            raise  # anything else is a bug: keep its traceback
        return _fail(f"{e.strerror}: {e.filename}" if e.filename else f"{e.strerror} while writing the output")
    except KeyboardInterrupt:
        print("extrap: interrupted", file=sys.stderr)
        return 130


# The environment, not extrap, is at fault: these become one line; every other exception keeps its traceback.
ENVIRONMENT_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT,
                                errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENAMETOOLONG})  # fmt: skip


def _fail(message: str) -> int:
    print(f"extrap: error: {message}", file=sys.stderr)
    return 2


def entry(argv: list[str] | None = None) -> int:
    """The console script and ``python -m extrap.cli``: the process is extrap's own (:mod:`extrap.process`)."""
    process.own()
    return main(argv)


if __name__ == "__main__":
    sys.exit(entry())
