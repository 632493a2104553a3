"""Training batches of task examples, optionally mixed with language-modelling batches.

:class:`TaskSampler` has the interface of :class:`extrap.data.BatchSampler`
(``next() -> (x, y)``, ``state_dict`` / ``load_state_dict``), so the training
loop uses either without knowing which.

* A task row is one example generated with ``include_target=True`` so that
  prompt + target fill ``length + 1`` tokens (at least 90% of them; the rest is
  right padding).  ``x`` is the sequence without its last token, ``y`` the
  sequence shifted by one, and **only the target tokens are scored**: every
  other position of ``y`` (prompt and padding) is ``-100``, the ignore index of
  ``cross_entropy``.  The loss of a task batch is therefore the mean NLL of the
  answer tokens (`` 48213\\n``): what the model must learn is the retrieval,
  not the filler.
* ``mix`` is the fraction of batches drawn from the language-modelling sampler
  instead (whole batches; 0 = task batches only).  Which batches those are
  depends only on ``(seed, step)``.
* Counter-based like ``BatchSampler``: batch ``k`` depends only on
  ``(seed, k)``; row ``r`` of rank ``p`` is example ``(k * world + p) * B + r``
  of a global batch, so resuming reproduces the exact batches and the union
  over ranks equals a one-process run with the global batch size.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from extrap.data.streams import resume, sampler_state
from extrap.errors import ExtrapError
from extrap.tasks.filler import get_filler
from extrap.tasks.formats import min_length, seed_of
from extrap.tasks.generators import check_task, make_example, needs_filler
from extrap.tasks.records import Example
from extrap.tasks.ruler.registry import RULER_TASKS, make_ruler_example, ruler_min_length

IGNORE_INDEX = -100


class TaskSampler:
    def __init__(
        self,
        task: str,
        tokenizer,
        batch_size: int,
        length: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        *,
        filler: Any = None,
        split: str = "train",
        lm=None,
        mix: float = 0.0,
    ) -> None:
        # "a,b": a mix of tasks, example i of the (i mod count)-th; RULER-style ones (extrap.tasks.ruler) join too
        self.tasks = tuple(t if t in RULER_TASKS else check_task(t) for t in str(task).split(","))
        self.task = ",".join(self.tasks)
        if batch_size < 1 or length < 1:
            raise ExtrapError(f"batch size and length must be positive (got {batch_size}, {length})")
        if not 0 <= rank < world_size:
            raise ExtrapError(f"rank {rank} is outside world size {world_size}")
        if not 0 <= mix < 1:
            raise ExtrapError(f"task mix must be in [0, 1) (the fraction of LM batches), got {mix}")
        if mix > 0 and lm is None:
            raise ExtrapError("task mix > 0 needs a language-modelling sampler")
        for task in self.tasks:
            self.check_length(task, tokenizer, length, filler, split)
        self.tokenizer = tokenizer
        self.batch_size, self.length, self.seed = batch_size, length, int(seed)
        self.rank, self.world_size = rank, world_size
        ruler = any(t in RULER_TASKS or needs_filler(t) for t in self.tasks)
        self.filler = get_filler(filler, split) if ruler else None
        self.lm, self.mix = lm, float(mix)
        pad = tokenizer.encode("\n")
        self.pad_id = int(pad[0]) if pad else 0
        self.step = 0

    @staticmethod
    def check_length(task: str, tokenizer, length: int, filler, split: str) -> None:
        if task in RULER_TASKS:
            need = ruler_min_length(task, tokenizer, include_target=True, filler=filler, split=split)
        else:
            need = min_length(task, tokenizer, include_target=True)
        if length + 1 < need:
            raise ExtrapError(
                f"task {task} needs a training length of at least {need - 1} tokens with the "
                f"{tokenizer.name} tokenizer (got {length}); raise the training length"
            )

    # ---- one batch ---------------------------------------------------------
    def is_lm_batch(self, step: int) -> bool:
        return self.mix > 0 and random.Random(seed_of("mix", self.seed, step)).random() < self.mix

    def example(self, index: int) -> Example:
        """Training example number ``index`` (global over ranks and steps)."""
        task = self.tasks[index % len(self.tasks)]
        make = make_ruler_example if task in RULER_TASKS else make_example
        return make(
            task,
            self.tokenizer,
            self.length + 1,
            seed_of("train", self.seed, index),
            filler=self.filler,
            include_target=True,
        )

    def encode(self, ex: Example) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y) of one example: y scores only the target tokens."""
        p = ex.prompt_ids(self.tokenizer)
        t = self.tokenizer.encode(ex.target)
        seq = p + t
        L = self.length
        x = torch.full((L,), self.pad_id, dtype=torch.long)
        y = torch.full((L,), IGNORE_INDEX, dtype=torch.long)
        x[: len(seq) - 1] = torch.tensor(seq[:-1], dtype=torch.long)
        y[len(p) - 1 : len(seq) - 1] = torch.tensor(t, dtype=torch.long)
        return x, y

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.is_lm_batch(step):
            self.lm.step = step
            return self.lm.next()
        first = (step * self.world_size + self.rank) * self.batch_size
        rows = [self.encode(self.example(first + r)) for r in range(self.batch_size)]
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.batch(self.step)
        self.step += 1
        return out

    __next__ = next

    def __iter__(self) -> TaskSampler:
        return self

    # ---- resume ------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {**sampler_state(self), "task": self.task, "mix": self.mix}
        if self.lm is not None:
            state["stream_tokens"] = int(self.lm.stream.numel())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at ``state['step']``; refuse a state from another task, mix, batch shape or stream."""
        if "task" not in state:
            raise ExtrapError("cannot resume: the checkpoint was written by a language-modelling run, not a task run")
        keys = ("task", "mix", "batch_size", "length", "world_size", "stream_tokens")
        same = "task, mix, corpus, tokenizer, batch size, length and world size"
        resume(self, state, keys, "task sampler", same)
