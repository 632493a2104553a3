"""Runs: the one owner of the run directory format, and the ``Run`` protocol every consumer uses.

* :mod:`.config`: :class:`RunConfig`, the typed ``config.json`` with its format version;
* :mod:`.directory`: :class:`RunDir`, every file of a run directory (config, checkpoints,
  latest.json, metrics.jsonl, final.json);
* :mod:`.trained`: :class:`TrainedRun`, a run directory loaded for use;
* :mod:`.parameters`: the stored bias parameters per layer, for the theory's checkpoint analysis;
* :mod:`.protocol`: the :class:`Run` protocol, shared with ``hf:PATH`` checkpoints (:class:`extrap.hf.HFRun`).

:func:`load` is the single place where a run directory, an ``hf:PATH`` causal LM and an ``hf:PATH`` T5
are told apart.
"""

from __future__ import annotations

from pathlib import Path

from extrap.errors import ExtrapError
from extrap.run.config import READABLE_FORMATS, RUN_FORMAT, RunConfig, RunFormatError
from extrap.run.directory import Checkpoint, RunDir
from extrap.run.parameters import StoredParams, read_bias_parameters, trained_bias_values
from extrap.run.protocol import EVAL_SPLITS, Run, eval_stream
from extrap.run.trained import (
    TrainedRun,
    changed_settings,
    differing,
    load_model_weights,
    model_weights,
    open_run,
    refuse_changed_settings,
)

HF_PREFIX = "hf:"


def is_hf(source) -> bool:
    """``hf:PATH``, a local Hugging Face checkpoint, rather than an extrap run directory."""
    return str(source).startswith(HF_PREFIX)


def load(source: str | Path, device: str | None = None, **hf_options) -> Run:
    """The model at its latest checkpoint (eval mode), its tokenizer and its config, as a :class:`Run`.

    ``hf:PATH`` loads a local Hugging Face checkpoint instead: a causal LM (:func:`extrap.hf.load_hf`,
    its model an :class:`extrap.model.protocol.ExtrapLM`), or a T5 (:func:`extrap.hf.t5_run.load_hf_t5`,
    its model a :class:`extrap.model.protocol.Seq2SeqLM`); ``hf_options``: dtype, rope, factor,
    train_length, corpus.  Device None: cpu for project runs, cuda (bfloat16) when available for hf:
    models.  ``rope`` and ``factor`` also re-scale a run trained with a rotary PE (:func:`open_run`), and
    ``dtype`` sets a project run's autocast (None: float32); the others are for hf: only.
    """
    hf_options = {k: v for k, v in hf_options.items() if v is not None}
    if is_hf(source):
        from extrap.hf.load import is_t5_checkpoint, load_hf

        if is_t5_checkpoint(source):
            from extrap.hf.t5_run import load_hf_t5

            return load_hf_t5(source, device=device, **hf_options)
        return load_hf(source, device=device, **hf_options)
    own = {k: hf_options.pop(k) for k in ("rope", "factor", "dtype") if k in hf_options}
    if hf_options:
        raise ExtrapError(f"{', '.join(sorted(hf_options))}: only for hf: models")
    return open_run(source, device, **own)


__all__ = [
    "EVAL_SPLITS",
    "HF_PREFIX",
    "READABLE_FORMATS",
    "RUN_FORMAT",
    "Checkpoint",
    "Run",
    "RunConfig",
    "RunDir",
    "RunFormatError",
    "StoredParams",
    "TrainedRun",
    "changed_settings",
    "differing",
    "refuse_changed_settings",
    "eval_stream",
    "is_hf",
    "load",
    "load_model_weights",
    "model_weights",
    "open_run",
    "read_bias_parameters",
    "trained_bias_values",
]
