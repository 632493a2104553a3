"""A small GPT-style causal LM that accepts every positional scheme in the registry.

Pre-LayerNorm blocks (attention, then a 4x GELU MLP), optional tied embeddings,
and one :class:`ModelConfig` dataclass.  Positional information enters in exactly
one of three ways, decided by the scheme's ``kind``:

* ``bias``: r(t) from the scheme's function, added to the logits block by block
  (:mod:`extrap.attention`), with learnable parameters per layer;
* ``ape``: an absolute embedding added to the token embedding;
* ``rotary``: queries and keys rotated by the scheme.

Shapes: idx (B, L) token ids; positions (L,) or (B, L); logits (B, L, V).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from extrap import positional
from extrap.attention import BiasContext, attend, toeplitz_table
from extrap.errors import ExtrapError


@dataclass
class ModelConfig:
    vocab_size: int = 256
    n_layer: int = 4
    d_model: int = 128
    n_head: int = 4
    d_ff: int = 0  # 0 -> 4 * d_model
    pe: str = "alibi"  # any registry spec, e.g. "kerple-log", "window:64", "-2*log(n)"
    positions: str = "contiguous"  # training position ids: contiguous | randomized:max=N | pose:target=N
    tie_embeddings: bool = False
    embed_std: float = 1.0  # N(0,1) token embeddings keep an additive APE from swamping them
    dropout: float = 0.0
    attn_block: int = 256  # queries per block of the biased attention (long inputs use up to L/8)
    attn_backend: str = "auto"  # auto | blocked | flex (FlexAttention: GPU, or compiled CPU inference)

    def __post_init__(self):
        for name in ("vocab_size", "n_layer", "d_model", "n_head", "attn_block"):
            if int(getattr(self, name)) <= 0:
                raise ExtrapError(f"model: {name} must be positive, got {getattr(self, name)}")
        if self.d_ff < 0:
            raise ExtrapError(f"model: d_ff must be >= 0, got {self.d_ff}")
        if self.d_model % self.n_head:
            raise ExtrapError(f"model: n_head={self.n_head} does not divide d_model={self.d_model}")
        if self.attn_backend not in ("auto", "blocked", "flex"):
            raise ExtrapError(f"model: attn_backend must be auto, blocked or flex, got {self.attn_backend!r}")
        if not 0 <= self.dropout < 1:
            raise ExtrapError(f"model: dropout must be in [0, 1), got {self.dropout}")
        self.scheme  # validates the spec early  # noqa: B018

    @property
    def scheme(self) -> positional.Scheme:
        return positional.get(self.pe)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        from extrap.io import strict_dataclass

        return strict_dataclass(cls, d, "model config")


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, scheme):
        super().__init__()
        self.cfg, self.scheme = cfg, scheme
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.bias_params = nn.ParameterDict()
        if scheme.kind == "bias" and not scheme.is_identity:
            stored = scheme.to_stored(scheme.init_values(cfg.n_head), cfg.n_head)
            learnable = {q.name: q.learnable for q in scheme.params(cfg.n_head)}
            for name, value in stored.items():
                self.bias_params[name] = nn.Parameter(value.float(), requires_grad=learnable[name])
        # per-layer softmax temperature τ (004): logits / τ.  A buffer, never a weight edit.
        self.register_buffer("temperature", torch.ones(()), persistent=False)

    def bias_values(self) -> dict[str, torch.Tensor]:
        return self.scheme.values(dict(self.bias_params), self.cfg.n_head)

    def bias_context(self, positions, window=None, dtype=torch.float32, device="cpu", table_cache=None) -> BiasContext:
        """Everything the attention needs to add r(i - j) for these positions (see attention.py)."""
        ctx = BiasContext(scheme=None, values={}, positions=positions, window=window, contiguous=_is_arange(positions))
        if self.scheme.kind != "bias" or self.scheme.is_identity:
            return ctx
        ctx.scheme, ctx.values = self.scheme, self.bias_values()
        L = positions.shape[-1]
        if self.scheme.toeplitz:
            span = int(positions.max() - positions.min()) if positions.numel() else 0
            if window is not None:
                span = min(span, window - 1)
            if table_cache is not None and not any(p.requires_grad for p in self.bias_params.values()):
                key = (span, dtype, device)  # parameter-free schemes: share one table across layers
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

    def heads(self, x, positions):
        """x (B, L, d) -> q, k, v, each (B, H, L, Dh), with q and k rotated for a rotary scheme."""
        B, L, _ = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.cfg.n_head, self.cfg.head_dim).permute(2, 0, 3, 1, 4)
        if self.scheme.kind == "rotary":
            q, k = self.scheme.rotate(q, k, positions)
        return q, k, v

    def forward(self, x, positions, window=None, return_probs=False, table_cache=None):
        B, L, _ = x.shape
        q, k, v = self.heads(x, positions)
        ctx = self.bias_context(positions, window, x.dtype, x.device, table_cache)
        y, probs = attend(q, k, v, ctx, temperature=self.temperature, block=self.cfg.attn_block,
                          return_probs=return_probs, backend=self.cfg.attn_backend)
        return self.proj(y.transpose(1, 2).reshape(B, L, -1)), probs


def _is_arange(positions: torch.Tensor) -> bool:
    if positions.dim() != 1 or positions.is_floating_point() or positions.numel() == 0:
        return False
    return bool(positions[0] == 0) and torch.equal(positions, torch.arange(positions.numel(), device=positions.device))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, scheme):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d_model), nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg, scheme)
        d_ff = cfg.d_ff or 4 * cfg.d_model
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, d_ff), nn.GELU(), nn.Linear(d_ff, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, positions, window=None, return_probs=False, table_cache=None):
        a, probs = self.attn(self.ln1(x), positions, window, return_probs, table_cache)
        x = x + self.drop(a)
        return x + self.drop(self.mlp(self.ln2(x))), probs


@dataclass
class Output:
    logits: torch.Tensor  # (B, L_out, V)
    probs: list | None = None  # per layer: list of (key offset, (B, H, Lq, Lk)) blocks
    embeds: torch.Tensor | None = None  # (B, L, d) input embeddings, for gradient ERF
    extra: dict = field(default_factory=dict)


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.scheme = cfg.scheme
        if self.scheme.kind not in ("bias", "ape", "rotary"):
            raise ExtrapError(f"model: scheme kind {self.scheme.kind!r} is not supported")
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = None
        if self.scheme.kind == "ape" and self.scheme.name == "learned":
            self.pos = nn.Embedding(self.scheme.max_positions, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, self.scheme) for _ in range(cfg.n_layer))
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
    def set_temperature(self, tau) -> None:
        """One τ for all layers, or a list with one τ per layer."""
        taus = list(tau) if isinstance(tau, (list, tuple)) else [float(tau)] * self.cfg.n_layer
        if len(taus) != self.cfg.n_layer:
            raise ExtrapError(f"temperature: need {self.cfg.n_layer} values, got {len(taus)}")
        if any(not (t > 0 and math.isfinite(t)) for t in taus):
            raise ExtrapError("temperature must be a positive finite number")
        for blk, t in zip(self.blocks, taus):
            blk.attn.temperature.fill_(float(t))

    # ---- positions ------------------------------------------------------------
    def default_positions(self, L: int, device) -> torch.Tensor:
        return torch.arange(L, device=device)

    def train_positions(self, B: int, L: int, generator: torch.Generator | None, device) -> torch.Tensor:
        """Position ids for a training batch: augmented (SHAPE/CAPE) or sampled (randomized/PoSE)."""
        if self.sampler is not None:
            return self.sampler.train_positions(B, L, generator).to(device)
        if self.scheme.kind == "ape" and hasattr(self.scheme, "train_positions"):
            return self.scheme.train_positions(B, L, generator).to(device)
        return self.default_positions(L, device)

    # ---- forward ----------------------------------------------------------------
    def embed(self, idx: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx)
        if self.scheme.kind == "ape":
            if self.pos is not None:
                self.scheme.check_positions(positions)
                x = x + self.pos(positions.long())
            else:
                x = x + self.scheme.embedding(positions, self.cfg.d_model).to(x.dtype)
        return x

    def forward(self, idx: torch.Tensor, positions: torch.Tensor | None = None, *, window: int | None = None,
                last: int | None = None, return_probs: bool = False, embeds: torch.Tensor | None = None) -> Output:
        """Logits for ``idx`` (B, L).

        ``last``: compute logits only for the last ``last`` positions (long evaluation).
        ``window``: attend only to the ``window`` most recent keys (window-auto evaluation).
        ``embeds``: use these input embeddings (B, L, d) instead of looking up ``idx``.
        """
        B, L = idx.shape
        if positions is None:
            positions = self.default_positions(L, idx.device)
        x = self.embed(idx, positions) if embeds is None else embeds
        h = x
        table_cache: dict = {}
        all_probs = [] if return_probs else None
        for blk in self.blocks:
            h, probs = blk(h, positions, window, return_probs, table_cache)
            if return_probs:
                all_probs.append(probs)
        h = self.ln_f(h if last is None else h[:, -last:])
        return Output(logits=self.head(h), probs=all_probs, embeds=x)

    def loss(self, idx, targets, positions=None) -> torch.Tensor:
        out = self(idx, positions)
        return F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]).float(), targets.reshape(-1))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
