"""A small GPT-style causal LM that accepts every positional scheme in the registry.

Pre-LayerNorm blocks (attention, then a 4x GELU MLP), optional tied embeddings,
and one :class:`ModelConfig` dataclass.  Positional information enters in one of three ways,
decided by the scheme's capabilities, or through :mod:`extrap.model.pe_layers` (survey 002's four):

* ``adds_bias``: r(t) from the scheme's function, added to the logits block by block
  (:mod:`extrap.model.attention`), with learnable parameters per layer;
* ``embeds``: an absolute embedding added to the token embedding;
* ``rotates``: queries and keys rotated by the scheme.

:class:`GPT` implements :class:`extrap.model.protocol.ExtrapLM`.  The layer loop is written once
(``GPT._run_blocks``): the full and windowed forward, the KV-cache step and the probes all run it,
each layer through :meth:`Attention.forward` with its keyword arguments (``window``, ``cache``,
``return_probs``, ``return_logits``, ``rows``), and every attention through one kernel
(:mod:`extrap.model.kernel`, by way of :func:`extrap.model.attention.attend`).

Shapes: idx (B, L) token ids; positions (L,) or (B, L); logits (B, L, V).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.nn as nn

from extrap import positional
from extrap.errors import ExtrapError
from extrap.model.attention import BiasContext, attend, attend_rows, toeplitz_table
from extrap.model.config import ModelConfig
from extrap.model.kernel import consecutive
from extrap.model.kv_cache import KVCache, LayerCache
from extrap.model.pe_layers import SURVEY_KINDS, layer_module, model_module
from extrap.model.protocol import Blocks, ModelShape, Output, check_temperatures
from extrap.model.scoring import chunked_nll
from extrap.model.shifted_sparse import group_size, s2_ratio, shifted_sparse_attention
from extrap.positional.content import ContentBias
from extrap.precision import autocast


class Attention(nn.Module):
    extend = None  # a training-free RoPE extension (extrap.extend): it rotates q and k itself

    def __init__(self, cfg: ModelConfig, scheme: positional.Scheme):
        super().__init__()
        self.cfg, self.scheme = cfg, scheme
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.bias_params = nn.ParameterDict()
        if scheme.adds_bias:
            shape = (cfg.n_head, cfg.head_dim) if isinstance(scheme, ContentBias) else (cfg.n_head,)  # Shaw: Dh
            stored = scheme.to_stored(scheme.init_values(*shape), cfg.n_head)
            learnable = {q.name: q.learnable for q in scheme.params(cfg.n_head)}
            for name, value in stored.items():
                self.bias_params[name] = nn.Parameter(value.float(), requires_grad=learnable[name])
        self.pe_layer = layer_module(scheme, cfg)  # CoPE: the layer's own attention
        # per-layer softmax temperature τ (004): logits / τ.  A buffer, never a weight edit.
        self.register_buffer("temperature", torch.ones(()), persistent=False)
        self.s2 = s2_ratio(cfg.attention)  # LongLoRA's S²-Attn group ratio while training (None: full attention)

    def _causal(self, q, k, v):
        """Plain causal attention of one group (S²-Attn: no bias, the schemes it allows add none)."""
        ctx = BiasContext(None, {}, torch.arange(q.shape[2], device=q.device), contiguous=True)
        return attend(q, k, v, ctx, self.temperature, self.cfg.attn_block, backend=self.cfg.attn_backend)[0]

    def bias_values(self) -> dict[str, torch.Tensor]:
        return self.scheme.values(dict(self.bias_params), self.cfg.n_head)

    def bias_context(
        self, positions, window=None, dtype=torch.float32, device="cpu", table_cache=None, own_tables=False, seg=None
    ) -> BiasContext:
        """Everything the attention needs to add r(i - j) for these positions (see attention.py).

        ``table_cache`` keeps r(t) tables by (span, dtype, device): shared across layers only for
        parameter-free schemes, or this layer's own (``own_tables``, a KV cache) for any scheme.
        ``seg`` (B, L): BiPE's segment ids, at which r is read (the mask stays the tokens').
        """
        ctx = BiasContext(None, {}, positions, window, contiguous=seg is None and consecutive(positions))
        if not self.scheme.adds_bias:
            return ctx
        ctx.scheme, ctx.values, ctx.segments = self.scheme, self.bias_values(), seg
        L, rel = positions.shape[-1], (positions if seg is None else seg)
        if self.scheme.is_toeplitz:
            span = int(rel.max() - rel.min()) if rel.numel() else 0
            if window is not None:
                span = min(span, window - 1)
            shareable = own_tables or not any(p.requires_grad for p in self.bias_params.values())
            if table_cache is not None and shareable:
                key = (span, dtype, device)
                if key not in table_cache:
                    table_cache[key] = toeplitz_table(self.scheme, ctx.values, span, dtype, device)
                ctx.table = table_cache[key]
            else:
                ctx.table = toeplitz_table(self.scheme, ctx.values, span, dtype, device)
        elif ctx.contiguous:  # FIRE: queries i <= toeplitz_until still share one r(t) table
            rows = min(L, math.floor(self.scheme.toeplitz_until(ctx.values)) + 1)
            if rows > 0:
                ctx.table = toeplitz_table(self.scheme, ctx.values, rows - 1, dtype, device)
                ctx.toeplitz_rows = rows
        return ctx

    def heads(self, x, positions, seq_len: int | None = None, qkv_bias=None):
        """x (B, L, d) -> q, k, v, each (B, H, L, Dh), with q and k rotated for a rotary scheme.

        ``seq_len``: the length of the whole sequence (a KV cache's), which fixes a length-dependent θ.
        ``qkv_bias``: (…, L, 3d) position-dependent q/k/v biases (FLOATER, Liu et al. 2020).
        """
        B, L, _ = x.shape
        qkv = self.qkv(x) if qkv_bias is None else self.qkv(x) + qkv_bias
        q, k, v = qkv.view(B, L, 3, self.cfg.n_head, self.cfg.head_dim).permute(2, 0, 3, 1, 4)
        if self.scheme.rotates and self.extend is None:
            q, k = self.scheme.rotate(q, k, positions, seq_len=seq_len)
        return q, k, v

    def forward(
        self,
        x,
        positions,
        *,
        window: int | None = None,
        return_probs: bool = False,
        return_logits: bool = False,
        rows: Sequence[int] | None = None,
        cache: LayerCache | None = None,
        table_cache: dict | None = None,
        seq_len: int | None = None,
        segments: torch.Tensor | None = None,
        qkv_bias: torch.Tensor | None = None,
    ):
        """x (B, L, d) -> (B, L, d), and the layer's probe when asked: its probability or pre-softmax
        logit blocks, or the exact probabilities (B, H, R, L) of the query ``rows``.

        ``cache``: x holds new tokens at ``positions``; they attend to the cached keys and to each
        other, and their keys and values join the cache.  ``table_cache`` shares r(t) tables across layers.
        ``seq_len``: the length of the whole sequence, which fixes a length-dependent RoPE's θ (a KV cache's).
        ``segments`` (B, L): BiPE's segment ids, the positions of the rotation or bias (the mask stays the tokens').
        """
        B, L, _ = x.shape
        q, k, v = self.heads(x, positions if segments is None else segments, seq_len, qkv_bias)
        if (
            self.training
            and self.s2 is not None
            and self.extend is None
            and cache is None
            and not (return_probs or return_logits or rows)
        ):
            y = shifted_sparse_attention(q, k, v, group_size(L, self.s2), self._causal)  # LongLoRA, training only
            return self.proj(y.transpose(1, 2).reshape(B, L, -1)), None
        if self.extend is not None:  # q and k unrotated; the extension attends (and caches keys so)
            record = "probs" if return_probs else ("logits" if return_logits else None)
            y, probe = self.extend(self, q, k, v, positions, cache, seq_len, window, record, rows)
            return self.proj(y.transpose(1, 2).reshape(B, L, -1)), probe
        tables, own_tables = table_cache, False
        if cache is not None:
            if return_probs or return_logits or rows is not None:
                raise ExtrapError("attention probes are not available with a KV cache")
            if cache.window is not None:
                window = cache.window if window is None else min(window, cache.window)
            if cache.keys is not None:  # new tokens against the cached keys: this layer's own tables
                tables, own_tables = cache.tables, True
            k, v, positions = cache.extend(k, v, positions)  # the keys: the cached ones, then these
        ctx = self.bias_context(positions, window, x.dtype, x.device, tables, own_tables, segments)
        if self.pe_layer is not None:  # CoPE: its gates need q·k, so it runs its own attention
            record = "probs" if return_probs else ("logits" if return_logits else None)
            y, probe = self.pe_layer(q, k, v, positions, window, self.temperature, self.cfg.attn_block, record)
            probe = probe if rows is None else self.pe_layer.rows(q, k, positions, self.temperature, rows)
        else:
            kw = dict(return_probs=return_probs, backend=self.cfg.attn_backend, return_logits=return_logits)
            y, probe = attend(q, k, v, ctx, temperature=self.temperature, block=self.cfg.attn_block, **kw)
            probe = probe if rows is None else attend_rows(q, k, ctx, self.temperature, rows)
        return self.proj(y.transpose(1, 2).reshape(B, L, -1)), probe


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, scheme: positional.Scheme):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg, scheme)
        d_ff = cfg.d_ff or 4 * cfg.d_model
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, d_ff), nn.GELU(), nn.Linear(d_ff, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, positions, **attn_kw):
        """``attn_kw``: the keyword arguments of :meth:`Attention.forward`."""
        a, blocks = self.attn(self.ln1(x), positions, **attn_kw)
        x = x + self.drop(a)
        return x + self.drop(self.mlp(self.ln2(x))), blocks


class GPT(nn.Module):
    """The extrap LM; implements :class:`extrap.model.protocol.ExtrapLM`."""

    extension = None  # a training-free RoPE extension (extrap.extend.extend_model)
    compute_dtype = torch.float32  # forward and step run under autocast to this (extrap.precision)
    chunked_head = True  # token_nll runs the head over chunks of positions (extrap.model.scoring)

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.scheme = s = positional.get(cfg.pe)
        self.shape = ModelShape(cfg.n_layer, cfg.n_head, cfg.d_model, cfg.vocab_size, cfg.pe)
        if not (isinstance(s, positional.BiasRPE) or s.embeds or s.rotates or s.kind in SURVEY_KINDS):
            raise ExtrapError(f"model: scheme kind {self.scheme.kind!r} is not supported")
        self.pe_module = model_module(s, cfg)  # complex, FLOATER, BiPE: see model/pe_layers.py
        self.tok = nn.Embedding(cfg.vocab_size, getattr(self.pe_module, "token_dim", cfg.d_model))
        self.pos = None
        if self.scheme.embeds and self.scheme.learned:
            self.pos = nn.Embedding(self.scheme.max_positions, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, getattr(s, "inter", s)) for _ in range(cfg.n_layer))  # BiPE: inter
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.sampler = None
        if cfg.positions != "contiguous":
            from extrap.positional.sampling import PositionSampler

            self.sampler = PositionSampler.from_spec(cfg.positions)
        self.apply(self._init)
        nn.init.normal_(self.tok.weight, std=cfg.embed_std)
        if cfg.tie_embeddings:
            self.head.weight = self.tok.weight
        # residual projections scaled by depth, as in GPT-2
        for blk in self.blocks:
            nn.init.normal_(blk.attn.proj.weight, std=0.02 / math.sqrt(2 * cfg.n_layer))
            nn.init.normal_(blk.mlp[2].weight, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    # ---- temperature (004) ------------------------------------------------------
    def temperatures(self) -> list[float]:
        return [float(blk.attn.temperature) for blk in self.blocks]

    def set_temperature(self, tau: float | Sequence[float]) -> None:
        """One τ for all layers, or a list with one τ per layer."""
        for blk, t in zip(self.blocks, check_temperatures(tau, self.cfg.n_layer)):
            blk.attn.temperature.fill_(t)

    # ---- positions ------------------------------------------------------------
    def default_positions(self, L: int, device) -> torch.Tensor:
        return torch.arange(L, device=device)

    def train_positions(self, B: int, L: int, generator: torch.Generator | None, device) -> torch.Tensor:
        """Position ids for a training batch: augmented (SHAPE/CAPE) or sampled (randomized/PoSE)."""
        if self.sampler is not None:
            return self.sampler.train_positions(B, L, generator).to(device)
        if self.scheme.embeds:
            return self.scheme.train_positions(B, L, generator).to(device)
        return self.default_positions(L, device)

    # ---- forward ----------------------------------------------------------------
    def embed(self, idx: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        x = self.tok(idx)
        if self.pe_module is not None:
            return self.pe_module.embed(x, idx, positions)
        if self.scheme.embeds:
            if positions is None:
                positions = self.default_positions(idx.shape[1], idx.device)
            if self.pos is not None:
                self.scheme.check_positions(positions)
                x = x + self.pos(positions.long())
            else:
                x = x + self.scheme.embedding(positions, self.cfg.d_model).to(x.dtype)
        return x

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
        """Logits for ``idx`` (B, L); ``last``: only the last ``last`` positions' (long evaluation); ``window``:
        attend only to the ``window`` most recent keys; ``embeds``: these input embeddings (B, L, d), not ``idx``'s."""
        x, h, probs = self._body(idx, positions, window, return_probs, embeds)
        with autocast(x.device, self.compute_dtype):
            logits = self._logits(h, last)
        return Output(logits=logits, probs=probs if return_probs else None, embeds=x)

    @torch.no_grad()
    def token_nll(self, idx, targets, positions=None, *, last: int | None = None) -> torch.Tensor:
        """-log p(targets) (B, S) float32 at the last S = ``last`` (default L) positions of one exact pass:
        the body once, then :meth:`_logits` (the one head) over chunks of positions, never (L, V) logits."""
        x, h, _ = self._body(idx, positions)
        h, targets = (h, targets) if last is None else (h[:, -last:], targets[:, -last:])
        with autocast(x.device, self.compute_dtype):
            return chunked_nll(h, targets, self._logits, self.cfg.vocab_size)

    def _body(self, idx, positions=None, window=None, return_probs=False, embeds=None):
        """(input embeddings, the last layer's output (B, L, d), its probes): what forward and token_nll share."""
        positions = self.default_positions(idx.shape[1], idx.device) if positions is None else positions
        x = self.embed(idx, positions) if embeds is None else embeds
        h, probs = x, []
        with autocast(x.device, self.compute_dtype):
            for _, out, blocks in self._run_blocks(x, positions, window=window, return_probs=return_probs, idx=idx):
                h = out
                probs.append(blocks)
        return x, h, probs

    def _run_blocks(
        self, x, positions, upto: int | None = None, layer_kw: Callable[[int], dict] | None = None, idx=None, **attn_kw
    ) -> Iterator[tuple[int, torch.Tensor, Any]]:
        """The layer loop, written once: x (B, L, d) through blocks 0..upto (None: all), one at a time.

        Yields (layer, x after it, its probe or None); the next layer runs only when asked for.
        ``attn_kw`` go to every layer's :meth:`Attention.forward`, ``layer_kw(layer)`` to that layer
        alone (its KV cache, the probe of one layer).  r(t) tables are shared across layers where they can be.
        """
        table_cache: dict = {}
        pe = None if self.pe_module is None else self.pe_module.attention_inputs(idx, positions, self.cfg.n_layer)
        for layer, blk in enumerate(self.blocks[: None if upto is None else upto + 1]):
            kw = attn_kw if layer_kw is None else {**attn_kw, **layer_kw(layer)}
            kw = kw if pe is None else {**kw, **pe[layer]}
            x, probe = blk(x, positions, table_cache=table_cache, **kw)
            yield layer, x, probe

    def _logits(self, h: torch.Tensor, last: int | None = None) -> torch.Tensor:
        """The final norm and head on the residual stream h (B, L, d), its last ``last`` positions only if given."""
        return self.head(self.ln_f(h if last is None else h[:, -last:]))

    # ---- KV cache ---------------------------------------------------------------
    def new_cache(self, window: int | None = None, seq_len: int | None = None) -> KVCache:
        if window is not None and window < 1:
            raise ExtrapError(f"cache window must be >= 1, got {window}")
        if getattr(self.scheme, "no_stream", None):
            raise ExtrapError(self.scheme.no_stream)
        keep = self.extension.method.sinks_kept if self.extension is not None else 0  # attention sinks
        return KVCache(window, seq_len=seq_len, keep_first=keep)

    @torch.no_grad()
    def step(self, idx: torch.Tensor, start: int, cache: KVCache, last: int | None = None) -> torch.Tensor:
        """Logits (B, T, V) of the tokens ``idx`` (B, T) at positions start..start+T-1 (the last ``last`` only)."""
        # q and k rotate for the cache's sequence length (fixed at its first step when not given): one θ for all
        seq_len = cache.fix_seq_len(start + idx.shape[1])
        positions = torch.arange(start, start + idx.shape[1], device=idx.device)
        h = self.embed(idx, positions)
        layers = self._run_blocks(h, positions, seq_len=seq_len, layer_kw=lambda i: {"cache": cache.layer(i)}, idx=idx)
        with autocast(h.device, self.compute_dtype):
            for _, out, _ in layers:
                h = out
            return self._logits(h, last)

    # ---- probes -----------------------------------------------------------------
    def _probe(self, idx: torch.Tensor, last: int, logits: bool) -> Iterator[tuple[int, Blocks | None]]:
        """Layers 0..last on ``idx``; each yields its probability blocks (or, for ``last``, its logit blocks)."""
        if not 0 <= last < self.cfg.n_layer:
            raise ExtrapError(f"layer must be in [0, {self.cfg.n_layer}), got {last}")
        positions = self.default_positions(idx.shape[1], idx.device)
        x = self.embed(idx, positions)
        if logits:  # the last layer alone records its logits
            layers = self._run_blocks(x, positions, last, lambda layer: {"return_logits": layer == last}, idx)
        else:
            layers = self._run_blocks(x, positions, last, return_probs=True, idx=idx)
        for layer, _, blocks in layers:
            yield layer, blocks

    @torch.no_grad()
    def attention_probs(self, idx: torch.Tensor, *, upto_layer: int | None = None) -> Iterator[tuple[int, Blocks]]:
        """(layer, probability blocks) for layers 0..upto_layer; the next layer runs only when asked for,
        so a consumer that reduces each layer's blocks holds one layer's at a time."""
        last = self.cfg.n_layer - 1 if upto_layer is None else int(upto_layer)
        yield from self._probe(idx, last, logits=False)

    @torch.no_grad()
    def layer_logits(self, idx: torch.Tensor, layer: int = 0) -> list[torch.Tensor]:
        """Pre-softmax logits (q·k / sqrt(Dh) + r) / τ of one layer: query blocks (B, H, Lq, Lk), -inf = masked."""
        *_, (_, blocks) = self._probe(idx, int(layer), logits=True)
        return [b for _, b in blocks]

    @torch.no_grad()
    def attention_rows(self, idx: torch.Tensor, rows: Sequence[int]) -> Iterator[tuple[int, torch.Tensor]]:
        """(layer, (B, H, R, L) exact probabilities of the query rows ``rows``), layer by layer.

        Holds R rows, never (L, L): this is how the mass that a window drops is measured at long L.
        """
        positions = self.default_positions(idx.shape[1], idx.device)
        for layer, _, probs in self._run_blocks(self.embed(idx, positions), positions, rows=rows, idx=idx):
            yield layer, probs

    def bias_values(self) -> list[dict[str, torch.Tensor]] | None:
        if not self.scheme.adds_bias:
            return None
        return [blk.attn.bias_values() for blk in self.blocks]

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
