"""What every part of bench/gpu.py shares: device synchronisation, peak memory, one-line failures."""

from __future__ import annotations


def sync(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def peak_gb(dev) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated(dev) / 2**30, 3) if dev.type == "cuda" else None


def reset_peak(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)


def failure(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def median(xs) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]
