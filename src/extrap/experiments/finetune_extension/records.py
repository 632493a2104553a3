"""The records of the fine-tuned extension study's worker: the job it receives and what it hands back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from extrap.experiments.extension.records import ExtensionOutput
from extrap.experiments.finetune_extension.methods import FtMethod
from extrap.experiments.finetune_extension.presets import FinetuneSettings
from extrap.experiments.finetune_extension.results import FtResult
from extrap.study.models import ModelJob


@dataclass(frozen=True)
class FtJob:
    """The base (trained as rope-base trains it), the methods made from it and where their runs go."""

    training: ModelJob
    settings: FinetuneSettings
    methods: tuple[FtMethod, ...]
    runs: str  # folder of the fine-tunes (one run folder each)
    lr: float  # the fine-tunes' peak learning rate


@dataclass(frozen=True)
class FtOutput(ExtensionOutput):
    """The base's run, training and last-token report (the learning gate reads it), and every method's
    :class:`FtResult` (the extension study's output record, with this study's method record)."""

    METHOD: ClassVar[type] = FtResult
