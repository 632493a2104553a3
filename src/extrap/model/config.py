"""The model's one config: a dataclass, validated on construction, saved in every run."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from extrap import positional
from extrap.errors import ExtrapError
from extrap.model.shifted_sparse import s2_ratio


@dataclass
class ModelConfig:
    vocab_size: int = 256
    n_layer: int = 4
    d_model: int = 128
    n_head: int = 4
    d_ff: int = 0  # 0 -> 4 * d_model
    pe: str = "alibi"  # any registry spec, e.g. "kerple-log", "window:64", "-2*log(n)"
    positions: str = "contiguous"  # training position ids: contiguous | randomized:max=N | pose:target=N
    attention: str = "full"  # training attention: full | s2[:ratio=R] (LongLoRA's S²-Attn; inference runs full)
    tie_embeddings: bool = False
    embed_std: float = 1.0  # N(0,1) token embeddings keep an additive APE from swamping them
    dropout: float = 0.0
    attn_block: int = 256  # queries per block of the biased attention (long inputs use up to L/8)
    attn_backend: str = (
        "auto"  # auto | blocked | flex | flex-formula | flex-table (FlexAttention: GPU, or CPU inference)
    )

    def __post_init__(self):
        for name in ("vocab_size", "n_layer", "d_model", "n_head", "attn_block"):
            if int(getattr(self, name)) <= 0:
                raise ExtrapError(f"model: {name} must be positive, got {getattr(self, name)}")
        if self.d_ff < 0:
            raise ExtrapError(f"model: d_ff must be >= 0, got {self.d_ff}")
        if self.d_model % self.n_head:
            raise ExtrapError(f"model: n_head={self.n_head} does not divide d_model={self.d_model}")
        from extrap.model.attention import BACKENDS

        if self.attn_backend not in BACKENDS:
            raise ExtrapError(f"model: attn_backend must be one of {', '.join(BACKENDS)}, got {self.attn_backend!r}")
        if not 0 <= self.dropout < 1:
            raise ExtrapError(f"model: dropout must be in [0, 1), got {self.dropout}")
        scheme = positional.get(self.pe)  # validates the spec early; the model parses it once more, for itself
        if self.attn_backend == "flex-table" and getattr(scheme, "flex_query", False):
            raise ExtrapError(f"model: {self.pe} depends on the query position: no r(t) table for flex-table")
        if s2_ratio(self.attention) is not None and (scheme.adds_bias or not (scheme.rotates or scheme.name == "nope")):
            raise ExtrapError(f"model: attention {self.attention} (S²-Attn) needs a rotary PE or NoPE, not {self.pe}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        from extrap.io import strict_dataclass

        return strict_dataclass(cls, d, "model config")
