"""Training configuration and presets: the one place a run's settings are built.

A run's settings come from three layers, later ones winning: a preset (:data:`PRESETS`), a
YAML/JSON file with ``model`` and ``train`` sections, then explicit overrides (the CLI flags).
The model half is :class:`extrap.model.ModelConfig`; the training half is :class:`TrainConfig`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from extrap.errors import ExtrapError
from extrap.io import strict_dataclass
from extrap.model import ModelConfig


@dataclass
class TrainConfig:
    steps: int = 600
    batch_size: int = 16
    train_length: int = 128
    grad_accum: int = 1
    lr: float = 1e-3
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio
    warmup: int = 50
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    seed: int = 0
    corpus: str = "stdlib"
    tokenizer: str = "bytes"
    save_every: int = 200
    log_every: int = 10
    threads: int = 0  # 0: leave torch's default
    device: str = "auto"
    task: str | None = None  # passkey | line | topic: train on retrieval examples (extrap.tasks), loss on answers
    task_mix: float = 0.0  # with a task: fraction of batches that are plain LM batches instead (0 = task only)

    # Settings that may change between a run and its resumption: they do not change the result.
    RESUMABLE = ("device", "threads", "save_every", "log_every")

    def __post_init__(self):
        for name in ("steps", "batch_size", "train_length", "grad_accum", "save_every", "log_every"):
            if int(getattr(self, name)) <= 0:
                raise ExtrapError(f"train: {name} must be positive, got {getattr(self, name)}")
        if self.threads < 0:
            raise ExtrapError(f"train: threads must be >= 0 (0: torch's default), got {self.threads}")
        if self.warmup < 0 or self.lr <= 0 or self.grad_clip < 0 or not 0 <= self.min_lr_ratio <= 1:
            raise ExtrapError("train: need warmup >= 0, lr > 0, grad_clip >= 0 and 0 <= min_lr_ratio <= 1")
        if self.task is not None:
            from extrap.tasks import ALL_TASKS, check_ruler_task

            for task in str(self.task).split(","):  # "a,b": a mix of tasks (extrap.tasks.TaskSampler)
                try:
                    check_ruler_task(task, ALL_TASKS)  # the message, with the closest names
                except ExtrapError as e:
                    raise ExtrapError(f"train: {e}") from None
        if not 0 <= self.task_mix < 1:
            raise ExtrapError(f"train: task_mix must be in [0, 1) (the fraction of LM batches), got {self.task_mix}")
        if self.task_mix > 0 and self.task is None:
            raise ExtrapError("train: task_mix needs a task (passkey, line or topic)")

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        return strict_dataclass(cls, d, "train config")


@dataclass(frozen=True)
class Preset:
    """A named starting point: model and training settings that differ from the dataclass defaults."""

    model: dict
    train: dict


PRESETS: dict[str, Preset] = {
    "smoke": Preset(
        model=dict(n_layer=2, d_model=32, n_head=2, attn_block=64),
        train=dict(steps=30, batch_size=8, train_length=64, warmup=5, save_every=15, log_every=5, lr=3e-3),
    ),
    "cpu": Preset(
        model=dict(n_layer=4, d_model=128, n_head=4),
        train=dict(steps=600, batch_size=16, train_length=128, warmup=50, save_every=200, lr=1e-3),
    ),
    # 000 "Setting": 6 layers, d = 512, L = 512
    "paper": Preset(
        model=dict(n_layer=6, d_model=512, n_head=8, attn_block=512),
        train=dict(steps=50000, batch_size=32, train_length=512, warmup=1000, save_every=2000, lr=6e-4),
    ),
}


def build_configs(
    pe: str | None,
    preset: str | None = "cpu",
    config: dict | None = None,
    overrides: dict | None = None,
    base: tuple[dict, dict] | None = None,
) -> tuple[ModelConfig, TrainConfig]:
    """Preset, then a config file's {model: ..., train: ...}, then overrides (None values are skipped).

    ``base``: the (model, train) settings to start from instead of the dataclass defaults and a preset
    (a run's own when it is resumed, a parent's model when it is fine-tuned); a preset given (not None)
    still applies on top of them.  Without a base, no preset means ``cpu``.
    """
    if preset is not None and preset not in PRESETS:
        raise ExtrapError(f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})")
    if base is None:
        base, preset = ({}, {}), preset or "cpu"
    model_d, train_d = dict(base[0]), dict(base[1])
    if preset is not None:
        model_d.update(PRESETS[preset].model)
        train_d.update(PRESETS[preset].train)
    config = config or {}
    unknown = sorted(set(config) - {"model", "train"})
    if unknown:
        raise ExtrapError(f"config: unknown section(s) {', '.join(unknown)} (use 'model' and 'train')")
    for section, target in (("model", model_d), ("train", train_d)):
        given = config.get(section) or {}
        if not isinstance(given, dict):
            raise ExtrapError(f"config: section {section!r} must be a mapping of settings, got {type(given).__name__}")
        target.update(given)
    model_keys = {f.name for f in fields(ModelConfig)}
    for k, v in (overrides or {}).items():
        if v is not None:
            (model_d if k in model_keys else train_d)[k] = v
    if pe is not None:
        model_d["pe"] = pe
    return ModelConfig.from_dict(model_d), TrainConfig.from_dict(train_d)


def read_config_file(path: str | Path | None) -> dict:
    """A YAML or JSON file holding a mapping with ``model`` and ``train`` sections ({} for None)."""
    if not path:
        return {}
    p = Path(path)
    if not p.is_file():
        raise ExtrapError(f"config file {path} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ExtrapError(f"cannot parse {path}: it is not UTF-8 text") from None
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as e:  # yaml and json raise many types; the first line says what is wrong
        raise ExtrapError(f"cannot parse {path}: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ExtrapError(f"{path} must hold a mapping with 'model' and 'train' sections")
    return data
