"""extrap.timeout.time_limit: it fires, it nests, and it gives the SIGALRM handler back as it found it."""

from __future__ import annotations

import signal
import time

import pytest

from extrap.timeout import TimeLimit, time_limit


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_limit_fires_and_restores_the_handler_it_found():
    def mine(signum, frame):  # a handler of the caller's own
        raise AssertionError("the caller's handler ran inside the limit")

    before = signal.signal(signal.SIGALRM, mine)
    try:
        with pytest.raises(TimeLimit, match="gave up after 0.05 s"):
            with time_limit(0.05):
                _spin(2)
        assert signal.getsignal(signal.SIGALRM) is mine
        with time_limit(5):
            pass
        assert signal.getsignal(signal.SIGALRM) is mine and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    finally:
        signal.signal(signal.SIGALRM, before)
    assert signal.getsignal(signal.SIGALRM) == before  # SIG_DFL comes back as the Handlers member


def test_an_inner_limit_rearms_the_outer_one():
    with pytest.raises(TimeLimit, match="gave up after 0.1 s"):
        with time_limit(0.1):
            with time_limit(5):
                pass
            _spin(2)
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_a_limit_that_is_swallowed_fires_again_until_the_block_is_left():
    """An exception raised in a weakref callback or caught by a library's broad except is lost; the limit then
    repeats every RETRY_S, so the block still ends with TimeLimit, and leaving it disarms the repeat."""
    from extrap.timeout import RETRY_S

    swallowed, start = 0, time.monotonic()
    with pytest.raises(TimeLimit):
        with time_limit(0.05):
            try:
                _spin(2)
            except TimeLimit:  # as a library's `except Exception: pass` would
                swallowed += 1
            _spin(2)
    assert swallowed == 1 and time.monotonic() - start < 0.05 + 4 * RETRY_S + 0.5
    _spin(3 * RETRY_S)  # no repeat after the block: a stray alarm would raise here
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
