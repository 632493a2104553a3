"""A wall-clock limit for symbolic fallbacks (sympy.limit, Sum.is_convergent can run away)."""

from __future__ import annotations

import contextlib
import signal
import threading


class TimeLimit(Exception):
    """The guarded computation ran past its limit."""


def can_limit() -> bool:
    """SIGALRM is only usable from the main thread of a POSIX process."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(seconds: float, required: bool = True):
    """Raise :class:`TimeLimit` inside the block after ``seconds`` (main thread only).

    Outside the main thread a limit cannot be enforced: with ``required`` the block is
    refused (TimeLimit at once), otherwise it runs unguarded.
    """
    if not can_limit():
        if required:
            raise TimeLimit("this step needs the main thread (no way to stop it otherwise)")
        yield
        return

    def _alarm(signum, frame):
        raise TimeLimit(f"gave up after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    old_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_timer[0] > 0:  # re-arm an outer timer we displaced
            signal.setitimer(signal.ITIMER_REAL, *old_timer)
