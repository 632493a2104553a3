"""Progress of a long loop over steps: a bar on a terminal, a log line now and then otherwise.

When standard error is a terminal, a tqdm bar redraws in place.  When it is not (a pipe,
a file, a batch job's log), or is a terminal that reports a width of 0 columns (where the
bar would be drawn empty), a bar would either print nothing or fill the log with carriage
returns, so one ``logging`` record is written instead: after the first step, then at most
one every :data:`PROGRESS_SECONDS` seconds, and after the last step::

    train: step 120/600 (20%)  loss 3.4121  12,345 tok/s  ETA 2m10s

tok/s is the mean since the previous line; the ETA assumes the remaining steps take as long
as the steps this process has run so far.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable

PROGRESS_SECONDS = 30.0  # without a terminal: at most one progress line per this many seconds

log = logging.getLogger(__name__)


def duration(seconds: float) -> str:
    """A short duration: 45s, 3m20s, 2h05m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def bar_terminal() -> bool:
    """Whether stderr is a terminal a bar can be drawn on: a tty that reports its width."""
    if not sys.stderr.isatty():
        return False
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns > 0
    except (OSError, ValueError):  # no file descriptor, or not a terminal after all
        return False


class StepProgress:
    """Tells of each finished step (``update``); ``close`` when the loop ends.

    ``terminal`` (default: :func:`bar_terminal`) picks the bar or the log lines;
    ``clock`` is injectable so the throttle can be tested without sleeping.
    """

    def __init__(
        self,
        total: int,
        start: int,
        tokens_per_step: int,
        label: str = "train",
        every: float = PROGRESS_SECONDS,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.start, self.tokens_per_step = total, start, tokens_per_step
        self.label, self.every, self.clock = label, every, clock
        self.t0 = self.last_time = clock()
        self.last_step = start
        self.bar = None
        if bar_terminal() if terminal is None else terminal:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, file=sys.stderr, dynamic_ncols=True, leave=False)

    def update(self, step: int, loss: float) -> None:
        now = self.clock()
        if self.bar is not None:
            self.bar.update(step - self.bar.n)
            tok_s = self.tokens_per_step * (step - self.last_step) / max(1e-9, now - self.last_time)
            self.bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tok_s:,.0f}")
            self.last_step, self.last_time = step, now
            return
        if step == self.start + 1 or step >= self.total or now - self.last_time >= self.every:
            log.info(self.line(step, loss, now))
            self.last_step, self.last_time = step, now

    def line(self, step: int, loss: float, now: float) -> str:
        """One progress line: step, loss, tokens per second since the last line, time left."""
        tok_s = self.tokens_per_step * (step - self.last_step) / max(1e-9, now - self.last_time)
        per_step = (now - self.t0) / max(1, step - self.start)
        pct = 100 * step / max(1, self.total)
        return (
            f"{self.label}: step {step}/{self.total} ({pct:.0f}%)  loss {loss:.4f}  {tok_s:,.0f} tok/s  "
            f"ETA {duration(per_step * (self.total - step))}"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
