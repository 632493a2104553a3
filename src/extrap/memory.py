"""Refusing work that cannot fit in memory before it starts, with the estimate in the message."""

from __future__ import annotations

import os

from extrap.errors import ExtrapError

GB = 1 << 30


def available_bytes() -> int | None:
    """Memory the system can still give (``MemAvailable``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def training_step_bytes(batch: int, length: int, vocab: int, d_model: int, n_layer: int) -> int:
    """A lower bound on one fp32 training micro-batch: logits with their softmax and gradient (3 B L V), and
    about 12 activations of width d kept per layer for the backward pass (12 B L d R)."""
    return 4 * batch * length * (3 * vocab + 12 * d_model * n_layer)


def check_fits(need: int, what: str, hint: str = "") -> None:
    """Refuse ``what`` when even its lower-bound estimate ``need`` exceeds the memory available now."""
    have = available_bytes()
    if have is not None and need > have:
        raise ExtrapError(
            f"{what} needs at least {need / GB:.1f} GB of memory; {have / GB:.1f} GB is available"
            + (f"; {hint}" if hint else "")
        )
