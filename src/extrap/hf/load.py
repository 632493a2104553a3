"""``hf:PATH`` as an extrap run: loading, the run record, config summaries."""

from __future__ import annotations

from dataclasses import dataclass, field

from extrap.errors import ExtrapError
from extrap.hf.common import (CAUSAL_FAMILIES, T5_FAMILIES, _arch, _check_folder, _read_hf_config, _sha256,
                              _transformers, default_device_dtype)
from extrap.hf.model import HFModel
from extrap.hf.rope import apply_rope
from extrap.hf.tokenizer import HFTokenizer


@dataclass
class HFRun:
    model: HFModel
    tokenizer: HFTokenizer
    config: dict
    path: str
    step: int | None = None
    extra: dict = field(default_factory=dict)

    def __iter__(self):
        return iter((self.model, self.tokenizer, self.config))

    @property
    def train_length(self) -> int:
        return int(self.config["train"]["train_length"])


def is_hf(path) -> bool:
    return str(path).startswith("hf:")


def load_hf(path, dtype=None, device=None, rope: str | None = None, factor: float | None = None,
            train_length: int | None = None, corpus: str = "stdlib") -> HFRun:
    """An HF causal LM from a local folder as an extrap run (see the module docstring)."""
    transformers = _transformers()
    folder = _check_folder(path)
    hf_cfg = _read_hf_config(folder)
    mtype = str(getattr(hf_cfg, "model_type", ""))
    if mtype in T5_FAMILIES:
        raise ExtrapError(f"not supported: {_arch(hf_cfg)} is an encoder-decoder; use "
                          f"`extrap theory --checkpoint hf:PATH` or extrap.hf.t5 for T5")
    if mtype not in CAUSAL_FAMILIES:
        raise ExtrapError(f"not supported: {_arch(hf_cfg)}")
    device, dt = default_device_dtype(device, dtype)
    try:
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=dt)
    except (OSError, ValueError) as e:
        raise ExtrapError(f"cannot load a model from {folder}: {str(e).splitlines()[0]}") from None
    hf_model.to(device).eval()
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, TypeError) as e:
        raise ExtrapError(f"{folder} has no usable tokenizer: {str(e).splitlines()[0]}") from None
    pe = f"hf:{mtype}/{CAUSAL_FAMILIES[mtype]}"
    model = HFModel(hf_model, mtype, pe)
    n_pos = getattr(hf_cfg, "max_position_embeddings", None) or getattr(hf_cfg, "n_positions", None) \
        or getattr(hf_cfg, "max_seq_len", None)
    tl_source = "--train-length"
    if train_length is None:
        if n_pos is not None:
            train_length, tl_source = int(n_pos), "config"
        elif mtype == "bloom":  # ALiBi: the config stores no length; BLOOM was trained at 2048 tokens
            train_length, tl_source = 2048, "bloom default (2048)"
        else:
            raise ExtrapError(f"{folder}: the config gives no context length; pass --train-length")
    if train_length < 2:
        raise ExtrapError(f"--train-length must be >= 2, got {train_length}")
    rope_info = None
    if rope is not None:
        rope_info = apply_rope(model, rope, factor, int(n_pos or train_length))
        model.cfg.pe = f"{pe}+{rope}x{rope_info['factor']:g}"
    elif factor is not None:
        raise ExtrapError("--factor needs --rope")
    config = {
        "model": {"pe": model.cfg.pe, "n_layer": model.cfg.n_layer, "n_head": model.cfg.n_head,
                  "d_model": model.cfg.d_model, "vocab_size": model.cfg.vocab_size, "architecture": _arch(hf_cfg),
                  "model_type": mtype},
        "train": {"train_length": int(train_length), "train_length_source": tl_source, "corpus": corpus},
        "hf_path": str(folder), "config_hash": _sha256(folder / "config.json"),
        "dtype": str(dt).replace("torch.", ""), "device": device,
        **({"rope": rope_info} if rope_info else {}),
    }
    return HFRun(model=model, tokenizer=HFTokenizer(tok, folder), config=config, path=f"hf:{folder}")


def config_summary(run) -> dict:
    """What a results JSON records about an hf: run (empty for project runs)."""
    c = getattr(run, "config", {}) or {}
    if "hf_path" not in c:
        return {}
    return {k: c[k] for k in ("hf_path", "config_hash", "dtype", "rope") if k in c}

