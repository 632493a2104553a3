"""Shared by the hf: modules: supported families, limits, folder and config checks, device and dtype."""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from pathlib import Path

import torch

from extrap.errors import ExtrapError

ROPE_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gpt_neox")
CAUSAL_FAMILIES = {**{k: "rope" for k in ROPE_FAMILIES}, "gpt2": "learned", "bloom": "alibi", "mpt": "alibi"}
T5_FAMILIES = ("t5", "mt5", "umt5")
EAGER_FAMILIES = ("bloom", "mpt")  # hand-written eager attention, not through transformers' AttentionInterface
PROBS_MAX_LENGTH = 2048  # output_attentions / logits only up to this length (dense (B, H, L, L) per layer)
WINDOW_IMPL = "extrap_window"  # name of _window_attention in transformers' AttentionInterface
WINDOW_CHUNK = 256  # queries per block of _window_attention
ROPE_KINDS = ("linear", "ntk", "dynamic", "ntk-by-parts", "yarn", "truncated")
HF_ROPE_KINDS = ("linear", "dynamic", "yarn", "longrope", "llama3")


def require_transformers():
    try:
        import transformers
    except ImportError:
        raise ExtrapError("hf: models need transformers: pip install 'extrap[hf]'") from None
    return transformers


def strip_prefix(path) -> str:
    s = str(path)
    return s[3:] if s.startswith("hf:") else s


def check_folder(path) -> Path:
    p = Path(strip_prefix(path)).expanduser()
    if not p.is_dir():
        what = "is a file, not a model folder" if p.exists() else "does not exist (extrap does not download)"
        raise ExtrapError(f"model folder {strip_prefix(path)} {what}")
    if not (p / "config.json").is_file():
        raise ExtrapError(f"{strip_prefix(path)} holds no config.json: not a Hugging Face model folder")
    return p


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextmanager
def load_failures(what: str):
    """Every failure of transformers' loaders as one line (``what: reason``): a damaged weights file raises
    safetensors' own error, a foreign config a KeyError, a torn tokenizer an exception of the tokenizers
    library; none of them is a bug of extrap's."""
    try:
        yield
    except ExtrapError:
        raise
    except Exception as e:
        lines = str(e).strip().splitlines()
        raise ExtrapError(f"{what}: {lines[0] if lines else type(e).__name__}") from None


def read_hf_config(folder: Path):
    transformers = require_transformers()
    with load_failures(f"not supported: cannot read {folder}/config.json"):
        return transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)


def architecture(cfg) -> str:
    archs = getattr(cfg, "architectures", None) or []
    return archs[0] if archs else str(getattr(cfg, "model_type", "unknown"))


def default_device_dtype(device=None, dtype=None) -> tuple[str, torch.dtype]:
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype is None:
        dtype = torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    elif isinstance(dtype, str):
        names = {
            "float32": torch.float32,
            "fp32": torch.float32,
            "bfloat16": torch.bfloat16,
            "bf16": torch.bfloat16,
            "float16": torch.float16,
            "fp16": torch.float16,
            "float64": torch.float64,
        }
        if dtype not in names:
            raise ExtrapError(f"dtype must be one of {', '.join(names)}, got {dtype!r}")
        dtype = names[dtype]
    return str(device), dtype
