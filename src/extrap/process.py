"""What extrap does to its own process (the ``extrap`` command), and never to a caller's.

A Python caller of the API or a test runner keeps its process as it is; only the console script (and
``python -m extrap.cli``) declares the process extrap's own through :func:`own`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging

log = logging.getLogger(__name__)

_OWNED = False
# glibc's mallopt parameters: below this size an allocation comes from the heap, not from its own mmap;
# and the heap's free top is returned to the system only beyond this size
_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD = -3, -1
KEEP_BYTES = 32 << 20  # glibc's largest mmap threshold on 64-bit systems


def own() -> None:
    """This process runs the ``extrap`` command: :func:`imports_done` may tune it."""
    global _OWNED
    _OWNED = True


def imports_done() -> None:
    """A command has loaded its libraries (torch and sympy: about a million objects that live until exit).

    In extrap's own process they leave the cyclic collector's reach (``gc.freeze``): otherwise the first
    full collection after the imports scans them all, about 0.1 s, as long as the theory of every
    built-in scheme.  Objects made afterwards are collected as usual.  Freed heap memory is kept for the
    next temporaries (:func:`_keep_freed_memory`).
    """
    if _OWNED:
        gc.freeze()
        _keep_freed_memory()


def _keep_freed_memory() -> bool:
    """Keep freed blocks below 32 MB in the heap for the next allocation (glibc only; False elsewhere).

    By default glibc maps each block above 128 KB afresh and gives freed memory back at once, so every
    new temporary tensor of that size (the theory's (H, 16384) float64 biases: 1 MB) is paged in again,
    thousands of page faults per analysis.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        ok = libc is not None and all(libc.mallopt(p, KEEP_BYTES) == 1 for p in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD))
    except (OSError, AttributeError):  # not glibc (musl, macOS): no mallopt, nothing to tune
        ok = False
    if not ok:
        log.debug("malloc thresholds left as they are (no glibc mallopt)")
    return ok
