"""Choosing the torch device a command runs on: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from extrap.errors import ExtrapError

DEVICE_NAMES = "auto, cpu, cuda or cuda:N"


def resolve_device(name: str | None) -> torch.device:
    """``auto`` (or None): cuda when available, else cpu; otherwise the named device, checked on this machine.

    Only cpu and cuda are accepted (the rest of extrap is written and tested for those two); ``cuda:N``
    must name one of the GPUs torch sees.
    """
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ExtrapError(f"unknown device {name!r} (use {DEVICE_NAMES})") from None
    if dev.type not in ("cpu", "cuda"):
        raise ExtrapError(f"unsupported device {name!r} (use {DEVICE_NAMES})")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ExtrapError(f"device {name} requested but no CUDA device is available (use cpu or auto)")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            have = f"{count} CUDA device(s): cuda:0..{count - 1}"
            raise ExtrapError(f"device {name} requested but this machine has {have}")
    return dev


def sampling_device(generator: torch.Generator | None, device=None) -> torch.device:
    """Where sampled positions live: ``device`` if given, else the generator's device, else cpu."""
    if device is not None:
        return torch.device(device)
    return generator.device if generator is not None else torch.device("cpu")


@contextmanager
def one_thread() -> Iterator[None]:
    """Small products: one thread; a thread pool's wake-ups cost more than the work on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
