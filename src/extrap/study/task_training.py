"""Training a study's model on retrieval tasks mixed with language modelling, for every experiment that does."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from extrap.run import RunDir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskTraining:
    """One model to train: its folder and PE, the preset and overrides, and the task mix it learns."""

    run_dir: str
    pe: str
    train_preset: str  # model size and optimiser of extrap.config.PRESETS
    task: str  # one task, or a comma-separated mix (example i from task i mod count)
    task_mix: float  # fraction of plain language-modelling batches
    train_length: int
    steps: int
    overrides: Mapping[str, object] = field(default_factory=dict)  # the preset's own train_overrides
    corpus: str | None = None
    device: str | None = None
    threads: int | None = None


def trained_task_run(t: TaskTraining, label: str) -> RunDir:
    """The run folder, trained (or its training finished, resumed) first if needed; ``label`` names it in the log."""
    from extrap import train as training

    rd = RunDir(t.run_dir)
    if not rd.is_finished():
        over = {
            **t.overrides,
            "task": t.task,
            "task_mix": t.task_mix,
            "train_length": t.train_length,
            "steps": t.steps,
            **({"corpus": t.corpus} if t.corpus else {}),
            **({"device": t.device} if t.device else {}),
            "threads": t.threads,
        }
        m, c = training.build_configs(t.pe, t.train_preset, overrides=over)
        log.info("  %s: training %d steps at L_tr=%d on %s", label, c.steps, c.train_length, c.task)
        training.train(rd.path, m, c, resume=rd.exists(), progress=False)
    return rd
