"""The on-disk format of a run directory, owned here and nowhere else.

::

    RUN_DIR/config.json            RunConfig: model, train, tokenizer, corpus hash, seed, version, command
    RUN_DIR/tokenizer.json
    RUN_DIR/metrics.jsonl          one JSON object per logged step
    RUN_DIR/checkpoints/step-NNNNNNN/{model.safetensors, state.pt, meta.json}
    RUN_DIR/latest.json            {"step": N, "checkpoint": "checkpoints/step-NNNNNNN"}
    RUN_DIR/final.json             written once training has finished
    RUN_DIR/<name>.json            results recorded about the run (eval-<protocol>, erf, ...)

A checkpoint folder is written under a temporary name and renamed, then ``latest.json`` is
replaced atomically, so a crash at any moment leaves a complete previous checkpoint.
``state.pt`` holds only tensors and numbers and is read with ``torch.load(weights_only=True)``:
no pickle of arbitrary objects.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from extrap.errors import ExtrapError
from extrap.io import atomic_write_json
from extrap.run.config import RunConfig


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path  # the checkpoint folder

    @property
    def weights(self) -> Path:
        return self.path / "model.safetensors"

    @property
    def state(self) -> Path:
        return self.path / "state.pt"


class RunDir:
    """One run directory: reads and writes every file of the layout above."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # ---- config ------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.path / "config.json"

    def exists(self) -> bool:
        """A run has been started here (its config is written)."""
        return self.config_path.exists()

    def read_config(self) -> RunConfig:
        return RunConfig.from_dict(self.read_config_dict(), str(self.config_path))

    def read_config_dict(self) -> dict:
        """config.json as written (for loose readers that accept foreign layouts)."""
        if not self.config_path.exists():
            raise ExtrapError(f"{self.path} is not a run directory (no config.json)")
        try:
            return json.loads(self.config_path.read_text())
        except ValueError:
            raise ExtrapError(f"{self.config_path} is corrupt (not JSON)") from None

    def write_config(self, config: RunConfig) -> None:
        atomic_write_json(self.config_path, config.to_dict())

    # ---- checkpoints ---------------------------------------------------------------
    @staticmethod
    def checkpoint_name(step: int) -> str:
        return f"checkpoints/step-{step:07d}"

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint, or None before the first one."""
        path = self.path / "latest.json"
        if not path.exists():
            return None
        try:
            info = json.loads(path.read_text())
            return Checkpoint(int(info["step"]), self.path / info["checkpoint"])
        except (ValueError, KeyError, TypeError):
            raise ExtrapError(f"{path} is corrupt; delete the run directory and train again") from None

    def save_checkpoint(self, step: int, weights: dict[str, torch.Tensor], state: dict) -> Checkpoint:
        """Weights (safetensors) and the training state (tensors and numbers only), then latest.json."""
        final = self.path / self.checkpoint_name(step)
        tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_file(weights, tmp / "model.safetensors", metadata={"step": str(step)})
        torch.save({**state, "step": step}, tmp / "state.pt")
        atomic_write_json(tmp / "meta.json", {"step": step})
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        atomic_write_json(self.path / "latest.json", {"step": step, "checkpoint": self.checkpoint_name(step)})
        for old in (self.path / "checkpoints").iterdir():  # keep only the newest complete checkpoint
            if old.name != final.name:
                shutil.rmtree(old, ignore_errors=True)
        return Checkpoint(step, final)

    def read_weights(self, ckpt: Checkpoint) -> dict[str, torch.Tensor]:
        try:
            return load_file(str(ckpt.weights))
        except Exception as e:  # safetensors raises its own error types for truncated files
            raise ExtrapError(f"cannot read {ckpt.weights}: {e}") from None

    def read_state(self, ckpt: Checkpoint) -> dict:
        try:
            return torch.load(ckpt.state, weights_only=True, map_location="cpu")
        except Exception as e:  # a truncated or foreign file
            raise ExtrapError(f"cannot read {ckpt.state}: {e}") from None

    def weight_files(self) -> list[Path]:
        """The latest checkpoint's weights, else any top-level ``*.safetensors`` (a foreign export)."""
        ckpt = self.latest()
        if ckpt is not None and ckpt.weights.is_file():
            return [ckpt.weights]
        files = sorted(self.path.glob("*.safetensors"))
        if not files:
            raise ExtrapError(f"{self.path}: no checkpoint (latest.json) and no *.safetensors file")
        return files

    # ---- metrics and the final summary ------------------------------------------------
    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    def append_metrics(self, record: dict) -> None:
        with open(self.metrics_path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def read_metrics(self) -> list[dict]:
        if not self.metrics_path.exists():
            return []
        return [json.loads(ln) for ln in self.metrics_path.read_text().splitlines() if ln.strip()]

    def truncate_metrics(self, step: int) -> None:
        """On resume, drop metric lines logged after the checkpoint so nothing is counted twice."""
        if self.metrics_path.exists():
            keep = [r for r in self.read_metrics() if r.get("step", 0) <= step]
            self.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in keep))

    def is_finished(self) -> bool:
        return (self.path / "final.json").exists()

    def write_final(self, summary: dict) -> None:
        atomic_write_json(self.path / "final.json", summary)

    def read_final(self) -> dict | None:
        path = self.path / "final.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            raise ExtrapError(f"{path} is corrupt (not JSON)") from None

    # ---- results recorded about the run -------------------------------------------------
    RESERVED = frozenset({"config", "latest", "final", "meta"})

    def result_path(self, name: str) -> Path:
        if name in self.RESERVED or not name.replace("-", "").replace("_", "").isalnum():
            raise ExtrapError(f"{name!r} is not a valid result name")
        return self.path / f"{name}.json"

    def has_result(self, name: str) -> bool:
        return self.result_path(name).exists()

    def write_result(self, name: str, obj: dict) -> None:
        """Record a result (atomically): a later call finds it and need not compute it again."""
        atomic_write_json(self.result_path(name), obj)

    def read_result(self, name: str) -> dict | None:
        path = self.result_path(name)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError:
            raise ExtrapError(f"{path} is corrupt (not JSON)") from None
