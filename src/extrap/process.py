"""What extrap does to its own process (the ``extrap`` command), and never to a caller's.

A Python caller of the API or a test runner keeps its process as it is; only the console script (and
``python -m extrap.cli``) declares the process extrap's own through :func:`own`.
"""

from __future__ import annotations

import gc

_OWNED = False


def own() -> None:
    """This process runs the ``extrap`` command: :func:`imports_done` may tune it."""
    global _OWNED
    _OWNED = True


def owned() -> bool:
    return _OWNED


def imports_done() -> None:
    """A command has loaded its libraries (torch and sympy: about a million objects that live until exit).

    In extrap's own process they leave the cyclic collector's reach (``gc.freeze``): otherwise the first
    full collection after the imports scans them all, about 0.1 s, as long as the theory of every
    built-in scheme.  Objects made afterwards are collected as usual.
    """
    if _OWNED:
        gc.freeze()
