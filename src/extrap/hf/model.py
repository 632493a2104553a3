"""HFModel: a transformers causal LM behind the :class:`extrap.model.protocol.ExtrapLM` protocol."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from extrap.errors import ExtrapError
from extrap.hf.attention import (
    attn_implementation,
    eager_attention_pre_hook,
    tap_softmax_input,
    window_attention,
)
from extrap.hf.common import EAGER_FAMILIES, PROBS_MAX_LENGTH, WINDOW_IMPL, require_transformers
from extrap.hf.rope_length import SequenceLength, hold_native
from extrap.model.kernel import consecutive
from extrap.model.protocol import Blocks, ModelShape, Output, check_temperatures
from extrap.model.scoring import chunked_nll, logits_nll


class HFCache:
    """The HF model's own KV cache (``past_key_values``), the position of its next token, and its window.

    With a window W it is a rolling cache: after every step each layer keeps the keys and values of
    its last W tokens only (003 Appendix B), and positions stay absolute.  ``seq_len`` is the length
    of the whole sequence that runs through it: a length-dependent RoPE (dynamic, longrope) takes
    its θ at every step (None: the end of the first step fixes it).
    """

    def __init__(self, window: int | None = None, seq_len: int | None = None):
        self.past, self.length, self.window, self.seq_len = None, 0, window, seq_len

    def expand(self, n: int) -> None:
        """A cache of one sequence shared by ``n`` continuations."""
        self.past.batch_repeat_interleave(n)

    def roll(self) -> None:
        """Keep the last ``window`` tokens of every layer."""
        for layer in getattr(self.past, "layers", None) or []:
            if getattr(layer, "keys", None) is not None and layer.keys.dim() == 4:
                layer.keys, layer.values = layer.keys[:, :, -self.window :], layer.values[:, :, -self.window :]


# Families whose positions have a fixed range, and the config field that sets it: GPT-2's table of
# learned absolute positions (wpe) has n_positions rows; MPT builds its ALiBi bias for max_seq_len keys.
POSITION_LIMITS = {
    "gpt2": ("n_positions", "its table of learned absolute positions has no row for it"),
    "mpt": ("max_seq_len", "MPT builds its ALiBi bias for max_seq_len positions only"),
}


# Families whose causal LM computes its logits as lm_head(base_model(...).last_hidden_state) and nothing else:
# no scale or soft-cap (as Gemma2's final_logit_softcapping or Cohere's logit_scale add).  Read in each
# family's *ForCausalLM.forward of transformers 5.24 (GPT2LMHeadModel for gpt2); the head is read through
# get_output_embeddings(), whatever the family names it.
HEAD_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gpt_neox", "gpt2", "bloom", "mpt")


def _position_limit(family: str, config) -> tuple[str, int, str] | None:
    """(config field, number of positions, why) for a family with a fixed range of positions, else None."""
    if family not in POSITION_LIMITS:
        return None
    name, why = POSITION_LIMITS[family]
    n = getattr(config, name, None)
    return (name, int(n), why) if n is not None else None


def _default_positions(positions: torch.Tensor) -> bool:
    """0, 1, ..., L - 1 (of the first sequence; none at all counts too): HF's own positions, no position ids."""
    p = positions if positions.dim() == 1 else positions[0]
    return p.numel() == 0 or consecutive(p.long())


def _first_attr(c, *names):
    """The first of ``names`` that the HF config sets (families name their sizes differently)."""
    for n in names:
        if getattr(c, n, None) is not None:
            return getattr(c, n)
    raise ExtrapError(f"not supported: {type(c).__name__} sets none of {', '.join(names)}")


class HFModel(nn.Module):
    """A transformers causal LM as an :class:`extrap.model.protocol.ExtrapLM`."""

    scheme = None  # HF positions are the family's own code, not a registry scheme
    extension = None  # a training-free RoPE extension (extrap.extend.hf)

    def __init__(self, hf_model, family: str, pe: str):
        super().__init__()
        self.hf = hf_model
        self.family = family
        c = hf_model.config
        self.cfg = ModelShape(  # pe: "hf:<family>/<kind>", plus any RoPE re-scaling applied at load
            n_layer=int(_first_attr(c, "num_hidden_layers", "n_layer", "n_layers")),
            n_head=int(_first_attr(c, "num_attention_heads", "n_head", "n_heads")),
            d_model=int(_first_attr(c, "hidden_size", "n_embd", "d_model")),
            vocab_size=int(c.vocab_size),
            pe=pe,
        )
        self.attn_modules = [
            m
            for m in hf_model.modules()
            if type(m).__name__.endswith("Attention")
            and (hasattr(m, "scaling") or hasattr(m, "inv_norm_factor") or hasattr(m, "softmax_scale"))
        ]
        if len(self.attn_modules) != self.cfg.n_layer:
            raise ExtrapError(
                f"not supported: {type(hf_model).__name__} ({len(self.attn_modules)} attention "
                f"modules found for {self.cfg.n_layer} layers)"
            )
        for m in self.attn_modules:
            for attr in ("scaling", "inv_norm_factor", "beta", "softmax_scale"):
                if hasattr(m, attr):
                    setattr(m, f"_extrap_base_{attr}", getattr(m, attr))
            m._extrap_tau, m._extrap_window = 1.0, None
            if family in EAGER_FAMILIES:
                m.register_forward_pre_hook(eager_attention_pre_hook, with_kwargs=True)
        if family not in EAGER_FAMILIES:
            require_transformers().AttentionInterface.register(WINDOW_IMPL, window_attention)
        self._tau = [1.0] * self.cfg.n_layer
        params = inspect.signature(hf_model.forward).parameters
        self._keep = "logits_to_keep" in params
        self._pos_ids = "position_ids" in params and family != "bloom"
        self.position_limit = _position_limit(family, c)
        # θ of dynamic / longrope: one per sequence (a cache's seq_len, else the call's), not per call
        self.rope_length = SequenceLength()
        hold_native(hf_model, self.rope_length)

    @property
    def shape(self) -> ModelShape:
        return self.cfg

    def check_positions(self, top: int) -> None:
        """Refuse position ``top`` (0-based) beyond the family's fixed range before the model runs.

        Past it GPT-2 would index outside its position table (an IndexError on CPU, a device-side
        assert on CUDA) and MPT would add a bias of the wrong size; this names the config field instead.
        """
        if self.position_limit is None or top < self.position_limit[1]:
            return
        name, n, why = self.position_limit
        raise ExtrapError(
            f"{self.family}: position {top} is beyond {name}={n} ({why}); this model runs at most {n} tokens"
        )

    def default_positions(self, L: int, device) -> torch.Tensor:
        return torch.arange(L, device=device)

    # ---- temperature (004) ------------------------------------------------------
    def temperatures(self) -> list[float]:
        return list(self._tau)

    def set_temperature(self, tau: float | Sequence[float]) -> None:
        taus = check_temperatures(tau, self.cfg.n_layer)
        for m, t in zip(self.attn_modules, taus):
            if hasattr(m, "_extrap_base_scaling"):
                m.scaling = m._extrap_base_scaling / t
            if hasattr(m, "_extrap_base_inv_norm_factor"):  # BLOOM: alibi.baddbmm(q, k, beta, alpha)
                m.inv_norm_factor = m._extrap_base_inv_norm_factor / t
                m.beta = m._extrap_base_beta / t
            if hasattr(m, "_extrap_base_softmax_scale"):  # MPT: q·k·softmax_scale + position_bias (pre-hook)
                m.softmax_scale = m._extrap_base_softmax_scale / t
            m._extrap_tau = t
        self._tau = taus

    def embed(self, idx: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Token embeddings (the HF model adds learned absolute positions itself)."""
        return self.hf.get_input_embeddings()(idx)

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
        if self.extension is not None and (window is not None or return_probs):
            raise ExtrapError(f"{self.extension.name}: windows and attention probabilities are not available with it")
        L = idx.shape[1]
        kw = self._inputs(idx, positions, embeds)
        if last is not None and self._keep:
            kw["logits_to_keep"] = int(last)
        if window is not None:
            if int(window) < 1:
                raise ExtrapError(f"window must be >= 1, got {window}")
            if return_probs:
                raise ExtrapError("attention probabilities with a window are not available for hf: models")
            with self._window(int(window)):
                out = self.hf(**kw)
            probs = None
        elif return_probs:
            if L > PROBS_MAX_LENGTH:
                raise ExtrapError(f"attention probabilities of hf: models only up to L={PROBS_MAX_LENGTH}")
            with attn_implementation(self.hf, "eager"):
                out = self.hf(**kw, output_attentions=True)
            probs = [[(0, a)] for a in out.attentions]
        else:
            out = self.hf(**kw)
            probs = None
        logits = out.logits
        if last is not None and logits.shape[1] != last:
            logits = logits[:, -last:]
        return Output(logits=logits, probs=probs, embeds=embeds)

    def _inputs(self, idx: torch.Tensor, positions=None, embeds=None) -> dict:
        """The keyword arguments of one uncached pass over ``idx`` (B, L), its positions checked."""
        B, L = idx.shape
        custom = positions is not None and not _default_positions(positions)
        if custom and not self._pos_ids:
            raise ExtrapError(f"{self.family}: custom position ids are not supported")
        self.check_positions(int(positions.max()) if custom else L - 1)
        kw: dict = {"use_cache": False, **({"input_ids": idx} if embeds is None else {"inputs_embeds": embeds})}
        if custom:
            kw["position_ids"] = (positions if positions.dim() == 2 else positions[None].expand(B, -1)).long()
        return kw

    @property
    def chunked_head(self) -> bool:
        """Whether :meth:`token_nll` runs the head over chunks of positions: for the families whose causal LM's
        logits are exactly ``get_output_embeddings()(base_model(...)[0])`` (:data:`HEAD_FAMILIES`)."""
        return self.family in HEAD_FAMILIES

    @torch.no_grad()
    def token_nll(self, idx, targets, positions=None, *, last: int | None = None) -> torch.Tensor:
        """-log p(targets) (B, S) float32 at the last S = ``last`` (default L) positions of one exact pass.

        :attr:`chunked_head`: the base model runs once (an extension's attention and a length-dependent
        RoPE's θ live inside it) and its output embeddings over chunks of positions; else the full logits.
        """
        t = targets if last is None else targets[:, -last:]
        if not self.chunked_head:
            return logits_nll(self(idx, positions, last=last).logits, t)
        h = self.hf.base_model(**self._inputs(idx, positions))[0]
        h = h if last is None else h[:, -last:]
        return chunked_nll(h, t, self.hf.get_output_embeddings(), self.cfg.vocab_size)

    @contextmanager
    def _window(self, W: int):
        """Every layer attends to the W most recent keys for the duration of the block."""
        for m in self.attn_modules:
            m._extrap_window = W
        try:
            with attn_implementation(self.hf, None if self.family in EAGER_FAMILIES else WINDOW_IMPL):
                yield
        finally:
            for m in self.attn_modules:
                m._extrap_window = None

    # ---- KV cache ---------------------------------------------------------------
    def new_cache(self, window: int | None = None, seq_len: int | None = None) -> HFCache:
        if window is not None:
            if int(window) < 1:
                raise ExtrapError(f"cache window must be >= 1, got {window}")
            if self.extension is not None:
                raise ExtrapError(f"{self.extension.name}: a rolling KV cache is not available with it on hf: models")
            if self.family in EAGER_FAMILIES:
                raise ExtrapError(f"a rolling KV cache is not available for {self.family} (hand-written attention)")
            transformers = require_transformers()
            if not hasattr(transformers.DynamicCache(), "layers"):
                raise ExtrapError("a rolling KV cache needs transformers >= 4.56 (DynamicCache.layers)")
        return HFCache(window, seq_len)

    @torch.no_grad()
    def step(self, idx: torch.Tensor, start: int, cache: HFCache, last: int | None = None) -> torch.Tensor:
        """Logits (B, T, V) of the tokens ``idx`` (B, T) at positions start..start+T-1, through HF's own cache
        (the last ``last`` positions' only, if given).

        A new cache may start at any position (absolute position ids); later steps continue from its end.
        A length-dependent RoPE (dynamic, longrope) rotates every step for the cache's ``seq_len``.
        """
        if cache.past is None and cache.length == 0 and start:
            if not self._pos_ids:
                raise ExtrapError(f"{self.family}: a cache that starts at position {start} needs position ids")
            cache.length = start
        if start != cache.length:
            raise ExtrapError(f"hf: models continue from the end of their cache (position {cache.length}, got {start})")
        B, T = idx.shape
        self.check_positions(start + T - 1)
        if cache.past is None:
            cache.past = require_transformers().DynamicCache()
        if cache.seq_len is None:
            cache.seq_len = start + T
        # transformers >= 5 names the cache ``cache`` and warns at ``past_key_values``, which older versions take
        name = "cache" if "cache" in inspect.signature(self.hf.forward).parameters else "past_key_values"
        kw = {"input_ids": idx, name: cache.past, "use_cache": True}
        if self._pos_ids:
            kw["position_ids"] = torch.arange(start, start + T, device=idx.device)[None].expand(B, -1)
        if last is not None and self._keep:
            kw["logits_to_keep"] = int(last)
        with self.rope_length.fixed(cache.seq_len):
            if cache.window is None:
                out = self.hf(**kw)
            else:
                with self._window(cache.window):
                    out = self.hf(**kw)
        cache.past, cache.length = getattr(out, name), start + T
        if cache.window is not None:
            cache.roll()
        return out.logits if last is None else out.logits[:, -last:]

    @torch.no_grad()
    def attention_rows(self, idx: torch.Tensor, rows: Sequence[int]) -> Iterator[tuple[int, torch.Tensor]]:
        raise ExtrapError("per-row attention probabilities are not available for hf: models")
        yield  # a generator, like GPT.attention_rows

    # ---- probes -----------------------------------------------------------------
    @torch.no_grad()
    def attention_probs(self, idx: torch.Tensor, *, upto_layer: int | None = None) -> Iterator[tuple[int, Blocks]]:
        """(layer, [(0, (B, H, L, L))]) for layers 0..upto_layer, from one eager pass with output_attentions
        (transformers returns every layer at once)."""
        last = self.cfg.n_layer - 1 if upto_layer is None else int(upto_layer)
        if not 0 <= last < self.cfg.n_layer:
            raise ExtrapError(f"layer must be in [0, {self.cfg.n_layer}), got {last}")
        probs = self(idx, return_probs=True, last=1).probs
        for layer in range(last + 1):
            yield layer, probs[layer]

    @torch.no_grad()
    def layer_logits(self, idx: torch.Tensor, layer: int = 0) -> list[torch.Tensor]:
        """Pre-softmax logits q·k·scale + bias (at the current τ) of one layer: [(B, H, L, L)], -inf = masked.

        Runs eager attention and records the input of the first softmax called inside the layer's
        attention module, then stops the forward pass (later layers are not run).
        """
        if self.extension is not None:  # eager attention would score q and k unrotated: refused, not wrong
            raise ExtrapError(f"{self.extension.name}: attention logits are not available with it on hf: models")
        L = idx.shape[1]
        if L > PROBS_MAX_LENGTH:
            raise ExtrapError(f"attention logits of hf: models only up to L={PROBS_MAX_LENGTH}")
        self.check_positions(L - 1)
        where = f"layer {layer} of {self.family}"
        s = tap_softmax_input(
            self.hf, self.attn_modules[layer], lambda: self.hf(input_ids=idx, use_cache=False), L, where
        )
        # the causal part is also set explicitly: fp16 eager masks may add a finite minimum
        return [s.masked_fill(torch.ones(L, L, dtype=torch.bool, device=s.device).triu(1), -math.inf)]

    def bias_values(self) -> None:
        return None  # the family's own bias (ALiBi slopes): see extrap.hf.theory
