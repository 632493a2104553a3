"""What every consumer of a language model needs of it: the :class:`ExtrapLM` protocol.

Evaluation, ERF, attention alignment, task scoring and generation accept any model that
implements :class:`ExtrapLM`: extrap's own :class:`extrap.model.GPT` and the Hugging Face
adapter :class:`extrap.hf.HFModel`.  They never reach into a model's modules; what they
need beyond the forward pass is a method here:

* ``shape`` (:class:`ModelShape`) and ``scheme`` (the parsed registry scheme, or None when
  the positions are not a registry scheme, as in an ``hf:`` model);
* the softmax temperature τ of every layer (004): ``temperatures()`` / ``set_temperature()``,
  and :func:`temperature` to set it for a block of code;
* ``token_nll`` (and ``chunked_head``): the losses of one exact pass without its (L, V) logits where
  the model can (evaluation at 32k-128k tokens, :mod:`extrap.model.scoring`);
* a KV cache: ``new_cache(window, seq_len)`` and ``step(idx, start, cache)``, which runs new tokens
  against the cached keys;
* probes: ``attention_probs`` streams each layer's softmax probabilities (so statistics
  need only one layer in memory at a time), ``layer_logits`` returns one layer's
  pre-softmax logits, ``bias_values`` each layer's bias parameters.

Shapes: idx (B, L) token ids; positions (L,) or (B, L); logits (B, L, V).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from extrap.errors import ExtrapError
from extrap.positional import Scheme

# Probability or logit blocks of one layer: (key offset, (B, H, Lq, Lk)) in query order.
Blocks = list[tuple[int, torch.Tensor]]


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    pe: str  # the scheme spec, or "hf:<family>/<positions>" for an hf: model

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


@dataclass
class Output:
    logits: torch.Tensor  # (B, L_out, V)
    probs: list[Blocks] | None = None  # per layer, with return_probs
    embeds: torch.Tensor | None = None  # (B, L, d) input embeddings, for gradient ERF


@runtime_checkable
class ExtrapLM(Protocol):
    """A causal LM as evaluation, ERF, alignment, tasks and generation use it."""

    training: bool

    @property
    def shape(self) -> ModelShape: ...

    @property
    def scheme(self) -> Scheme | None: ...

    def forward(
        self,
        idx: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        window: int | None = None,
        last: int | None = None,
        return_probs: bool = False,
        embeds: torch.Tensor | None = None,
    ) -> Output:
        """Logits for ``idx``; ``last``: only for the last positions; ``window``: each query sees only its
        ``window`` most recent keys; ``return_probs``: every layer's probability blocks; ``embeds``: input
        embeddings (B, L, d) to use instead of looking ``idx`` up."""
        ...

    __call__ = forward  # calling the model runs forward, as torch.nn.Module.__call__ does

    chunked_head: bool  # token_nll holds one chunk of positions' logits at a time (else every scored one's)

    def token_nll(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        last: int | None = None,
    ) -> torch.Tensor:
        """-log p(targets) (B, S) float32 at the last S = ``last`` (default L) positions of one exact forward pass;
        ``targets`` (B, L) is ``idx`` shifted by one.  With ``chunked_head`` the body runs once and the head over
        chunks of positions (:func:`extrap.model.scoring.chunked_nll`): no (L, V) logits exist."""
        ...

    def embed(self, idx: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Input embeddings (B, L, d) as the first layer receives them (an absolute PE included)."""
        ...

    def default_positions(self, length: int, device) -> torch.Tensor: ...

    def temperatures(self) -> list[float]:
        """τ of every layer."""
        ...

    def set_temperature(self, tau: float | Sequence[float]) -> None:
        """One τ for every layer, or one per layer: each softmax becomes softmax(logits / τ)."""
        ...

    def new_cache(self, window: int | None = None, seq_len: int | None = None) -> Any:
        """An empty KV cache for :meth:`step`; ``window``: keep only the keys of the last ``window`` tokens.
        ``seq_len``: the length of the whole sequence that will run through it, which fixes the θ of a
        length-dependent RoPE scaling for every step (None: the end of the first step fixes it)."""
        ...

    def step(self, idx: torch.Tensor, start: int, cache: Any, last: int | None = None) -> torch.Tensor:
        """Logits (B, T, V) of the T tokens ``idx`` (B, T) at positions start..start+T-1, attending to the
        cache and to each other; their keys and values are added to the cache.  ``last``: the logits of the
        last ``last`` positions only (B, last, V): a long prompt's prefill needs its last position's."""
        ...

    def attention_probs(self, idx: torch.Tensor, *, upto_layer: int | None = None) -> Iterator[tuple[int, Blocks]]:
        """(layer, probability blocks) for layers 0..upto_layer (default: all), one layer at a time."""
        ...

    def layer_logits(self, idx: torch.Tensor, layer: int = 0) -> list[torch.Tensor]:
        """Pre-softmax logits of one layer at the current τ, as query blocks (B, H, Lq, Lk) over keys [0, Lk);
        -inf where masked.  softmax of these is the layer's attention."""
        ...

    def attention_rows(self, idx: torch.Tensor, rows: Sequence[int]) -> Iterator[tuple[int, torch.Tensor]]:
        """(layer, (B, H, R, L)) exact attention probabilities of the query rows ``rows`` only, layer by layer
        (ExtrapError where the model cannot give them)."""
        ...

    def bias_values(self) -> list[dict[str, torch.Tensor]] | None:
        """Each layer's bias parameter values, (H, ...) each; None without a bias RPE."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...


@runtime_checkable
class Seq2SeqLM(Protocol):
    """An encoder-decoder (T5, :class:`extrap.hf.t5_run.T5Model`) as alignment and task scoring use it.

    004 aligns the *encoder*: ``shape``, the temperature and the probes are the encoder's self-attention
    (as :class:`ExtrapLM` has them for a causal LM).  Task scoring reads the prompt with ``encode`` and
    scores the answer with ``decode``, teacher-forced from ``decoder_start_token_id``.
    """

    training: bool
    has_decoder: bool  # False for an encoder-only checkpoint: it aligns, but cannot score tasks
    decoder_start_token_id: int
    eos_token_id: int | None  # appended to every encoder input (None: nothing)

    @property
    def shape(self) -> ModelShape: ...

    def temperatures(self) -> list[float]:
        """τ of every encoder layer."""
        ...

    def set_temperature(self, tau: float | Sequence[float]) -> None:
        """One τ for every encoder layer, or one per layer."""
        ...

    def encode(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's last hidden states (B, L, d) for ``ids`` (B, L); ``attention_mask`` (B, L): 1 = token."""
        ...

    def decode(
        self, hidden: torch.Tensor, decoder_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits (B, T, V) of the decoder on ``decoder_ids`` (B, T), attending to ``hidden`` (B, L, d)."""
        ...

    def attention_probs(self, idx: torch.Tensor, *, upto_layer: int | None = None) -> Iterator[tuple[int, Blocks]]:
        """(layer, probability blocks) of the encoder for layers 0..upto_layer, one layer at a time."""
        ...

    def layer_logits(self, idx: torch.Tensor, layer: int = 0) -> list[torch.Tensor]:
        """Pre-softmax logits of one encoder layer at the current τ: [(B, H, L, L)]."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...

    def eval(self) -> Any: ...

    def train(self, mode: bool = True) -> Any: ...


def check_temperatures(tau: float | Sequence[float], n_layer: int) -> list[float]:
    """One τ per layer from one value or a sequence; each must be positive and finite."""
    taus = [float(t) for t in tau] if isinstance(tau, (list, tuple)) else [float(tau)] * n_layer
    if len(taus) != n_layer:
        raise ExtrapError(f"temperature: need {n_layer} values, got {len(taus)}")
    if any(not (t > 0 and math.isfinite(t)) for t in taus):
        raise ExtrapError("temperature must be a positive finite number")
    return taus


@contextmanager
def temperature(model, tau: float | Sequence[float] | None = None):
    """Set τ (one value or one per layer; None: leave it) in the block, then restore the previous τs.

    ``model`` needs only ``temperatures()`` and ``set_temperature()``.
    """
    old = model.temperatures()
    try:
        if tau is not None:
            model.set_temperature(tau)
        yield model
    finally:
        model.set_temperature(old)


def model_device(model) -> torch.device:
    """The device of the model's first parameter (CPU for a model without parameters)."""
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


__all__ = [
    "Blocks",
    "ExtrapLM",
    "ModelShape",
    "Output",
    "Seq2SeqLM",
    "check_temperatures",
    "model_device",
    "temperature",
]
