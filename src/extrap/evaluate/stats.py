"""How precise a mean loss is: standard errors that respect the correlation of neighbouring tokens.

The losses of neighbouring tokens in one text are correlated, so the naive std / sqrt(n) is too
small.  Tokens are kept in stream order and cut into K contiguous blocks; the standard error of
the mean is that of the K block means (the method of batch means).  Targets that lie far apart
(the last-token protocol) are independent: every target is its own block.
"""

from __future__ import annotations

import math

import torch

BLOCK_TOKENS = 1024  # contiguous tokens per block of the batch-means estimate
MIN_BLOCKS = 8  # fewer blocks than this: no standard error (too few to estimate a spread)


def block_means(nll: torch.Tensor, block: int) -> torch.Tensor:
    """Means of consecutive blocks of ``block`` values of ``nll`` (N,), dropping an incomplete last block."""
    k = nll.numel() // block
    return nll[: k * block].double().view(k, block).mean(dim=1)


def _blocks(n: int, independent: bool) -> int:
    """Block length: 1 for independent values, else BLOCK_TOKENS, shortened so that MIN_BLOCKS fit."""
    if independent:
        return 1
    return max(1, min(BLOCK_TOKENS, n // MIN_BLOCKS))


def stderr(nll: torch.Tensor, independent: bool = False) -> float | None:
    """Standard error of the mean of ``nll`` (N,) in stream order; None when fewer than MIN_BLOCKS blocks."""
    n = nll.numel()
    means = block_means(nll, _blocks(n, independent))
    if means.numel() < MIN_BLOCKS:
        return None
    return float(means.std(unbiased=True)) / math.sqrt(means.numel())


def paired_stderr(a: torch.Tensor, b: torch.Tensor, independent: bool = False) -> float | None:
    """Standard error of mean(a) - mean(b) for losses of the same tokens (paired): that of a - b."""
    if a.numel() != b.numel():
        return None
    return stderr(a.double() - b.double(), independent)
