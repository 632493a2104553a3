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


def evaluation_bytes(
    rows: int,
    length: int,
    d_model: int,
    n_layer: int,
    vocab: int,
    window: int | None,
    chunk: int,
    act_bytes: int,
    head_chunk: int | None = None,
) -> int:
    """A lower bound on evaluating ``rows`` sequences of ``length`` tokens: per held position, about 8 vectors
    of width d (the residual stream, q, k, v, the attention output, the MLP's 4 d) in the activations' dtype
    (``act_bytes``: 2 for bf16 or fp16, 4 for float32) and, unstreamed, the float32 logits (V per position)
    of every scored position, or of ``head_chunk`` positions per row where the model runs its head over
    chunks of positions (:mod:`extrap.model.scoring`); plus the int64 token ids and targets (16 B per
    position).  A windowed length streams: it holds ``chunk`` queries and a rolling KV cache of W keys and
    values in each of the R layers (2 R W d), not L positions.  The model's weights are not counted: the
    estimate is compared with the memory still free once they are loaded (:func:`check_fits`)."""
    held = length if window is None else min(length, chunk + window)
    logits = 0 if window is not None else 4 * vocab * (held if head_chunk is None else min(held, head_chunk))
    cache = 0 if window is None else 2 * n_layer * min(length, window) * d_model * act_bytes
    return rows * (held * 8 * d_model * act_bytes + logits + cache + 16 * length)


ADAMW_BYTES_PER_PARAMETER = 16
"""fp32 training keeps, per parameter, its value, its gradient and AdamW's two moment estimates: 4 x 4 bytes."""


def parameter_count(build) -> int:
    """Parameters of the module ``build()`` makes, counted on torch's meta device: shapes only, no memory."""
    import torch

    with torch.device("meta"):
        module = build()
    return sum(p.numel() for p in module.parameters())


def check_parts(parts: dict[str, tuple[int, str]], what: str, device=None) -> None:
    """:func:`check_fits` of the sum of ``parts`` (name -> (bytes, what lowers it)), naming the largest."""
    name, (top, hint) = max(parts.items(), key=lambda kv: kv[1][0])
    need = sum(b for b, _ in parts.values())
    check_fits(need, f"{what} (of which {name}: {top / GB:.3g} GB)", hint, device)


def device_bytes(device) -> int | None:
    """Memory free on ``device``: a CUDA device's free memory, else what the system can still give."""
    if device is not None and str(device).startswith("cuda"):
        import torch

        return torch.cuda.mem_get_info(torch.device(device))[0]
    return available_bytes()


def check_fits(need: int, what: str, hint: str = "", device=None) -> None:
    """Refuse ``what`` when even its lower-bound estimate ``need`` exceeds the memory available now
    (on ``device``: a CUDA device's free memory; else the system's)."""
    have = device_bytes(device)
    if have is not None and need > have:
        raise ExtrapError(
            f"{what} needs at least {need / GB:.1f} GB of memory; {have / GB:.1f} GB is available"
            + (f"; {hint}" if hint else "")
        )


def check_head_dim(
    head_dim: int | None, bytes_per_pair: int, what: str, hint: str = "give a smaller --head-dim (models use 64 to 256)"
) -> None:
    """Refuse a RoPE head dimension whose ``head_dim / 2`` pairs need more memory than is available."""
    if head_dim is not None:
        need = head_dim // 2 * bytes_per_pair
        check_fits(need, f"{what} at head dimension {head_dim:,} ({bytes_per_pair:,} bytes per rotary pair)", hint)
