"""Token streams for a corpus split, and deterministic training batches drawn from them.

A split is encoded once into a flat array of token ids and cached as ``.npy``;
training draws random contiguous windows from it.  The sampler is
counter-based: batch ``k`` depends only on ``(seed, k)``, so its whole state is
one integer and resuming from a checkpoint reproduces the exact batches an
uninterrupted run would have seen.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from extrap.data.cache import cache_root
from extrap.data.corpora import SPLITS, Corpus
from extrap.data.tokenizers import Tokenizer
from extrap.errors import ExtrapError
from extrap.io import atomic_write_bytes


def _stream_path(root: Path, corpus: Corpus, tokenizer: Tokenizer, split: str) -> Path:
    tag = tokenizer.name.replace(":", "")
    return root / "streams" / f"{corpus.hash[:16]}-{tag}-{tokenizer.fingerprint}-{split}.npy"


def _storage_dtype(vocab_size: int) -> type:
    if vocab_size <= 1 << 8:
        return np.uint8
    return np.uint16 if vocab_size <= 1 << 16 else np.int32


def segment_starts(stream_len: int, need: int, n: int) -> list[int]:
    """``n`` start offsets spread evenly over the stream, each leaving ``need`` tokens after it.

    Deterministic: the same stream, length and count always give the same segments.
    """
    if n < 1:
        raise ExtrapError(f"the number of segments must be >= 1, got {n}")
    if stream_len < need:
        raise ExtrapError(f"the token stream has {stream_len:,} tokens, fewer than the {need:,} a segment needs")
    room = stream_len - need
    return [0] if n == 1 else [round(k * room / (n - 1)) for k in range(n)]


def segments(stream: torch.Tensor, length: int, n: int) -> torch.Tensor:
    """(n, length) int64 windows of a 1-D stream at :func:`segment_starts`."""
    stream = torch.as_tensor(stream).reshape(-1)
    return torch.stack([stream[s : s + length] for s in segment_starts(stream.numel(), length, n)]).long()


def token_stream(
    corpus: Corpus, tokenizer: Tokenizer, split: str, cache_dir: str | os.PathLike | None = None
) -> torch.Tensor:
    """The token ids of one split as a 1-D int32 tensor (cached on disk).

    Stored in the smallest unsigned type that holds the vocabulary, keyed by
    corpus hash, tokenizer spec and a hash of the tokenizer's full definition.
    """
    if split not in SPLITS:
        raise ExtrapError(f"unknown split {split!r}; use one of: {', '.join(SPLITS)}")
    path = _stream_path(cache_root(cache_dir), corpus, tokenizer, split)
    ids = None
    if path.is_file():
        try:
            ids = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            ids = None  # damaged: re-encode
    if ids is None:
        ids = tokenizer.encode_array(corpus.splits[split])
        ids = ids.astype(_storage_dtype(tokenizer.vocab_size), copy=False)
        buf = io.BytesIO()
        np.save(buf, ids, allow_pickle=False)
        try:
            atomic_write_bytes(path, buf.getvalue())
        except OSError:
            pass
    return torch.from_numpy(ids.astype(np.int32))


HELDOUT = ("validation", "test")  # the "heldout" evaluation stream: these splits, joined in this order


def eval_stream(
    corpus: Corpus,
    tokenizer: Tokenizer,
    split: str,
    min_tokens: int,
    cache_dir: str | os.PathLike | None = None,
) -> torch.Tensor:
    """:func:`token_stream`, refusing splits too short to evaluate ``min_tokens`` tokens.

    ``heldout`` is the validation split followed by the test split (never trained on): the
    longest evaluation stream a corpus has (the stdlib's is over 1.1M byte tokens).
    """
    if split == "heldout":
        stream = torch.cat([token_stream(corpus, tokenizer, s, cache_dir) for s in HELDOUT])
    else:
        stream = token_stream(corpus, tokenizer, split, cache_dir)
    if stream.numel() < min_tokens:
        hint = "use a shorter evaluation length or a larger corpus"
        if split != "heldout":
            joined = sum(token_stream(corpus, tokenizer, s, cache_dir).numel() for s in HELDOUT)
            if joined >= min_tokens:
                hint = f"use the split heldout (validation + test: {joined:,} tokens)"
        raise ExtrapError(
            f"corpus {corpus.name!r} split {split!r} has {stream.numel():,} {tokenizer.name} tokens, "
            f"fewer than the {min_tokens:,} needed; {hint}"
        )
    return stream


def _mix_seed(*parts: int) -> int:
    """A 63-bit generator seed from integers; nearby inputs give unrelated seeds."""
    blob = b"".join(int(p).to_bytes(16, "little", signed=True) for p in parts)
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little") & ((1 << 63) - 1)


def sampler_state(sampler) -> dict[str, Any]:
    """The resume state every training sampler records: its next step, seed and batch shape."""
    keys = ("step", "seed", "batch_size", "length", "rank", "world_size")
    return {k: getattr(sampler, k) for k in keys}


def resume(sampler, state: dict[str, Any], keys: tuple[str, ...], what: str, same: str) -> None:
    """Move ``sampler`` to ``state``'s step and seed, refusing a state whose ``keys`` differ from the sampler's.

    A key missing on either side (an older checkpoint, a sampler without an LM stream) is not compared.
    """
    mine = sampler.state_dict()
    for key in keys:
        if key in state and key in mine and state[key] != mine[key]:
            raise ExtrapError(
                f"cannot resume the {what}: {key} was {state[key]} and is now {mine[key]}; resume with the same {same}"
            )
    sampler.seed = int(state.get("seed", sampler.seed))
    sampler.step = int(state["step"])


class BatchSampler:
    """Random contiguous windows ``(x, y)`` with ``y`` = ``x`` shifted by one token.

    Batch ``k`` is a slice of a *global* batch of ``batch_size * world_size``
    windows drawn from a generator seeded by ``(seed, k)``; rank ``r`` takes
    rows ``r*batch_size ... (r+1)*batch_size``.  Ranks therefore see disjoint
    draws, and the union over ranks equals what a single process with the
    global batch size would draw, so results do not depend on how a run is
    spread over devices.
    """

    def __init__(
        self, stream: torch.Tensor, batch_size: int, length: int, seed: int = 0, rank: int = 0, world_size: int = 1
    ) -> None:
        if batch_size < 1 or length < 1:
            raise ExtrapError(f"batch size and length must be positive (got {batch_size}, {length})")
        if not 0 <= rank < world_size:
            raise ExtrapError(f"rank {rank} is outside world size {world_size}")
        if stream.dim() != 1 or stream.numel() < length + 1:
            raise ExtrapError(
                f"training stream has {stream.numel():,} tokens, too few for windows of {length} (+1); "
                "use a shorter training length or a larger corpus"
            )
        self.stream = stream
        self.batch_size = batch_size
        self.length = length
        self.seed = int(seed)
        self.rank = rank
        self.world_size = world_size
        self.step = 0  # index of the next batch
        self._span = torch.arange(length + 1)

    def offsets(self, step: int) -> torch.Tensor:
        """Start positions of this rank's windows in batch ``step``."""
        gen = torch.Generator().manual_seed(_mix_seed(self.seed, step))
        high = self.stream.numel() - self.length  # start + length is the last target
        every = torch.randint(0, high, (self.batch_size * self.world_size,), generator=gen)
        return every[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        windows = self.stream[self.offsets(self.step)[:, None] + self._span].long()
        self.step += 1
        return windows[:, :-1], windows[:, 1:]

    __next__ = next

    def __iter__(self) -> BatchSampler:
        return self

    def state_dict(self) -> dict[str, Any]:
        return {**sampler_state(self), "stream_tokens": int(self.stream.numel())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at ``state['step']``; refuse a state from a different stream or batch shape."""
        keys = ("batch_size", "length", "world_size", "stream_tokens")
        resume(self, state, keys, "batch sampler", "corpus, tokenizer, batch size, length and world size")
