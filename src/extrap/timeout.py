"""A wall-clock limit for symbolic fallbacks (sympy.limit, Sum.is_convergent can run away)."""

from __future__ import annotations

import _signal  # signal.signal's C core: the wrapper converts handlers to enums via two caught exceptions
import contextlib
import signal
import threading

RETRY_S = 0.05  # after a limit fires, it fires again this often until the guarded block is left


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

    inside = [True]  # False once the block is being left: a repeat already on its way then does nothing

    def _alarm(signum, frame):
        if not inside[0]:
            return
        # Python may swallow the exception (raised inside a weakref callback or a __del__, or caught by a
        # library's broad except): the alarm repeats until the block is left, where it is disarmed
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
        raise TimeLimit(f"gave up after {seconds:g} s")

    # (3 us a call, 10x the C call: the theory engine sets ~160 limits a run, one per head and step)
    previous = _signal.signal(signal.SIGALRM, _alarm)
    old_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        inside[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        _signal.signal(signal.SIGALRM, previous)  # the raw previous handler: SIG_DFL/SIG_IGN as ints, or a callable
        if old_timer[0] > 0:  # re-arm an outer timer we displaced
            signal.setitimer(signal.ITIMER_REAL, *old_timer)
