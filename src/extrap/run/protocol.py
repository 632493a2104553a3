"""The ``Run`` protocol: what every command and study needs of a trained model and its record.

Two implementations: :class:`extrap.run.trained.TrainedRun` (a run directory written by
``extrap train``) and :class:`extrap.hf.HFRun` (a local Hugging Face checkpoint, ``hf:PATH``).
:func:`extrap.run.load` is the only place that tells them apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch

from extrap.errors import ExtrapError
from extrap.results.evaluation import Provenance

EVAL_SPLITS = ("validation", "test", "heldout")  # heldout: validation then test (extrap.data.streams)


@runtime_checkable
class Run(Protocol):
    model: Any  # extrap.model.protocol.ExtrapLM
    tokenizer: Any  # extrap.data.Tokenizer
    path: Any  # a run directory, or the hf:PATH string
    step: int | None  # the checkpoint's training step (None: not trained by extrap)

    @property
    def pe(self) -> str: ...

    @property
    def train_length(self) -> int: ...

    @property
    def seed(self) -> int | None: ...

    @property
    def task(self) -> str | None: ...

    @property
    def corpus(self) -> str: ...

    @property
    def corpus_hash(self) -> str | None: ...

    def use_corpus(self, name: str) -> None:
        """Evaluate on corpus ``name`` (refused where the run must read its training corpus)."""

    def eval_corpus(self): ...

    def use_attention_backend(self, name: str) -> None: ...

    def checkpoint_bias(self) -> list[Mapping[str, torch.Tensor]] | None:
        """Each layer's bias values in float64, read from the checkpoint as ``extrap theory --checkpoint``
        reads them; None where the run has none to read (an hf: model, a scheme without bias)."""

    def provenance(self) -> Provenance:
        """What a result JSON records about this run: seed, corpus hash, version, command, source."""


def eval_stream(run: Run, split: str, min_tokens: int) -> torch.Tensor:
    """At least ``min_tokens`` token ids of the run's evaluation corpus split, in the run's tokenizer."""
    from extrap.data import eval_stream as stream_of

    if split not in EVAL_SPLITS:
        raise ExtrapError(f"split must be {' or '.join(EVAL_SPLITS)}, got {split!r}")
    return stream_of(run.eval_corpus(), run.tokenizer, split, min_tokens)
