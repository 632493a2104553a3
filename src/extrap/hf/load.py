"""``hf:PATH`` as an extrap run: loading, the run record, config summaries."""

from __future__ import annotations

from dataclasses import dataclass, replace

from extrap.errors import ExtrapError
from extrap.hf.common import (
    CAUSAL_FAMILIES,
    T5_FAMILIES,
    architecture,
    check_folder,
    default_device_dtype,
    load_failures,
    read_hf_config,
    require_transformers,
    sha256_file,
)
from extrap.hf.model import HFModel
from extrap.hf.rope import apply_rope
from extrap.hf.tokenizer import HFTokenizer
from extrap.io import run_metadata
from extrap.results.evaluation import Provenance


@dataclass
class HFRunConfig:
    """What extrap knows of an hf: checkpoint: its shape, L_tr and where it came from."""

    pe: str
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    architecture: str
    model_type: str
    train_length: int
    train_length_source: str  # "config", "bloom default (2048)", or "given" by the caller
    corpus: str  # the evaluation corpus (an hf: model has no training corpus extrap knows)
    hf_path: str
    config_hash: str
    dtype: str
    device: str
    rope: dict | None = None  # RoPE re-scaling applied at load: kind, factor, ...


@dataclass
class HFRun:
    """A local Hugging Face causal LM behind the :class:`extrap.run.Run` protocol."""

    model: HFModel
    tokenizer: HFTokenizer
    config: HFRunConfig
    path: str
    step: int | None = None
    corpus_hash: str | None = None  # of the evaluation corpus, once it is loaded

    def __iter__(self):
        return iter((self.model, self.tokenizer, self.config))

    @property
    def pe(self) -> str:
        return self.config.pe

    @property
    def train_length(self) -> int:
        return self.config.train_length

    @property
    def seed(self) -> None:
        return None

    @property
    def task(self) -> None:
        return None

    @property
    def corpus(self) -> str:
        return self.config.corpus

    def use_corpus(self, name: str) -> None:
        self.config.corpus = name
        self.corpus_hash = None

    def eval_corpus(self):
        """The chosen evaluation corpus; its hash is recorded, as there is no training corpus to compare."""
        from extrap.data import load_corpus

        corpus = load_corpus(self.corpus)
        self.corpus_hash = corpus.hash
        return corpus

    def use_attention_backend(self, name: str) -> None:
        raise ExtrapError("the attention backend cannot be chosen for hf: models")

    def checkpoint_bias(self) -> None:
        return None  # its bias is read from config and weights by `extrap theory --checkpoint hf:PATH`

    def provenance(self) -> Provenance:
        c = self.config
        source = {"hf_path": c.hf_path, "config_hash": c.config_hash, "dtype": c.dtype}
        source.update({"rope": c.rope} if c.rope else {})
        return Provenance(**run_metadata(None, self.corpus_hash), source={**source, "corpus": c.corpus})


def is_t5_checkpoint(path) -> bool:
    """Whether the local ``hf:PATH`` folder holds a T5 (its config's model_type is a T5 family)."""
    return str(getattr(read_hf_config(check_folder(path)), "model_type", "")) in T5_FAMILIES


def load_hf(
    path,
    dtype=None,
    device=None,
    rope: str | None = None,
    factor: float | None = None,
    train_length: int | None = None,
    corpus: str = "stdlib",
) -> HFRun:
    """An HF causal LM from a local folder as an extrap run (see the module docstring)."""
    folder = check_folder(path)
    hf_cfg = read_hf_config(folder)
    mtype = str(getattr(hf_cfg, "model_type", ""))
    if mtype in T5_FAMILIES:
        raise ExtrapError(
            f"not supported: {architecture(hf_cfg)} is an encoder-decoder; open it with extrap.load "
            f"(alignment and task scoring) or `extrap theory --checkpoint hf:PATH`"
        )
    if mtype not in CAUSAL_FAMILIES:
        raise ExtrapError(f"not supported: {architecture(hf_cfg)}")
    device, dt = default_device_dtype(device, dtype)
    hf_model, tok = local_pretrained(folder, dt)
    hf_model.to(device).eval()
    pe = f"hf:{mtype}/{CAUSAL_FAMILIES[mtype]}"
    model = HFModel(hf_model, mtype, pe)
    n_pos = (
        getattr(hf_cfg, "max_position_embeddings", None)
        or getattr(hf_cfg, "n_positions", None)
        or getattr(hf_cfg, "max_seq_len", None)
    )
    train_length, tl_source = _train_length(train_length, n_pos, mtype, folder)
    rope_info = None
    if rope is not None:
        rope_info = apply_rope(model, rope, factor, train_length)
        model.cfg = replace(model.cfg, pe=f"{pe}+{rope}x{rope_info['factor']:g}")
    elif factor is not None:
        raise ExtrapError("a RoPE factor needs a RoPE scaling (rope)")
    config = run_config(model.shape, hf_cfg, folder, (train_length, tl_source), corpus, dt, device, rope_info)
    return HFRun(model=model, tokenizer=HFTokenizer(tok, folder), config=config, path=f"hf:{folder}")


def run_config(shape, hf_cfg, folder, train_length: tuple[int, str], corpus, dtype, device, rope=None) -> HFRunConfig:
    """What an hf: run records: the loaded model's shape, where it came from (config hash) and how it runs."""
    return HFRunConfig(
        pe=shape.pe,
        n_layer=shape.n_layer,
        n_head=shape.n_head,
        d_model=shape.d_model,
        vocab_size=shape.vocab_size,
        architecture=architecture(hf_cfg),
        model_type=str(getattr(hf_cfg, "model_type", "")),
        train_length=train_length[0],
        train_length_source=train_length[1],
        corpus=corpus,
        hf_path=str(folder),
        config_hash=sha256_file(folder / "config.json"),
        dtype=str(dtype).replace("torch.", ""),
        device=str(device),
        rope=rope,
    )


def local_pretrained(folder, dtype):
    """The transformers model and tokenizer in ``folder`` (local files only: nothing is downloaded)."""
    transformers = require_transformers()
    with load_failures(f"cannot load a model from {folder}"):
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=dtype)
    with load_failures(f"{folder} has no usable tokenizer"):
        tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return hf_model, tok


def _train_length(given: int | None, n_pos: int | None, mtype: str, folder) -> tuple[int, str]:
    """L_tr and where it came from: the caller, the config's context length, or BLOOM's known 2048."""
    if given is not None:
        length, source = int(given), "given"
    elif n_pos is not None:
        length, source = int(n_pos), "config"
    elif mtype == "bloom":  # ALiBi: the config stores no length; BLOOM was trained at 2048 tokens
        length, source = 2048, "bloom default (2048)"
    else:
        raise ExtrapError(f"{folder}: the config gives no context length; give the training length")
    if length < 2:
        raise ExtrapError(f"training length must be >= 2, got {length}")
    return length, source
