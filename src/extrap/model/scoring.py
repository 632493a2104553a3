"""Per-token losses from a model's final hidden states, its head run over chunks of positions.

At 128k tokens the logits of every position of a Llama-3.1-8B-shaped model (V = 128,256) are
128k x 128,256 values: 33.6 GB in bf16, 67 GB as the float32 that the cross-entropy reads.  A model
that can give its final hidden states (B, L, d) runs its body once and :func:`chunked_nll` runs the
head, log-softmax and NLL over chunks of positions, so no (L, V) tensor exists: at most
:func:`chunk_size` positions' logits (:data:`LOGITS_BUDGET` elements) are held at a time.  Each
position's logits depend on its own hidden state only (a final norm and a linear head act per
position), so the chunked losses are the whole pass's, to the rounding of a matmul on fewer rows.

Shapes: hidden (B, S, d); targets (B, S) token ids; losses (B, S) float32.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

CHUNK = 1024  # positions per step, at most
LOGITS_BUDGET = 2**24  # logits (B, chunk, V) per step, at most, in elements (64 MiB in fp32)
MIN_CHUNK = 16


def chunk_size(rows: int, vocab: int, chunk: int | None = None) -> int:
    """Positions per step: ``chunk`` when given, else the largest that keeps the logits within budget."""
    if chunk is not None:
        return max(1, int(chunk))
    return max(MIN_CHUNK, min(CHUNK, LOGITS_BUDGET // max(1, rows * vocab)))


def logits_nll(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """-log p(y): logits (B, S, V), y (B, S) -> (B, S) in float32."""
    B, S, V = logits.shape
    return F.cross_entropy(logits.reshape(-1, V).float(), y.reshape(-1), reduction="none").view(B, S)


def chunked_nll(
    hidden: torch.Tensor, targets: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor], vocab: int
) -> torch.Tensor:
    """-log p(targets) (B, S) float32 from the final hidden states (B, S, d): ``head`` maps a chunk of them
    to its logits (B, c, V); chunks of :func:`chunk_size` (B, vocab) positions, one at a time."""
    B, S = targets.shape
    step = chunk_size(B, vocab)
    out = [logits_nll(head(hidden[:, s : s + step]), targets[:, s : s + step]) for s in range(0, S, step)]
    return torch.cat(out, dim=1) if out else hidden.new_zeros((B, 0), dtype=torch.float32)


__all__ = ["CHUNK", "LOGITS_BUDGET", "MIN_CHUNK", "chunk_size", "chunked_nll", "logits_nll"]
