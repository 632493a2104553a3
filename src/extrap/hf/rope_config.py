"""The RoPE settings of a Hugging Face ``config.json``, read as JSON: no weights, no transformers.

:func:`read_rope_config` turns the published fields into one of extrap's rotary schemes
(:mod:`extrap.positional.rotary`), so ``extrap theory --checkpoint hf:PATH`` analyses a model from its
config alone (:func:`hf_rope_theory`):

* the base: ``rope_theta`` (``rope_parameters.rope_theta`` in transformers 5; ``rotary_emb_base`` in GPT-NeoX);
* the head dimension: ``head_dim``, else ``hidden_size / num_attention_heads``; ``partial_rotary_factor``
  (GPT-NeoX: ``rotary_pct``) < 1 becomes the scheme's ``partial=`` (only part of each head rotates);
* the scaling: ``rope_scaling`` (transformers 4) or ``rope_parameters`` (5), by ``rope_type`` (or ``type``):
  default, linear, dynamic, yarn, llama3 and longrope, with their parameters (longrope's ``short_factor`` and
  ``long_factor`` lists, its factor max_position_embeddings / original_max_position_embeddings when the
  config names none, as transformers derives it), and ``proportional`` (Gemma's p-RoPE: its
  ``partial_rotary_factor`` is the scheme's ``p=``, its factor a linear scaling);
* the training length: ``original_max_position_embeddings`` when the config names one (the pre-training
  length of a scaled model), else ``max_position_embeddings``; the length analysed by default is the
  longer of ``max_position_embeddings`` and factor × training length.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extrap.errors import ExtrapError
from extrap.hf.common import ROPE_FAMILIES, strip_prefix

HF_TO_EXTRAP = {
    "default": "none",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "llama3": "llama3",
    "longrope": "longrope",
    "proportional": "none",  # p-RoPE: p = partial_rotary_factor, a factor != 1 read as linear
}
"""transformers' rope types that extrap's registry defines, and the scaling each one is."""
_OPTIONS = {  # rope_parameters key -> registry option, per type
    "yarn": ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
    "llama3": ("low_freq_factor", "high_freq_factor"),
    "longrope": ("attention_factor",),
}
MAX_POSITION = 2**63 - 1
"""The largest position a model can be given: transformers and torch index positions in int64."""
_ROPE_FIELDS = ("rope_theta", "rope_scaling", "rope_parameters", "rotary_emb_base")


@dataclass(frozen=True)
class RopeConfig:
    """What a config.json says about its RoPE: the registry spec, head dimension and lengths."""

    path: str
    spec: str  # e.g. rope:base=500000.0,scaling=llama3,factor=8.0,original_max_position=8192,...
    head_dim: int  # the dimension of one head (partial= in the spec says how much of it rotates)
    train_length: int  # T_train: original_max_position_embeddings, else max_position_embeddings
    length: int  # L' by default: max(max_position_embeddings, factor x T_train)


def _load(path) -> tuple[Path, dict[str, Any]]:
    folder = Path(strip_prefix(path)).expanduser()
    file = folder / "config.json" if folder.is_dir() else folder
    if not file.is_file():
        raise ExtrapError(f"{strip_prefix(path)} holds no config.json: not a Hugging Face model folder")
    try:
        cfg = json.loads(file.read_text())
    except (ValueError, UnicodeDecodeError):
        raise ExtrapError(f"{file} is not JSON") from None
    except RecursionError:  # the decoder recurses once per level: a hostile file nests past Python's stack
        raise ExtrapError(f"{file} nests too deeply to read (over {sys.getrecursionlimit()} levels)") from None
    if not isinstance(cfg, dict):
        raise ExtrapError(f"{file} is not a JSON object")
    return file, cfg


def is_rope_config(path) -> bool:
    """Whether the config names a RoPE family or carries a RoPE field (then :func:`read_rope_config` applies)."""
    _, cfg = _load(path)
    return cfg.get("model_type") in ROPE_FAMILIES or any(cfg.get(k) is not None for k in _ROPE_FIELDS)


def _parameters(cfg: dict, file: Path) -> dict[str, Any]:
    """rope_theta and the scaling's parameters in one mapping (transformers 5 or 4 layout)."""
    rp = cfg.get("rope_parameters")
    if not isinstance(rp, dict):
        scaling = cfg.get("rope_scaling") or {}
        if not isinstance(scaling, dict):
            raise ExtrapError(f"{file}: rope_scaling must be an object, got {scaling!r}")
        rp = {**scaling, "rope_theta": cfg.get("rope_theta", cfg.get("rotary_emb_base"))}
    if rp.get("rope_theta") is None:
        raise ExtrapError(f"{file} has no RoPE fields: it names no rope_theta (rope_parameters, rotary_emb_base)")
    return rp


def _number(file: Path, name: str, value, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ExtrapError(f"{file}: {name} must be a positive number, got {value!r}")
    if integer and int(value) != value:
        raise ExtrapError(f"{file}: {name} must be an integer, got {value!r}")
    if integer and value > MAX_POSITION:
        raise ExtrapError(f"{file}: {name} = {value!r} exceeds {MAX_POSITION:,} (2^63 - 1, the largest int64 position)")
    return int(value) if integer else float(value)


def _head_dim(cfg: dict, rp: dict, file: Path) -> tuple[int, float]:
    """(head dimension, partial_rotary_factor): the whole head and the fraction of it that rotates."""
    if cfg.get("head_dim") is not None:
        d = _number(file, "head_dim", cfg["head_dim"], integer=True)
    elif cfg.get("hidden_size") is not None and cfg.get("num_attention_heads") is not None:
        hidden = _number(file, "hidden_size", cfg["hidden_size"], integer=True)
        d = hidden // _number(file, "num_attention_heads", cfg["num_attention_heads"], integer=True)
    else:
        raise ExtrapError(f"{file}: no head_dim, nor hidden_size and num_attention_heads")
    part = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", cfg.get("rotary_pct", 1.0)))
    part = _number(file, "partial_rotary_factor", part)
    if part > 1:
        raise ExtrapError(f"{file}: partial_rotary_factor must be in (0, 1], got {part!r}")
    return d, part


def _scaling(kind: str, rp: dict, file: Path, train: int, max_pos: int) -> tuple[list[str], float]:
    """The registry options of a scaled type and its factor."""
    given = rp.get("factor")
    if kind == "longrope" and given is None:  # transformers: max_position_embeddings / original
        given = max_pos / train
    factor = _number(file, "factor", given)
    opts = [f"scaling={HF_TO_EXTRAP[kind]}", f"factor={factor!r}", f"original_max_position={train}"]
    opts += [f"{k}={rp[k]!r}" for k in _OPTIONS.get(kind, ()) if rp.get(k) is not None]
    if kind == "longrope":
        for name in ("short_factor", "long_factor"):
            values = rp.get(name)
            if not isinstance(values, list) or not values:
                raise ExtrapError(f"{file}: longrope needs {name}, a list of numbers (one per rotary pair)")
            opts.append(f"{name}=" + "/".join(repr(float(_number(file, name, v))) for v in values))
    return opts, factor


def _scaled_length(file: Path, factor: float, train: int) -> int:
    """factor x T_train, the length a scaling targets, as an int64 position count."""
    scaled = factor * train
    if not scaled <= MAX_POSITION:  # inf included
        raise ExtrapError(
            f"{file}: factor {factor!r} x training length {train:,} = {scaled:.3g} exceeds {MAX_POSITION:,} "
            "(2^63 - 1, the largest int64 position): lower factor"
        )
    return math.ceil(scaled)


def read_rope_config(path) -> RopeConfig:
    """The RoPE settings of ``path``/config.json (module docstring); ExtrapError in one line when it has none."""
    file, cfg = _load(path)
    rp = _parameters(cfg, file)
    base = _number(file, "rope_theta", rp["rope_theta"])
    kind = str(rp.get("rope_type") or rp.get("type") or "default")
    if kind not in HF_TO_EXTRAP:
        raise ExtrapError(f"{file}: unknown rope type {kind!r} (extrap's registry defines {', '.join(HF_TO_EXTRAP)})")
    if cfg.get("max_position_embeddings") is None:
        raise ExtrapError(f"{file}: no max_position_embeddings")
    max_pos = _number(file, "max_position_embeddings", cfg["max_position_embeddings"], integer=True)
    original = rp.get("original_max_position_embeddings", cfg.get("original_max_position_embeddings"))
    given = original is not None  # 0 is a value to refuse by name, not a missing field
    train = _number(file, "original_max_position_embeddings", original, integer=True) if given else max_pos
    d, part = _head_dim(cfg, rp, file)
    opts = [f"base={base!r}"]
    length = max_pos
    if kind == "proportional":  # Gemma's p-RoPE: θ over the whole head, the int(p·d/2) highest kept
        factor = _number(file, "factor", rp.get("factor", 1.0))
        opts += [f"scaling=linear,factor={factor!r}"] if factor != 1 else []
        opts += [f"p={part!r}"] if part < 1 else []
    elif kind != "default":
        scaled, factor = _scaling(kind, rp, file, train, max_pos)
        opts += scaled
        length = max(max_pos, _scaled_length(file, factor, train))
    if kind != "proportional" and part < 1:
        rotary = int(d * part)
        if rotary < 2 or rotary % 2:
            raise ExtrapError(
                f"{file}: the rotary part of a head has {rotary} dimensions; RoPE needs an even number >= 2"
            )
        opts.append(f"partial={part!r}")
    return RopeConfig(str(file.parent), "rope:" + ",".join(opts), d, train, length)


def hf_rope_theory(
    path,
    train_length: int | None = None,
    length: int | None = None,
    pretrain_base: float | None = None,
    tune_length: int | None = None,
):
    """The RoPE analysis (:func:`extrap.theory.rope.analyse_rope`) of an HF model from its config.json alone."""
    from extrap.memory import check_head_dim
    from extrap.theory.aggregation import search_bytes
    from extrap.theory.rope import analyse_rope

    rc = read_rope_config(path)
    check_head_dim(rc.head_dim, search_bytes(1), f"the RoPE analysis of {rc.path}", "its config.json sets head_dim")
    return analyse_rope(
        rc.spec,
        rc.head_dim,
        train_length or rc.train_length,
        length or rc.length,
        pretrain_base=pretrain_base,
        tune_length=tune_length,
    )


__all__ = ["HF_TO_EXTRAP", "RopeConfig", "hf_rope_theory", "is_rope_config", "read_rope_config"]
