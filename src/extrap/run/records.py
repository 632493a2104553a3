"""The typed records of a run directory's own files: the final summary, metrics lines, training state.

Each record reads and writes exactly the JSON (or ``state.pt`` mapping) that earlier versions of
extrap wrote, through one ``to_json()`` and one ``from_json()``; :class:`~extrap.run.directory.RunDir`
is the only code that touches the files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from extrap.errors import ExtrapError

if TYPE_CHECKING:
    import torch


def _number(d: Mapping[str, Any], key: str, where: str, kind=float, default=None):
    """``d[key]`` as ``kind``; a missing key gives ``default`` (None: the file is refused in one line)."""
    if key not in d:
        if default is None:
            raise ExtrapError(f"{where}: no {key!r}")
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and v != int(v)):
        raise ExtrapError(f"{where}: {key!r} must be a number, got {v!r}")
    return kind(v)


def _optional(d: Mapping[str, Any], key: str, where: str) -> float | None:
    """``d[key]`` as a float, or None where it is missing or null (a record written before the key existed)."""
    return None if d.get(key) is None else _number(d, key, where, float)


@dataclass(frozen=True)
class TrainingSummary:
    """``final.json``: where training ended (``step``), its last logged loss and what it cost.

    ``tokens`` counts every token trained on, across resumptions; ``seconds`` only this process's.
    """

    step: int
    final_loss: float
    seconds: float
    tokens: int
    params: int
    extrap_version: str
    tokens_per_s: float | None = None  # this process's tokens / seconds
    mfu: float | None = None  # extrap.throughput.mfu (None: a CPU or an unknown card)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # every field, in order

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "final.json") -> TrainingSummary:
        if not isinstance(d, Mapping):
            raise ExtrapError(f"{where}: not a JSON object")
        return cls(
            step=_number(d, "step", where, int),
            final_loss=_number(d, "final_loss", where, float, math.nan),
            seconds=_number(d, "seconds", where, float, math.nan),
            tokens=_number(d, "tokens", where, int, 0),
            params=_number(d, "params", where, int, 0),
            extrap_version=str(d.get("extrap_version", "")),
            tokens_per_s=_optional(d, "tokens_per_s", where),
            mfu=_optional(d, "mfu", where),
        )


@dataclass(frozen=True)
class TrainReport:
    """What ``extrap train`` reports: the run it describes and its :class:`TrainingSummary`."""

    run: str
    pe: str
    train_length: int
    corpus: str
    seed: int
    corpus_hash: str | None
    summary: TrainingSummary

    def to_json(self) -> dict[str, Any]:
        head = {"run": self.run, "pe": self.pe, "train_length": self.train_length, "corpus": self.corpus}
        return {**head, "seed": self.seed, "corpus_hash": self.corpus_hash, **self.summary.to_json()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TrainReport:
        return cls(
            run=str(d["run"]),
            pe=str(d["pe"]),
            train_length=int(d["train_length"]),
            corpus=str(d["corpus"]),
            seed=int(d["seed"]),
            corpus_hash=d.get("corpus_hash"),
            summary=TrainingSummary.from_json(d, "train report"),
        )


@dataclass(frozen=True)
class MetricsRecord:
    """One line of ``metrics.jsonl``: the loss, learning rate and throughput logged at ``step``."""

    step: int
    loss: float
    lr: float
    tokens_per_s: float
    mfu: float | None = None  # extrap.throughput.mfu (None: a CPU or an unknown card)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "loss": self.loss, "lr": self.lr, "tokens_per_s": self.tokens_per_s, "mfu": self.mfu}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "metrics.jsonl") -> MetricsRecord:
        if not isinstance(d, Mapping):
            raise ExtrapError(f"{where}: a line is not a JSON object")
        return cls(
            step=_number(d, "step", where, int, 0),
            loss=_number(d, "loss", where, float, math.nan),
            lr=_number(d, "lr", where, float, math.nan),
            tokens_per_s=_number(d, "tokens_per_s", where, float, math.nan),
            mfu=_optional(d, "mfu", where),
        )


@dataclass(frozen=True)
class TrainState:
    """What a checkpoint's ``state.pt`` holds for a bit-exact resume (tensors and numbers only).

    ``optimizer`` and ``sampler`` are their objects' own state dicts; the two RNG states are byte
    tensors (torch's global generator, and the generator of training positions).
    """

    optimizer: Mapping[str, Any]
    sampler: Mapping[str, Any]
    torch_rng: torch.Tensor
    pos_rng: torch.Tensor

    KEYS = ("optimizer", "sampler", "torch_rng", "pos_rng")

    def state_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.KEYS}

    @classmethod
    def from_state(cls, d: Mapping[str, Any]) -> TrainState:
        return cls(**{k: d[k] for k in cls.KEYS})


@dataclass(frozen=True)
class Parent:
    """The run a fine-tune started from (``config.json``'s ``parent``; ``extrap train --init-from``).

    ``path``: the parent's run directory, or ``hf:DIR``; ``step``: its checkpoint (None for an hf: folder);
    ``weights_sha256``: sha256 of the weight file the fine-tune read (``model.safetensors``), so that a
    later reader can tell whether the parent still holds those weights; ``pe`` and ``train_length``: the
    encoding and the length the parent was trained with.
    """

    path: str
    step: int | None
    weights_sha256: str
    pe: str
    train_length: int

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # every field, in order

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "config.json parent") -> Parent:
        if not isinstance(d, Mapping) or not all(k in d for k in ("path", "weights_sha256", "pe")):
            raise ExtrapError(f"{where}: needs path, weights_sha256 and pe")
        step = None if d.get("step") is None else _number(d, "step", where, int)
        return cls(
            path=str(d["path"]),
            step=step,
            weights_sha256=str(d["weights_sha256"]),
            pe=str(d["pe"]),
            train_length=_number(d, "train_length", where, int),
        )
