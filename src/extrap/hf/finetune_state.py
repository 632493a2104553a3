"""What an hf: fine-tune keeps while it trains, so that it resumes as any run does after ``kill -9``.

::

    OUT/extrap_finetune.json     FineTuneRecord: the parent, the training settings and the new RoPE
    OUT/checkpoints/step-N/      weights (safetensors), optimizer, sampler and RNG state (RunDir's own writer)
    OUT/latest.json

The checkpoints are written by :meth:`extrap.run.RunDir.save_checkpoint`, the extrap trainer's crash-safe
writer, with its :class:`~extrap.run.records.TrainState`.  Once the fine-tune is finished, the HF files are
written (``config.json`` last) and these files removed: the folder is then an HF model, nothing else.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from extrap.config import TrainConfig
from extrap.errors import ExtrapError
from extrap.run import RunDir, differing
from extrap.run.records import Parent, TrainState

RECORD = "extrap_finetune"  # a result name of RunDir's: OUT/extrap_finetune.json
RECORD_FILE = f"{RECORD}.json"
PARENT_FILE = "extrap_parent.json"  # written with the HF files, before config.json: the lineage


@dataclass(frozen=True)
class FineTuneRecord:
    """The settings of an hf: fine-tune in progress; a resume must ask for exactly these."""

    parent: Parent
    train: TrainConfig
    rope: str | None = None
    factor: float | None = None
    base: float | None = None
    positions: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "parent": self.parent.to_json(), "train": asdict(self.train)}

    @classmethod
    def from_json(cls, d, where: str = RECORD_FILE) -> FineTuneRecord:
        try:
            return cls(
                Parent.from_json(d["parent"], f"{where} parent"),
                TrainConfig.from_dict(d["train"]),
                **{k: d.get(k) for k in ("rope", "factor", "base", "positions")},
            )
        except (KeyError, TypeError) as e:
            raise ExtrapError(f"{where} is incomplete ({e})") from None

    def refuse_changes(self, other: FineTuneRecord) -> None:
        """ExtrapError naming each setting of a resumption that differs from this record."""
        names = [k for k in ("rope", "factor", "base", "positions") if getattr(self, k) != getattr(other, k)]
        names += [f"train: {k}" for k in differing(self.train, other.train, TrainConfig.RESUMABLE)]
        if self.parent.weights_sha256 != other.parent.weights_sha256:
            names.append("the parent's weights (sha256)")
        if names:
            raise ExtrapError(f"resume: settings differ from the saved fine-tune ({', '.join(names)})")


def read_record(out: str | Path) -> FineTuneRecord | None:
    """The record of an hf: fine-tune in progress in ``out``; None when there is none."""
    return RunDir(out).read_result(RECORD, FineTuneRecord)


def write_record(out: Path, record: FineTuneRecord) -> None:
    RunDir(out).write_result(RECORD, record)


def is_finished(out: str | Path) -> bool:
    """The HF files are whole (config.json is written last)."""
    return (Path(out) / PARENT_FILE).is_file() and (Path(out) / "config.json").is_file()


def state_dict_to_save(model) -> dict[str, torch.Tensor]:
    """The HF model's tensors as safetensors stores them: a tied head once (transformers ties it again)."""
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    return state


def save(run: RunDir, step: int, model, opt, sampler, gen: torch.Generator) -> None:
    """A checkpoint of step ``step``: weights, optimizer, batch position and both RNG states."""
    state = TrainState(opt.state_dict(), sampler.state_dict(), torch.get_rng_state(), gen.get_state())
    run.save_checkpoint(step, state_dict_to_save(model), state)


def restore(run: RunDir, model, opt, sampler, gen: torch.Generator) -> int:
    """Load the latest checkpoint into the model, optimizer, sampler and RNGs; its step (0: none)."""
    ckpt = run.latest()
    if ckpt is None:
        return 0
    weights = run.read_weights(ckpt)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ExtrapError(f"{ckpt.weights} does not fit the fine-tuned model (missing {missing[:3]})")
    state = run.read_state(ckpt)
    opt.load_state_dict(state.optimizer)
    sampler.load_state_dict(state.sampler)
    torch.set_rng_state(state.torch_rng)
    gen.set_state(state.pos_rng)
    return ckpt.step


def remove_training_files(out: Path) -> None:
    """After the HF files are whole: the checkpoints, latest.json and the record go (the record last)."""
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    (out / "latest.json").unlink(missing_ok=True)
    (out / RECORD_FILE).unlink(missing_ok=True)


__all__ = [
    "PARENT_FILE",
    "RECORD_FILE",
    "FineTuneRecord",
    "is_finished",
    "read_record",
    "remove_training_files",
    "restore",
    "save",
    "state_dict_to_save",
    "write_record",
]
