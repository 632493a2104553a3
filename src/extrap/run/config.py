"""What a run directory's ``config.json`` holds, as a typed record with a format version."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from extrap.config import TrainConfig
from extrap.errors import ExtrapError
from extrap.model import ModelConfig
from extrap.run.records import Parent

# 1: extrap 0.1.0 wrote no "format" key; the layout is the same, so it still loads.
RUN_FORMAT = 2
READABLE_FORMATS = (1, 2)
# Settings that every config.json has carried since format 1 and that no default may stand in for: an
# evaluation at the default 128 of a run trained at 64 would look right and be wrong.
REQUIRED = {
    ("model", "pe"): "the positional scheme the run was trained with",
    ("train", "train_length"): "the length the run was trained at, which its evaluation compares against",
}


class RunFormatError(ExtrapError):
    """A run directory written in a format this version cannot read."""


@dataclass
class RunConfig:
    """A trained run's settings and provenance (``RUN_DIR/config.json``)."""

    model: ModelConfig
    train: TrainConfig
    tokenizer: str  # the tokenizer's name (bytes, bpe:V)
    corpus: str  # the corpus's resolved name
    corpus_hash: str | None
    seed: int
    extrap_version: str
    command: str
    world_size: int = 1
    format: int = RUN_FORMAT
    parent: Parent | None = None  # the run it was fine-tuned from (``extrap train --init-from``)

    @property
    def pe(self) -> str:
        return self.model.pe

    @property
    def train_length(self) -> int:
        return int(self.train.train_length)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "model": self.model.to_dict(),
            "train": asdict(self.train),
            "tokenizer": self.tokenizer,
            "corpus": self.corpus,
            "seed": self.seed,
            "corpus_hash": self.corpus_hash,
            "extrap_version": self.extrap_version,
            "command": self.command,
            "world_size": self.world_size,
            **({"parent": self.parent.to_json()} if self.parent else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], source: str = "config.json") -> RunConfig:
        if not isinstance(d, dict):
            raise ExtrapError(f"{source} does not hold a JSON object")
        fmt = d.get("format", 1)
        if fmt not in READABLE_FORMATS:
            raise RunFormatError(
                f"{source}: run format {fmt!r} is not readable by this extrap "
                f"(it reads formats {', '.join(map(str, READABLE_FORMATS))})"
            )
        for section in ("model", "train"):
            if not isinstance(d.get(section), dict):
                raise ExtrapError(f"{source} has no {section} section")
        for section, key in REQUIRED:  # a default here would describe another run, silently
            if key not in d[section]:
                raise ExtrapError(f"{source}: {section}.{key} is missing ({REQUIRED[section, key]})")
        try:
            return cls(
                model=ModelConfig.from_dict(d["model"]),
                train=TrainConfig.from_dict(d["train"]),
                tokenizer=str(d.get("tokenizer", "bytes")),
                corpus=str(d.get("corpus", d["train"].get("corpus"))),
                corpus_hash=d.get("corpus_hash"),
                seed=int(d.get("seed", d["train"].get("seed", 0))),
                extrap_version=str(d.get("extrap_version", "")),
                command=str(d.get("command", "")),
                world_size=int(d.get("world_size", 1)),
                format=fmt,
                parent=None if d.get("parent") is None else Parent.from_json(d["parent"], f"{source} parent"),
            )
        except ExtrapError as e:  # say which file holds the bad setting
            raise ExtrapError(f"{source}: {e}") from None
        except (TypeError, ValueError) as e:
            raise ExtrapError(f"{source}: {e}") from None
