"""The ``extrap`` command line.

Each command lives in its own module that exposes ``register(subparsers)``; this
file only wires them together and turns user errors into one-line messages.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from extrap.errors import ExtrapError

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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_protect_formulas(list(sys.argv[1:] if argv is None else argv)))
    try:
        return int(args.func(args) or 0)
    except ExtrapError as e:
        print(f"extrap: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("extrap: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
