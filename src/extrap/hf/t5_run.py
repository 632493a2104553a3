"""A local Hugging Face T5 checkpoint (``hf:PATH``) as an extrap run: alignment and task scoring.

004 aligns the attention of the T5 *encoder*: its softmax rows are what Algorithm 1, Props. 1-2 and
the temperature act on.  :class:`T5Model` puts a ``T5ForConditionalGeneration`` (or a
``T5EncoderModel``) behind the part of :class:`extrap.model.protocol.ExtrapLM` that :mod:`extrap.align` reads:

* ``shape``: the encoder's layers and heads; ``scheme`` None (T5's buckets are its own code);
* ``temperatures()`` / ``set_temperature(tau)``: one τ per encoder layer, through
  :func:`extrap.hf.t5.set_t5_temperature` (decoder and cross attention keep τ = 1);
* ``attention_probs`` / ``layer_logits``: the encoder's softmax rows (one layer at a time) and
  pre-softmax logits (q·k + position bias, at the current τ) under eager attention;
* ``encode`` / ``decode``, ``has_decoder``, ``decoder_start_token_id`` and ``eos_token_id`` for task
  scoring (:mod:`extrap.tasks.seq2seq`).

Together: :class:`extrap.model.protocol.Seq2SeqLM`, the protocol that alignment and task scoring read.
A T5 is not a causal LM (:class:`extrap.model.protocol.ExtrapLM`): evaluation, ERF and generation, which
need one, are refused in one line when they reach for the forward pass, the embeddings or the KV cache.
:func:`extrap.load` (``extrap.run.load``, the one place that tells runs apart) opens a T5 ``hf:PATH`` with
:func:`load_hf_t5`, which returns the model inside an :class:`extrap.hf.HFRun` (tokenizer, provenance,
corpus).  T5's L_tr: the config's ``n_positions`` when it has one, else 512, the input length of T5's
pre-training (Raffel et al. 2020, §3.1.2) and of 004 Table 1.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn

from extrap.errors import ExtrapError
from extrap.hf.attention import attn_implementation, tap_softmax_input
from extrap.hf.common import (
    architecture,
    check_folder,
    default_device_dtype,
    load_failures,
    read_hf_config,
    require_transformers,
)
from extrap.hf.load import HFRun, run_config
from extrap.hf.t5 import attention_modules, get_t5_temperature, set_t5_temperature
from extrap.hf.tokenizer import HFTokenizer
from extrap.model.protocol import Blocks, ModelShape, check_temperatures

T5_TRAIN_LENGTH = 512  # T5's pre-training input length (Raffel et al. 2020, §3.1.2)
CAUSAL_ONLY = frozenset({"embed", "default_positions", "new_cache", "step", "attention_rows"})  # of ExtrapLM


class NotCausalError(ExtrapError, AttributeError):
    """A T5 asked for what only a causal LM has.  An AttributeError too, so a protocol check
    (``isinstance(model, ExtrapLM)``) says no instead of failing."""


def _config_value(config, name: str):
    try:
        return getattr(config, name)
    except AttributeError:  # transformers' configs raise for unset attributes
        return None


class T5Model(nn.Module):
    """A T5 model as :class:`extrap.model.protocol.Seq2SeqLM`: its encoder for alignment, both halves for tasks."""

    scheme = None

    def __init__(self, hf_model, pe: str = "hf:t5/t5-bias"):
        super().__init__()
        self.hf = hf_model
        c = hf_model.config
        self.encoder_attention = [m for _, m in attention_modules(hf_model, "encoder")]
        self.cfg = ModelShape(
            n_layer=len(self.encoder_attention),
            n_head=int(c.num_heads),
            d_model=int(c.d_model),
            vocab_size=int(c.vocab_size),
            pe=pe,
        )
        self.has_decoder = hasattr(hf_model, "decoder")  # False for a T5EncoderModel (alignment only)
        gen = getattr(hf_model, "generation_config", None)
        start = _config_value(c, "decoder_start_token_id")
        if start is None and gen is not None:
            start = getattr(gen, "decoder_start_token_id", None)
        self.decoder_start_token_id = int(start if start is not None else (_config_value(c, "pad_token_id") or 0))
        self.eos_token_id = _config_value(c, "eos_token_id")

    @property
    def shape(self) -> ModelShape:
        return self.cfg

    def not_causal(self) -> NotCausalError:
        return NotCausalError(
            f"not supported: {type(self.hf).__name__} is an encoder-decoder, not a causal LM; extrap aligns its "
            "encoder (extrap align), scores tasks with it (extrap task score) and reads its buckets "
            "(`extrap theory --checkpoint hf:PATH`)"
        )

    def forward(self, *args, **kwargs):
        raise self.not_causal()

    def __getattr__(self, name: str):
        if name in CAUSAL_ONLY:
            raise self.not_causal()
        return super().__getattr__(name)

    # ---- temperature (004: the encoder's softmax) ------------------------------
    def temperatures(self) -> list[float]:
        return get_t5_temperature(self.hf, "encoder")

    def set_temperature(self, tau: float | Sequence[float]) -> None:
        taus = check_temperatures(tau, self.cfg.n_layer)
        if taus != self.temperatures():
            set_t5_temperature(self.hf, taus, "encoder")

    # ---- task scoring -----------------------------------------------------------
    def encode(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's last hidden states (B, L, d)."""
        return self.hf.get_encoder()(input_ids=ids, attention_mask=attention_mask).last_hidden_state

    def decode(
        self, hidden: torch.Tensor, decoder_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits (B, T, V) of the decoder on ``decoder_ids`` (B, T), attending to the encoder output."""
        if not self.has_decoder:
            raise ExtrapError(f"{type(self.hf).__name__} has no decoder: load a T5ForConditionalGeneration")
        from transformers.modeling_outputs import BaseModelOutput

        out = self.hf(
            encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
            attention_mask=attention_mask,
            decoder_input_ids=decoder_ids,
            use_cache=False,
        )
        return out.logits

    # ---- probes -----------------------------------------------------------------
    @torch.no_grad()
    def attention_probs(self, idx: torch.Tensor, *, upto_layer: int | None = None) -> Iterator[tuple[int, Blocks]]:
        """(layer, [(0, (B, H, L, L))]) of the encoder for layers 0..upto_layer, one layer at a time.

        The encoder's blocks are run one by one as ``T5Stack`` runs them (embedding, then each block
        with the previous block's unscaled position bias; no padding mask), so only one layer's
        probabilities exist at once and layers after ``upto_layer`` are not run.
        """
        last = self.cfg.n_layer - 1 if upto_layer is None else int(upto_layer)
        if not 0 <= last < self.cfg.n_layer:
            raise ExtrapError(f"layer must be in [0, {self.cfg.n_layer}), got {last}")
        encoder = self.hf.get_encoder()
        seen: list[torch.Tensor] = []
        with attn_implementation(self.hf, "eager"):
            hidden, bias = encoder.dropout(encoder.embed_tokens(idx)), None
            for layer, block in enumerate(encoder.block[: last + 1]):
                hook = self.encoder_attention[layer].register_forward_hook(lambda m, a, out: seen.append(out[2]))
                try:
                    hidden, bias, _ = block(hidden, attention_mask=None, position_bias=bias)
                finally:
                    hook.remove()
                probs = seen.pop()
                if probs is None:
                    raise ExtrapError("T5 attention returned no probabilities under eager attention")
                yield layer, [(0, probs)]

    @torch.no_grad()
    def layer_logits(self, idx: torch.Tensor, layer: int = 0) -> list[torch.Tensor]:
        """Pre-softmax logits q·k + position bias (at the current τ) of one encoder layer: [(B, H, L, L)]."""
        L = idx.shape[1]
        encode = lambda: self.hf.get_encoder()(input_ids=idx)  # noqa: E731
        return [tap_softmax_input(self.hf, self.encoder_attention[layer], encode, L, f"encoder layer {layer}")]

    def bias_values(self) -> None:
        return None  # T5's bucket tables: see extrap.hf.theory


def load_hf_t5(
    path, dtype=None, device=None, train_length: int | None = None, corpus: str = "stdlib", rope=None, factor=None
) -> HFRun:
    """A local T5 folder (model and tokenizer, nothing downloaded) as an :class:`extrap.hf.HFRun` with a
    :class:`T5Model`; ``T5EncoderModel`` checkpoints load without a decoder (alignment only).

    Called by :func:`extrap.run.load` for a T5 ``hf:PATH``; use that."""
    folder = check_folder(path)
    hf_cfg = read_hf_config(folder)
    mtype = str(getattr(hf_cfg, "model_type", ""))
    if mtype != "t5":
        raise ExtrapError(f"not supported: {architecture(hf_cfg)} ({mtype}); extrap reads T5 (model_type t5)")
    if rope is not None or factor is not None:
        raise ExtrapError("RoPE re-scaling does not apply to T5 (relative position buckets)")
    device, dt = default_device_dtype(device, dtype)
    hf_model, tok = _from_pretrained(folder, architecture(hf_cfg) == "T5EncoderModel", dt)
    model = T5Model(hf_model.to(device).eval())
    L_tr, source = _train_length(train_length, _config_value(hf_cfg, "n_positions"))
    config = run_config(model.shape, hf_cfg, folder, (L_tr, source), corpus, dt, device)
    return HFRun(model=model, tokenizer=HFTokenizer(tok, folder), config=config, path=f"hf:{folder}")


def _from_pretrained(folder, encoder_only: bool, dtype):
    transformers = require_transformers()
    cls = transformers.T5EncoderModel if encoder_only else transformers.T5ForConditionalGeneration
    with load_failures(f"cannot load a T5 model and tokenizer from {folder}"):
        hf_model = cls.from_pretrained(str(folder), local_files_only=True, dtype=dtype)
        tok = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return hf_model, tok


def _train_length(given: int | None, n_positions) -> tuple[int, str]:
    """L_tr and where it came from: the caller, the config's ``n_positions``, or T5's 512."""
    if given is not None:
        length, source = int(given), "given"
    elif n_positions:
        length, source = int(n_positions), "config"
    else:
        length, source = T5_TRAIN_LENGTH, f"t5 default ({T5_TRAIN_LENGTH})"
    if length < 2:
        raise ExtrapError(f"training length must be >= 2, got {length}")
    return length, source
