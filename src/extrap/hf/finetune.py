"""Fine-tuning a local Llama-family HF model with a changed RoPE (``extrap train --init-from hf:DIR``).

The model is loaded with transformers in float32, its ``rope_parameters`` rebuilt for the requested
transformers rope type (:func:`extrap.hf.rope.hf_rope_parameters`: ``--rope yarn --factor 4``, with the
parent's length as ``original_max_position_embeddings``), or plain RoPE of a new ``rope_theta`` (ABF,
``--pe rope:base=B``), and its ``max_position_embeddings`` set to the fine-tuning length; the parent's
weights are loaded into it strictly, it trains with extrap's schedule
(:func:`extrap.train.lr_at`) on extrap's batches, and the result is written as an HF folder: that
config, ``model.safetensors``, the parent's tokenizer files and ``extrap_parent.json`` (the
:class:`~extrap.run.records.Parent` and the training summary), ``config.json`` last, so that the folder
is a model only once whole.  While it trains it checkpoints and resumes like any run
(:mod:`extrap.hf.finetune_state`).  ``extrap.load("hf:OUT")`` and transformers' ``from_pretrained`` then
read the same model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import torch

from extrap.config import TrainConfig
from extrap.errors import ExtrapError
from extrap.hf import finetune_state as state
from extrap.hf.common import check_folder, read_hf_config
from extrap.io import atomic_write_bytes, atomic_write_json
from extrap.positional.rope_scaling import RopeRequest
from extrap.run import RunDir
from extrap.run.lineage import InitFrom
from extrap.run.lock import LOCK_FILE
from extrap.run.records import Parent, TrainingSummary
from extrap.version import __version__

log = logging.getLogger(__name__)

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")  # rotary models whose config carries rope_parameters
PARENT_FILE = state.PARENT_FILE
TOKENIZER_FILES = ("tokenizer", "vocab", "merges", "special_tokens", "spiece", "chat_template")


def finetune_hf(
    out: str | os.PathLike,
    init: InitFrom,
    train_cfg: TrainConfig,
    rope: str | None = None,
    factor: float | None = None,
    positions: str | None = None,
    base: float | None = None,
    resume: bool = False,
) -> TrainingSummary:
    """Fine-tune ``init.source`` (``hf:DIR``) at ``train_cfg.train_length`` and write it as an HF folder ``out``.

    ``rope``/``factor``: the new RoPE, a transformers rope type (``linear``, ``dynamic``, ``yarn``,
    ``llama3``, ``longrope``; ``hf:`` optional) with its ``rope_parameters`` keys as options; None keeps
    the parent's.  ``base``: instead, plain RoPE with this ``rope_theta`` (ABF, Xiong et al. 2023, "Effective
    Long-Context Scaling", §4.1: base 10⁴ -> 5·10⁵; :func:`abf_base` reads it from ``rope:base=B``).
    ``positions``: a position sampler spec (``pose:target=T,chunks=K``).  Everything is checked before
    anything is written.  ``resume``: continue the fine-tune in ``out`` from its last checkpoint
    (:mod:`extrap.hf.finetune_state`); the settings must be the ones it recorded.
    """
    from extrap.devices import resolve_device
    from extrap.hf.load import local_pretrained
    from extrap.positional.sampling import PositionSampler
    from extrap.run.lock import exclusive

    out = Path(out)
    resolve_device(train_cfg.device)  # a config file's device: refused before anything is loaded or written
    sampler_spec = PositionSampler.from_spec(positions)
    folder, parent_cfg, record = _check(out, init, train_cfg, resume)
    if base is not None and (rope is not None or factor is not None):
        raise ExtrapError("a new RoPE base replaces the parent's RoPE and --rope re-scales it: give one of them")
    asked = state.FineTuneRecord(record, train_cfg, rope, factor, base, positions)
    new_cfg = _child_config(parent_cfg, record.train_length, train_cfg.train_length, rope, factor, base)
    with exclusive(out, "fine-tune folder", marker=state.RECORD_FILE):
        saved = state.read_record(out) if resume else None
        if saved is not None:
            saved.refuse_changes(asked)
        model, tok = local_pretrained(folder, torch.float32)
        child = _child_model(model, new_cfg)
        if saved is None:
            state.write_record(out, asked)
        summary = _train(child, tok, folder, train_cfg, sampler_spec, RunDir(out))
        _write(out, child, folder, record, summary)
        state.remove_training_files(out)
    return summary


def _check(out: Path, init: InitFrom, train_cfg: TrainConfig, resume: bool):
    if out.exists() and not out.is_dir():
        raise ExtrapError(f"{out} is a file; an hf: fine-tune writes a folder")
    if state.is_finished(out):
        raise ExtrapError(f"{out} holds a finished hf: fine-tune; its result is kept")
    held = [p for p in out.iterdir() if p.name != LOCK_FILE] if out.is_dir() else []  # a kill may leave .lock
    if resume and held and state.read_record(out) is None:
        raise ExtrapError(f"{out} holds no hf: fine-tune to resume")
    if not resume and held:
        raise ExtrapError(f"{out} already exists; an hf: fine-tune writes a new folder (or --resume it)")
    if init.step is not None:
        raise ExtrapError("an hf: folder holds one set of weights: no init step")
    folder = check_folder(init.source)
    cfg = read_hf_config(folder)
    family = str(getattr(cfg, "model_type", ""))
    if family not in FAMILIES:
        raise ExtrapError(
            f"hf: fine-tuning needs a Llama-family RoPE model ({', '.join(FAMILIES)}); {folder} is {family}"
        )
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise ExtrapError(f"{folder} has no model.safetensors (one file of weights is what a fine-tune records)")
    rp = dict(getattr(cfg, "rope_parameters", None) or {})
    length = int(rp.get("original_max_position_embeddings") or cfg.max_position_embeddings)
    if train_cfg.train_length < length:
        raise ExtrapError(
            f"fine-tuning length {train_cfg.train_length} is shorter than the parent's training length {length}"
        )
    pe = f"hf:{family}/rope:" + ",".join(f"{k}={v}" for k, v in sorted(rp.items()))
    record = Parent(f"hf:{folder.resolve()}", None, hashlib.sha256(weights.read_bytes()).hexdigest(), pe, length)
    return folder, cfg, record


def abf_base(spec: str) -> float:
    """The base of ``rope:base=B``, the one PE spec an hf: fine-tune takes (its rope_theta); others refused."""
    from extrap import positional

    scheme, plain = positional.get(spec), positional.get("rope").opts
    other = sorted(k for k, v in scheme.opts.items() if k != "base" and plain.get(k, v) != v)
    if scheme.name != "rope" or other or set(scheme.opts) != set(plain):
        raise ExtrapError(
            f"--init-from hf: takes --pe rope:base=B (a new rope_theta), not {spec}; a scaling is --rope TYPE"
        )
    return float(scheme.opts["base"])


def _child_config(cfg, original: int, length: int, rope: str | None, factor: float | None, base: float | None):
    """The parent's config with rope_parameters for ``rope`` (L = ``original``), or plain RoPE of theta
    ``base``, and context ``length``."""
    from extrap.hf.rope import hf_rope_parameters

    rp = dict(getattr(cfg, "rope_parameters", None) or {"rope_theta": 10000.0})
    new = cfg.__class__.from_dict(cfg.to_dict())
    if base is not None:  # ABF: --pe replaces the RoPE, as for an extrap run (a scaling of the parent's goes)
        new.rope_parameters = {"rope_type": "default", "rope_theta": float(base)}
    elif rope is not None:
        text = str(rope)[3:] if str(rope).startswith("hf:") else str(rope)
        req = replace(RopeRequest.parse(text, factor), hf=True)
        half = (getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads) // 2
        new.rope_parameters = hf_rope_parameters(req, rp, original, half, length)
    elif factor is not None:
        raise ExtrapError("a RoPE factor needs a RoPE scaling (rope)")
    new.max_position_embeddings = int(length)
    return new


def _child_model(model, new):
    """The parent's weights in a model of the new config, every tensor matched by name and shape."""
    import transformers

    torch.manual_seed(0)  # every tensor is overwritten below; the seed only keeps construction quiet
    child = transformers.AutoModelForCausalLM.from_config(new, dtype=torch.float32)
    missing, unexpected = child.load_state_dict(model.state_dict(), strict=False)
    if missing or unexpected:
        raise ExtrapError(
            f"the parent's weights do not fit the new config (missing {missing[:3]}, unexpected {unexpected[:3]})"
        )
    return child


def _train(child, tok, folder: Path, cfg: TrainConfig, positions, run: RunDir) -> TrainingSummary:
    """AdamW with extrap's warmup + cosine schedule and clipping, on extrap's deterministic batches; a
    checkpoint every ``save_every`` steps (not at the last: the HF folder is written then), resumed from."""
    from extrap.data import load_corpus
    from extrap.devices import resolve_device
    from extrap.hf.tokenizer import HFTokenizer
    from extrap.train import training_sampler

    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    sampler = training_sampler(cfg, load_corpus(cfg.corpus), HFTokenizer(tok, folder), 0, 1)
    gen = torch.Generator().manual_seed(cfg.seed + 7919)
    child.to(device).train()
    params = [p for p in child.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), foreach=False)
    run.remove_temporaries()  # what a killed process left half written
    first = state.restore(run, child, opt, sampler, gen)
    t0, loss = time.perf_counter(), math.nan
    for step in range(first, cfg.steps):
        loss = _step(child, opt, params, sampler, positions, gen, step, cfg, device)
        if (step + 1) % cfg.save_every == 0 and step + 1 < cfg.steps:
            state.save(run, step + 1, child, opt, sampler, gen)
    child.eval().to("cpu")
    ntok = cfg.steps * cfg.batch_size * cfg.train_length * cfg.grad_accum
    n = sum(p.numel() for p in child.parameters())
    return TrainingSummary(cfg.steps, loss, time.perf_counter() - t0, ntok, n, __version__)


def _step(child, opt, params, sampler, positions, gen, step: int, cfg: TrainConfig, device) -> float:
    """One optimiser step over ``grad_accum`` micro-batches; the mean loss."""
    from extrap.train import lr_at

    for g in opt.param_groups:
        g["lr"] = lr_at(step, cfg)
    total = 0.0
    for _ in range(cfg.grad_accum):
        x, y = sampler.next()
        pos = positions.train_positions(x.shape[0], x.shape[1], gen).to(device)
        logits = child(input_ids=x.to(device), position_ids=pos, use_cache=False).logits
        part = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), y.to(device).reshape(-1), ignore_index=-100
        )
        (part / cfg.grad_accum).backward()
        total += float(part.detach())
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    loss = total / cfg.grad_accum
    if not math.isfinite(loss):
        raise ExtrapError(f"training diverged at step {step + 1} (loss {loss}); lower the learning rate")
    return loss


def _write(out: Path, child, folder: Path, record: Parent, summary: TrainingSummary) -> None:
    """model.safetensors, the parent's tokenizer files, the lineage, and config.json last: an HF folder is
    readable only once whole (a fine-tune killed before config.json resumes from its last checkpoint)."""
    from safetensors.torch import save

    atomic_write_bytes(out / "model.safetensors", save(state.state_dict_to_save(child), metadata={"format": "pt"}))
    for f in sorted(folder.iterdir()):
        if f.is_file() and f.name.startswith(TOKENIZER_FILES):
            atomic_write_bytes(out / f.name, f.read_bytes())
    atomic_write_json(out / PARENT_FILE, {"parent": record.to_json(), "training": summary.to_json()})
    atomic_write_json(out / "config.json", json.loads(child.config.to_json_string()))
    log.info("%s: fine-tuned from %s", out, record.path)


__all__ = ["FAMILIES", "PARENT_FILE", "abf_base", "finetune_hf"]
