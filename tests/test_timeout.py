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
