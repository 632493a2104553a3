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

import io
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from safetensors.torch import load_file, save

from extrap.errors import ExtrapError
from extrap.io import append_line, atomic_write_bytes, atomic_write_json, atomic_write_text, replace_folder
from extrap.run.config import RunConfig
from extrap.run.lock import LOCK_FILE
from extrap.run.records import MetricsRecord, TrainingSummary, TrainState

log = logging.getLogger(__name__)

TEMPORARY = re.compile(r"\..+\.tmp")  # what extrap.io.atomic_write_bytes writes before its rename
CHECKPOINT_ENTRY = re.compile(r"step-\d{7}(\.tmp-\d+)?")  # what save_checkpoint writes under checkpoints/
STATE_KEYS = ("optimizer", "sampler", "torch_rng", "pos_rng", "step")  # what a resume needs from state.pt


def refuse_run_folder(path: str | os.PathLike, what: str) -> None:
    """Refuse to write ``what`` (a study) into ``path`` when it, or a folder above it, is a run directory.

    ``path`` itself is a run's folder when it holds a ``config.json`` (:meth:`RunDir.exists`); a folder
    above it when it also holds what training writes (``latest.json``, ``metrics.jsonl`` or
    ``checkpoints/``), so that an unrelated ``config.json`` higher up refuses nothing.  Links are resolved.
    """
    target = Path(os.path.realpath(os.fspath(path)))
    for folder in (target, *target.parents):
        run = RunDir(folder)
        trained = any((folder / name).exists() for name in ("latest.json", "metrics.jsonl", "checkpoints"))
        if run.exists() and (folder == target or trained):
            where = "is the run directory" if folder == target else f"is inside the run directory {folder}"
            raise ExtrapError(f"{path} {where}: {what} would write among the run's own files; choose another folder")


class JsonRecord(Protocol):
    """A typed record that writes itself as JSON (every result extrap records about a run)."""

    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R")


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

    def check_new_run(self) -> None:
        """Refuse to start a run where something else lives: a file, or a folder with foreign entries."""
        if self.path.exists() and not self.path.is_dir():
            raise ExtrapError(f"{self.path} is a file, not a run directory")
        if self.exists():
            return
        entries = self.path.iterdir() if self.path.is_dir() else []
        foreign = sorted(p.name for p in entries if p.name != LOCK_FILE and not TEMPORARY.fullmatch(p.name))
        if foreign:
            raise ExtrapError(
                f"{self.path} is not empty and holds no extrap run ({', '.join(foreign[:3])}...); "
                "choose an empty or new directory"
            )

    def remove_temporaries(self) -> None:
        """Drop the temporary files of writes that a killed process left half done (the caller holds the lock)."""
        for p in [*self.path.glob(".*.tmp"), *self.path.glob("checkpoints/step-*.tmp-*")]:
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)

    def read_config(self) -> RunConfig:
        return RunConfig.from_json(self.read_raw_config(), str(self.config_path))

    def read_raw_config(self) -> Mapping[str, Any]:
        """config.json as written, unchecked: for readers of foreign layouts (a checkpoint's bias parameters)."""
        if not self.config_path.exists():
            raise ExtrapError(f"{self.path} is not a run directory (no config.json)")
        try:
            return json.loads(self.config_path.read_text())
        except (ValueError, RecursionError):  # RecursionError: nested past the decoder's stack
            raise ExtrapError(f"{self.config_path} is corrupt (not JSON, or nested too deeply to read)") from None

    def write_config(self, config: RunConfig) -> None:
        atomic_write_json(self.config_path, config.to_json())

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
            step, name = int(info["step"]), str(info["checkpoint"])
        except (ValueError, KeyError, TypeError):
            raise ExtrapError(f"{path} is corrupt; delete the run directory and train again") from None
        if name != self.checkpoint_name(step):  # never follow a pointer out of checkpoints/
            raise ExtrapError(f"{path} points at {name!r}, not at this run's checkpoint of step {step}")
        return Checkpoint(step, self.path / name)

    def checkpoint(self, step: int | None = None) -> Checkpoint:
        """The checkpoint of ``step`` (None: the latest); ExtrapError naming the kept steps when there is none."""
        latest = self.latest()
        if step is None and latest is not None:
            return latest
        ckpt = Checkpoint(int(step or 0), self.path / self.checkpoint_name(int(step or 0)))
        if step is None or not ckpt.weights.is_file():
            kept = sorted(int(p.name[5:]) for p in self.path.glob("checkpoints/step-*") if p.name[5:].isdigit())
            held = f"it keeps step {', '.join(map(str, kept))}" if kept else "it has no checkpoint"
            raise ExtrapError(f"{self.path} has no checkpoint" + (f" of step {step}" if step else "") + f" ({held})")
        return ckpt

    def save_checkpoint(self, step: int, weights: dict[str, torch.Tensor], state: TrainState) -> Checkpoint:
        """Weights (safetensors) and the training state (tensors and numbers only), then latest.json.

        Everything is serialised in memory first and written with plain file writes, so a full disk
        is reported as such (:class:`DiskFullError`) and the previous checkpoint stays the latest.
        """
        final = self.path / self.checkpoint_name(step)
        tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        buf = io.BytesIO()
        torch.save({**state.state_dict(), "step": step}, buf)
        try:
            atomic_write_bytes(tmp / "model.safetensors", save(weights, metadata={"step": str(step)}))
            atomic_write_bytes(tmp / "state.pt", buf.getvalue())
            atomic_write_json(tmp / "meta.json", {"step": step})
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if final.exists():
            shutil.rmtree(final)
        replace_folder(tmp, final)
        atomic_write_json(self.path / "latest.json", {"step": step, "checkpoint": self.checkpoint_name(step)})
        for old in (self.path / "checkpoints").iterdir():  # only checkpoints extrap wrote; nothing else
            if old.name != final.name and CHECKPOINT_ENTRY.fullmatch(old.name):
                shutil.rmtree(old, ignore_errors=True)
        return Checkpoint(step, final)

    def read_weights(self, ckpt: Checkpoint) -> dict[str, torch.Tensor]:
        try:
            return load_file(str(ckpt.weights))
        except Exception as e:  # safetensors raises its own error types for truncated files
            raise ExtrapError(f"cannot read {ckpt.weights}: {str(e).splitlines()[0]}") from None

    def read_state(self, ckpt: Checkpoint) -> TrainState:
        """The training state of a checkpoint, loaded without unpickling objects (``weights_only``)."""
        try:
            state = torch.load(ckpt.state, weights_only=True, map_location="cpu")
        except Exception as e:  # torch's own message would suggest weights_only=False: never for this file
            raise ExtrapError(f"cannot read {ckpt.state}: not a training state ({type(e).__name__})") from None
        missing = [k for k in STATE_KEYS if not isinstance(state, dict) or k not in state]
        if missing:
            raise ExtrapError(f"{ckpt.state} is incomplete (no {', '.join(missing)}); the checkpoint cannot resume")
        return TrainState.from_state(state)

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

    def append_metrics(self, record: MetricsRecord) -> None:
        append_line(self.metrics_path, json.dumps(record.to_json()))

    def read_metrics(self) -> list[MetricsRecord]:
        """Every logged record; a torn last line (an append cut short by a kill or a full disk) is dropped."""
        if not self.metrics_path.exists():
            return []
        lines = [ln for ln in self.metrics_path.read_text(errors="replace").splitlines() if ln.strip()]
        records = []
        for k, ln in enumerate(lines):
            try:
                line = json.loads(ln)
            except ValueError:
                if k < len(lines) - 1:
                    raise ExtrapError(f"{self.metrics_path} is corrupt at line {k + 1}") from None
                log.warning("%s: dropped a partial last line", self.metrics_path)
                continue
            records.append(MetricsRecord.from_json(line, str(self.metrics_path)))
        return records

    def truncate_metrics(self, step: int) -> None:
        """On resume, drop metric lines logged after the checkpoint so nothing is counted twice."""
        if self.metrics_path.exists():
            keep = [r for r in self.read_metrics() if r.step <= step]
            atomic_write_text(self.metrics_path, "".join(json.dumps(r.to_json()) + "\n" for r in keep))

    def is_finished(self) -> bool:
        return (self.path / "final.json").exists()

    def clear_final(self) -> None:
        """The run is no longer finished (it is being trained further)."""
        (self.path / "final.json").unlink(missing_ok=True)

    def write_final(self, summary: TrainingSummary) -> None:
        atomic_write_json(self.path / "final.json", summary.to_json())

    def read_final(self) -> TrainingSummary | None:
        path = self.path / "final.json"
        return _read_record(path, lambda data: TrainingSummary.from_json(data, str(path)))

    # ---- results recorded about the run -------------------------------------------------
    RESERVED = frozenset({"config", "latest", "final", "meta"})

    def result_path(self, name: str) -> Path:
        if name in self.RESERVED or not name.replace("-", "").replace("_", "").isalnum():
            raise ExtrapError(f"{name!r} is not a valid result name")
        return self.path / f"{name}.json"

    def has_result(self, name: str) -> bool:
        return self.result_path(name).exists()

    def write_result(self, name: str, record: JsonRecord) -> None:
        """Record a result (atomically): a later call finds it and need not compute it again."""
        atomic_write_json(self.result_path(name), record.to_json())

    def read_result(self, name: str, kind: type[R]) -> R | None:
        """The result recorded as ``name``, read by ``kind.from_json``; None when there is none."""
        return _read_record(self.result_path(name), kind.from_json)


def _read_record(path: Path, read: Callable[[Any], R]) -> R | None:
    """``read`` of the JSON in ``path``; None when there is no such file; ExtrapError when it is not JSON."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        raise ExtrapError(f"{path} is corrupt (not JSON)") from None
    return read(data)
