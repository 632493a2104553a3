"""The study's inference timing (000 Table 1, issue 28 item 7): each method and window runs once untimed
before the timed runs, so warm-up is not part of the result."""

from __future__ import annotations

from extrap.experiments.extrapolation import measure


class FakeClock:
    """perf_counter that advances only when the timed method runs, recording what happened in order."""

    def __init__(self, costs: list[float]):
        self.now, self.costs, self.events = 0.0, list(costs), []

    def perf_counter(self) -> float:
        self.events.append("clock")
        return self.now

    def method(self, W: int) -> None:
        self.events.append(f"run W={W}")
        self.now += self.costs.pop(0)


def test_the_first_run_is_untimed_and_excluded(monkeypatch):
    # a warm-up that slows the first runs: the fastest of the first three would still hold some of it
    # (costs exact in binary, so that the clock's differences are exact)
    clock = FakeClock([8.0, 2.0, 1.0, 0.5, 0.75])
    monkeypatch.setattr(measure.time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(measure, "TIMING_REPEATS", 3)
    assert measure.fastest_time(clock.method, 16) == 0.5
    timed = ["clock", "run W=16", "clock"]
    assert clock.events == ["run W=16", *timed * 3]  # the warm-up run, with no clock read around it
    assert clock.costs == [0.75]  # exactly 1 + TIMING_REPEATS runs


def test_the_result_is_the_fastest_timed_run(monkeypatch):
    clock = FakeClock([100.0, 3.0, 1.0, 2.0])
    monkeypatch.setattr(measure.time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(measure, "TIMING_REPEATS", 3)
    assert measure.fastest_time(clock.method, 32) == 1.0
