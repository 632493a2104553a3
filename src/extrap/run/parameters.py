"""Stored bias parameters of a run directory, per layer, for the theory's checkpoint analysis.

Reads the run layout of :mod:`.directory` (``config.json`` with a ``model`` section holding ``pe``
and ``n_head``; the latest checkpoint's ``model.safetensors``; bias parameters stored as
``blocks.<i>.attn.bias_params.<name>``) and, more loosely, any directory with a config.json
naming the scheme and head count next to ``*.safetensors`` files (a foreign export).
:func:`read_checkpoint_bias` adds the run's training length; :func:`head_values` gives one
head's parameter values as plain numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from extrap.errors import ExtrapError
from extrap.run.directory import RunDir

StoredParams = Mapping[str, Mapping[str, torch.Tensor]]  # layer -> {param name: stored tensor}

SPEC_KEYS = ("pe", "positional", "position", "rpe", "positional_encoding")
HEAD_KEYS = ("n_head", "num_heads", "n_heads", "heads", "num_attention_heads")


def _natural(key: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key)]


def read_bias_parameters(path: str | Path) -> tuple[str, int, StoredParams]:
    """(scheme spec, heads, {layer: {name: stored tensor}}) of the run or export in ``path``.

    Every tensor whose name ends in ``.<param>`` for one of the scheme's parameters is grouped by
    the prefix before it (its layer; a trailing ``.bias_params`` is dropped).  A scheme with no
    parameters gives one layer "shared" with nothing in it.
    """
    from safetensors.torch import load_file

    from extrap import positional

    run_dir = RunDir(path)
    cfg = run_dir.read_raw_config()
    sections = [cfg] + [v for v in cfg.values() if isinstance(v, dict)]
    spec = next((s[k] for s in sections for k in SPEC_KEYS if isinstance(s.get(k), str)), None)
    heads = next((s[k] for s in sections for k in HEAD_KEYS if isinstance(s.get(k), int)), None)
    if spec is None or heads is None:
        raise ExtrapError(
            f"{run_dir.config_path}: needs the positional scheme ({'/'.join(SPEC_KEYS)}) and the head count"
        )
    scheme = positional.get(spec)
    names = {q.name for q in scheme.params(heads)} if scheme.adds_bias else set()
    if not names:  # nothing learned to read (APE, RoPE, parameter-free biases)
        return spec, heads, {"shared": {}}
    stored: dict[str, dict[str, torch.Tensor]] = {}
    for f in run_dir.weight_files():
        try:
            tensors = load_file(str(f))
        except Exception as e:  # safetensors raises its own error types for truncated or foreign files
            raise ExtrapError(f"cannot read {f}: {str(e).splitlines()[0]}") from None
        for key, tensor in tensors.items():
            prefix, _, name = key.rpartition(".")
            if name in names:
                layer = prefix[: -len(".bias_params")] if prefix.endswith(".bias_params") else prefix
                stored.setdefault(layer or "shared", {})[name] = tensor
    if not stored:
        raise ExtrapError(f"{run_dir.path}: no tensors named like the {scheme.spec} parameters {sorted(names)}")
    return spec, heads, dict(sorted(stored.items(), key=lambda kv: _natural(kv[0])))


@dataclass(frozen=True)
class BiasParameters:
    """A run's positional scheme, head count, stored bias parameters per layer and training length."""

    spec: str
    heads: int
    layers: StoredParams  # {layer: {name: stored tensor}}, raw for positive parameters
    train_length: int | None  # the run's training length (None: a foreign export that does not say)


def read_checkpoint_bias(path: str | Path) -> BiasParameters:
    """:func:`read_bias_parameters` and the training length (``Run.train_length``) of the run in ``path``.

    A run written by ``extrap train`` has it in its typed config; a foreign export may give a
    ``train_length`` in any section of its config.json.
    """
    spec, heads, layers = read_bias_parameters(path)
    run_dir = RunDir(path)
    try:
        train_length = run_dir.read_config().train_length
    except (ExtrapError, TypeError, ValueError, KeyError):  # not extrap's own layout
        cfg = run_dir.read_raw_config()
        sections = [cfg] + [v for v in cfg.values() if isinstance(v, dict)]
        found = [s["train_length"] for s in sections if isinstance(s.get("train_length"), int)]
        train_length = found[0] if found and found[0] > 0 else None
    return BiasParameters(spec, heads, layers, train_length)


def head_values(values: Mapping[str, torch.Tensor], head: int | None) -> Mapping[str, float | list]:
    """One head's parameter values as floats (a parameter with a vector per head: a list).

    A parameter shared by the heads (first dimension 1) gives its one value to every head;
    ``head`` None gives every head's values (nested lists).
    """
    out = {}
    for name, v in values.items():
        v = torch.as_tensor(v).detach().double()
        if head is not None and v.dim() > 0:
            v = v[min(head, v.shape[0] - 1)]
        out[name] = v.tolist()
    return out


def trained_bias_values(run_dir: str | Path) -> list[Mapping[str, torch.Tensor]]:
    """Each layer's bias values in float64, read as ``extrap theory --checkpoint`` reads them.

    The stored tensors of the run's latest checkpoint (:func:`read_bias_parameters`),
    in float64, then the scheme's map to the values the bias uses (softplus for KERPLE's r1, r2):
    the same numbers the command analyses, to the last bit.
    """
    from extrap import positional

    spec, heads, stored = read_bias_parameters(run_dir)
    scheme = positional.get(spec)
    return [scheme.values({k: v.detach().double() for k, v in p.items()}, heads) for p in stored.values()]
