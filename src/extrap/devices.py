"""Choosing the torch device a command runs on."""

from __future__ import annotations

import torch

from extrap.errors import ExtrapError


def resolve_device(name: str | None) -> torch.device:
    """``auto`` (or None): cuda when available, else cpu; otherwise the named device, checked."""
    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ExtrapError(f"unknown device {name!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ExtrapError("device cuda requested but no CUDA device is available")
    return dev


def sampling_device(generator: torch.Generator | None, device=None) -> torch.device:
    """Where sampled positions live: ``device`` if given, else the generator's device, else cpu."""
    if device is not None:
        return torch.device(device)
    return generator.device if generator is not None else torch.device("cpu")
