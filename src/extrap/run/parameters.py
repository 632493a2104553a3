"""Stored bias parameters of a run directory, per layer, for the theory's checkpoint analysis.

Reads the run layout of :mod:`.directory` (``config.json`` with a ``model`` section holding ``pe``
and ``n_head``; the latest checkpoint's ``model.safetensors``; bias parameters stored as
``blocks.<i>.attn.bias_params.<name>``) and, more loosely, any directory with a config.json
naming the scheme and head count next to ``*.safetensors`` files (a foreign export).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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
    cfg = run_dir.read_config_dict()
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
