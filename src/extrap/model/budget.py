"""The memory one training step needs, checked before anything is allocated (:mod:`extrap.memory`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from extrap.memory import ADAMW_BYTES_PER_PARAMETER, check_parts, parameter_count, training_step_bytes
from extrap.model.config import ModelConfig
from extrap.model.gpt import GPT

if TYPE_CHECKING:
    from extrap.config import TrainConfig


def check_training_memory(m: ModelConfig, t: TrainConfig, device: torch.device) -> None:
    """Refuse a run whose training step cannot fit in the device's memory (:mod:`extrap.memory`): the model's
    activations, its parameters with AdamW's state (counted on the meta device), the scheme's own work and
    the position sampler's, each a lower bound."""
    from extrap import positional
    from extrap.positional.sampling import PositionSampler

    scheme, sampler = positional.get(m.pe), PositionSampler.from_spec(m.positions)
    B, L = t.batch_size, t.train_length
    own = scheme.train_bytes(
        batch=B, length=L, max_position=sampler.max_position or L, n_head=m.n_head, n_layer=m.n_layer, d_model=m.d_model
    )
    parts = {
        "activations": (training_step_bytes(B, L, m.vocab_size, m.d_model, m.n_layer), "lower the batch or the length"),
        "parameters with AdamW state": (
            ADAMW_BYTES_PER_PARAMETER * parameter_count(lambda: GPT(m)),
            f"give a smaller model or smaller options of {m.pe}",
        ),
        f"{scheme.name}'s own work": (
            own,
            f"lower the options of {m.pe}, the positions' range, the batch or the length",
        ),
        f"{sampler.spec} positions": (sampler.train_bytes(B), "lower the sampler's max or the batch"),
    }
    check_parts(parts, f"a training step of {m.pe} on {B} x {L} tokens", device)


__all__ = ["check_training_memory"]
