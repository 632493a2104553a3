"""Fine-tuning from a trained run (``extrap train --init-from RUN``): the parent, its checks and its weights.

A fine-tune is a new run whose weights start from another run's checkpoint instead of a random
initialisation.  It may change what does not change a parameter's shape: the training length, the
position sampler, the task, and the options of the parent's positional scheme (a RoPE base, a RoPE
scaling).  It keeps the scheme itself (rope stays rope), the shapes and the tokenizer.  Everything is
checked before anything is written; the child records the parent (:class:`~extrap.run.records.Parent`)
in its ``config.json``, and every later command reads the child with its own encoding.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from extrap.errors import ExtrapError
from extrap.run.config import RunConfig
from extrap.run.directory import RunDir
from extrap.run.records import Parent

if TYPE_CHECKING:
    import torch

# The model settings that fix a parameter's shape (or whether the head is its own tensor).
SHAPE_SETTINGS = ("vocab_size", "n_layer", "d_model", "n_head", "d_ff", "tie_embeddings")


@dataclass(frozen=True)
class InitFrom:
    """Where a fine-tune starts: a run directory (``source``) at its latest checkpoint, or at ``step``."""

    source: str
    step: int | None = None

    def __post_init__(self):
        if self.step is not None and self.step <= 0:
            raise ExtrapError(f"init step must be a positive checkpoint step, got {self.step}")


@dataclass
class ParentWeights:
    """A parent run read for a fine-tune: its record, its settings and the tensors of its checkpoint."""

    record: Parent
    config: RunConfig
    weights: dict[str, torch.Tensor]

    @property
    def path(self) -> Path:
        return Path(self.record.path)


def read_parent(init: InitFrom) -> ParentWeights:
    """The parent's config and checkpoint; the weights are hashed from the very bytes that are loaded."""
    from safetensors.torch import load

    source = str(init.source)
    if source.startswith("hf:"):
        raise ExtrapError(f"{source}: an hf: model is fine-tuned with extrap.hf.finetune, not as an extrap run")
    run_dir = _parent_dir(source)
    config = run_dir.read_config()
    ckpt = run_dir.checkpoint(init.step)
    data = ckpt.weights.read_bytes()
    try:
        weights = load(data)
    except Exception as e:  # safetensors raises its own error types for truncated files
        raise ExtrapError(f"cannot read {ckpt.weights}: {str(e).splitlines()[0]}") from None
    record = Parent(
        path=str(run_dir.path.resolve()),
        step=ckpt.step,
        weights_sha256=hashlib.sha256(data).hexdigest(),
        pe=config.pe,
        train_length=config.train_length,
    )
    return ParentWeights(record, config, weights)


def parent_config(source: str) -> RunConfig:
    """A parent run's settings: a fine-tune's model (its shapes, PE, ...) and tokenizer unless it names others."""
    return _parent_dir(source).read_config()


def rescaled_parent_pe(source: str, rope: str | None, factor: float | None) -> str:
    """The parent's rotary PE re-scaled by ``rope`` (``KIND[:key=value,...]``) and ``factor``, L = its L_tr:
    the scheme that ``extrap eval PARENT --rope KIND --factor F`` reads it with (:func:`rescaled_model_config`)."""
    from extrap.run.trained import rescaled_model_config

    run_dir = _parent_dir(source)
    model_cfg, _ = rescaled_model_config(run_dir.read_config(), run_dir.path, rope, factor)
    return model_cfg.pe


def _parent_dir(source: str) -> RunDir:
    run_dir = RunDir(source)
    if not run_dir.path.is_dir():
        what = "is a file, not a run directory" if run_dir.path.exists() else "does not exist"
        raise ExtrapError(f"parent run {run_dir.path} {what}")
    return run_dir


def reread_parent(record: Parent) -> ParentWeights:
    """The parent a fine-tune recorded, refused if its weights are no longer the ones it started from."""
    parent = read_parent(InitFrom(record.path, record.step))
    if parent.record.weights_sha256 != record.weights_sha256:
        raise ExtrapError(
            f"parent {record.path} step {record.step} holds other weights than when this fine-tune started "
            "(sha256 differs); start the fine-tune again"
        )
    return parent


def check_child(parent: ParentWeights, model_cfg, train_cfg) -> None:
    """Refuse, in one line, a fine-tune that cannot start from ``parent`` (before anything is written)."""
    from extrap import positional

    mine, theirs = positional.get(model_cfg.pe), positional.get(parent.record.pe)
    where = f"parent {parent.path} was trained with {parent.record.pe}"
    if mine.rotates and not theirs.rotates:
        raise ExtrapError(f"{where}, not a rotary PE: {model_cfg.pe} needs a rotary parent")
    if mine.name != theirs.name:
        raise ExtrapError(f"{where}: a fine-tune keeps the encoding family ({theirs.name}), not {model_cfg.pe}")
    if train_cfg.train_length < parent.record.train_length:
        raise ExtrapError(
            f"fine-tuning length {train_cfg.train_length} is shorter than the parent's training length "
            f"{parent.record.train_length}"
        )
    if train_cfg.tokenizer != parent.config.tokenizer:
        raise ExtrapError(f"tokenizer {train_cfg.tokenizer} is not the parent's ({parent.config.tokenizer})")
    saved = parent.config.model
    diff = [f"{k} {_setting(saved, k)} -> {_setting(model_cfg, k)}" for k in SHAPE_SETTINGS]
    diff = [d for d, k in zip(diff, SHAPE_SETTINGS) if _setting(saved, k) != _setting(model_cfg, k)]
    if diff:
        raise ExtrapError(f"the model's shape differs from parent {parent.path} ({', '.join(diff)})")


def _setting(cfg, key: str):
    if key == "d_ff":  # 0 means 4 * d_model
        return cfg.d_ff or 4 * cfg.d_model
    return getattr(cfg, key)


def start_from_parent(model, parent: ParentWeights) -> None:
    """Load the parent's tensors into a fresh model of the child's config: every name and shape must match."""
    from extrap.run.trained import apply_weights, model_weights

    mine = model_weights(model)
    for name in sorted(set(mine) | set(parent.weights)):
        a, b = parent.weights.get(name), mine.get(name)
        if a is None or b is None or a.shape != b.shape:
            raise ExtrapError(
                f"parent {parent.path} does not fit this model: {name} is {_shape(a)} there, {_shape(b)} here"
            )
    apply_weights(model, parent.weights, f"parent {parent.path}")


def _shape(t) -> str:
    return "none" if t is None else "x".join(map(str, t.shape))


__all__ = [
    "SHAPE_SETTINGS",
    "InitFrom",
    "ParentWeights",
    "check_child",
    "parent_config",
    "rescaled_parent_pe",
    "read_parent",
    "reread_parent",
    "start_from_parent",
]
