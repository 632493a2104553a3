"""The model-side parts of the survey's added encodings (complex, FLOATER, BiPE, CoPE): the modules
that own their parameters.  The formulas are in :mod:`extrap.positional` (one definition each).

* :class:`ComplexOrderEmbedding`, :class:`FloaterFlow`, :class:`BilevelEmbedding`: one per model
  (:func:`model_module`), each with ``embed(x, idx, positions)`` (the input embedding from the token
  embedding x) and ``attention_inputs(idx, positions, n_layer)`` (one dict of keyword arguments of
  ``Attention.forward`` per layer, for this forward);
* :class:`CopeAttention`: one per layer (:func:`layer_module`), the attention itself.

Shapes: idx (B, L); positions (L,) or (B, L); x (B, L, d).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from extrap.errors import ExtrapError
from extrap.model.kernel import MASKED
from extrap.positional.absolute import sinusoidal_embedding
from extrap.positional.base import Scheme
from extrap.positional.bipe import BiPE, bilevel_ids
from extrap.positional.complex_order import ComplexOrder, complex_frequencies, complex_order_embedding
from extrap.positional.cope import CoPE, cope_logits, cope_positions
from extrap.positional.floater import Floater, floater_solve, require_torchdiffeq
from extrap.precision import at_least_float32

SURVEY_KINDS = ("complex", "floater", "bipe", "cope")


def default_positions(idx: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    return torch.arange(idx.shape[-1], device=idx.device) if positions is None else positions


class ComplexOrderEmbedding(nn.Module):
    """ω and θ per word (V, m); the amplitude r is the model's token embedding, m = d_model / 2 wide."""

    def __init__(self, scheme: ComplexOrder, vocab_size: int, d_model: int, tied: bool):
        super().__init__()
        if d_model % 2:
            raise ExtrapError(f"complex: d_model must be even ([Re; Im] halves), got {d_model}")
        if tied:
            raise ExtrapError("complex: tied embeddings are not available (the amplitude table is d_model/2 wide)")
        self.token_dim = m = d_model // 2
        self.omega = nn.Parameter(complex_frequencies(m, scheme.opts["base"]).repeat(vocab_size, 1))
        self.theta = nn.Parameter(torch.zeros(vocab_size, m))

    def embed(self, x, idx, positions):
        pos = default_positions(idx, positions) + 1  # the authors count positions from 1
        return complex_order_embedding(x, F.embedding(idx, self.omega), F.embedding(idx, self.theta), pos)

    def attention_inputs(self, idx, positions, n_layer: int) -> list[dict]:
        return [{}] * n_layer


class FloaterDynamics(nn.Module):
    """h(τ, p): Linear([p, τ]) -> ReLU -> Linear([·, τ]) on the last axis (the authors' flow_func_linear)."""

    def __init__(self, d: int):
        super().__init__()
        self.w1, self.w2 = (nn.Parameter(nn.init.xavier_normal_(torch.empty(d, d + 1))) for _ in range(2))
        self.b1, self.b2 = nn.Parameter(torch.zeros(d)), nn.Parameter(torch.zeros(d))

    def forward(self, t, p):
        tau = t.to(p.dtype).expand(*p.shape[:-1], 1)
        x = F.relu(F.linear(torch.cat([p, tau], -1), self.w1, self.b1))
        return F.linear(torch.cat([x, tau], -1), self.w2, self.b2)


class FloaterFlow(nn.Module):
    """p(0) (3, n_layer, d) and h; ``table(n)`` is p at t = 0, Δt, ..., (n-1)Δt: (n, 3, n_layer, d)."""

    def __init__(self, scheme: Floater, n_layer: int, d_model: int):
        super().__init__()
        require_torchdiffeq()
        self.dt, self.step_size = scheme.opts["dt"], scheme.step_size
        self.p0 = nn.Parameter(nn.init.xavier_uniform_(torch.empty(3, n_layer, d_model)))
        self.h = FloaterDynamics(d_model)
        self.cached: tuple[tuple, torch.Tensor] | None = None  # (parameter versions, solution), not a buffer

    def table(self, n: int) -> torch.Tensor:
        params = list(self.parameters())
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):  # training: a fresh solve
            return self.solve(self.p0, 0, n)
        key = tuple((p.data_ptr(), p._version, p.device, p.dtype) for p in params)
        if self.cached is None or self.cached[0] != key:
            self.cached = key, self.solve(self.p0, 0, 1)
        have = self.cached[1]
        if have.shape[0] < n:  # p(t) = p(s) + ∫_s^t h: continue from the last solved point
            more = self.solve(have[-1], have.shape[0] - 1, n)
            self.cached = key, torch.cat([have, more[1:]])
        return self.cached[1][:n]

    def solve(self, p_s: torch.Tensor, first: int, n: int) -> torch.Tensor:
        t = torch.arange(first, n, device=p_s.device, dtype=p_s.dtype) * self.dt
        if t.numel() == 1:
            return p_s.unsqueeze(0)
        return floater_solve(self.h, p_s, t, self.step_size)

    def embed(self, x, idx, positions):
        return x

    def attention_inputs(self, idx, positions, n_layer: int) -> list[dict]:
        """Per layer {"qkv_bias": (..., L, 3·d) biases of q, k and v at these positions}."""
        positions = default_positions(idx, positions)
        if positions.is_floating_point() and not bool((positions == positions.round()).all()):
            raise ExtrapError("floater: positions must be integers (token i sits at t = i·dt)")
        if positions.numel() and int(positions.min()) < 0:
            raise ExtrapError("floater: positions must be >= 0")
        n = int(positions.max()) + 1 if positions.numel() else 1
        per = self.table(n)[positions.long()]  # (..., L, 3, n_layer, d)
        return [{"qkv_bias": per[..., i, :].flatten(-2)} for i in range(n_layer)]


class BilevelEmbedding(nn.Module):
    """BiPE's intra-segment APE (a learned table or sinusoidal) and its segment ids."""

    def __init__(self, scheme: BiPE, d_model: int):
        super().__init__()
        self.boundary, self.rows = scheme.boundary, scheme.opts["max_positions"]
        self.table = nn.Embedding(self.rows, d_model) if scheme.opts["intra"] == "learned" else None

    def embed(self, x, idx, positions):
        intra, _ = bilevel_ids(idx, self.boundary)
        if self.table is not None:  # the authors clamp: longer segments share the last row
            return x + self.table(intra.clamp(max=self.rows - 1))
        return x + sinusoidal_embedding(intra, x.shape[-1]).to(x.dtype)

    def attention_inputs(self, idx, positions, n_layer: int) -> list[dict]:
        return [{"segments": bilevel_ids(idx, self.boundary)[1]}] * n_layer


def model_module(scheme: Scheme, cfg) -> nn.Module | None:
    """The model-wide module of a survey scheme (None for every other scheme)."""
    if isinstance(scheme, ComplexOrder):
        return ComplexOrderEmbedding(scheme, cfg.vocab_size, cfg.d_model, cfg.tie_embeddings)
    if isinstance(scheme, Floater):
        return FloaterFlow(scheme, cfg.n_layer, cfg.d_model)
    if isinstance(scheme, BiPE):
        return BilevelEmbedding(scheme, cfg.d_model)
    return None


class CopeAttention(nn.Module):
    """One layer's CoPE attention: the table e (head_dim, npos), zeros at first, shared by the heads."""

    def __init__(self, scheme: CoPE, head_dim: int):
        super().__init__()
        self.emb = nn.Parameter(torch.zeros(head_dim, scheme.opts["npos"]))

    def forward(self, q, k, v, positions, window=None, tau=1.0, block=256, record=None):
        """q (B, H, Lq, Dh), the queries of the last Lq of the keys k, v (B, H, Lk, Dh) at ``positions``
        (Lk,) or (B, Lk).  Returns out (B, H, Lq, Dh) and the recorded (key offset, block) list or None."""
        Lq, Lk = q.shape[2], k.shape[2]
        off, scale, outs, kept = Lk - Lq, 1.0 / math.sqrt(q.shape[-1]), [], []
        pos = positions if positions.dim() == 2 else positions.unsqueeze(0)  # (B or 1, Lk)
        for q0 in range(0, Lq, block):
            q1 = min(Lq, q0 + block)
            # keys outside [k0, k1) are masked for every query of the block (positions increase by >= 1
            # per key), so their gates are 0 and leave the suffix sums of the visible keys unchanged
            k0, k1 = (0 if window is None else max(0, off + q0 - window + 1)), off + q1
            t = pos[:, off + q0 : k1].unsqueeze(-1) - pos[:, k0:k1].unsqueeze(-2)  # (B or 1, bq, k1 - k0)
            visible = (t >= 0) & (t < window) if window is not None else t >= 0
            visible = visible.unsqueeze(1)  # over heads
            s = (q[:, :, q0:q1] @ k[:, :, k0:k1].transpose(-1, -2)) * scale  # q·k/√d
            gates = torch.sigmoid(s) * visible  # masked keys: g = 0 (σ(-inf) in the listing)
            logits = (s + cope_logits(q[:, :, q0:q1], self.emb, cope_positions(gates))) / float(tau)
            logits = logits.masked_fill(~visible, MASKED)
            p = torch.softmax(logits, dim=-1, dtype=at_least_float32(logits.dtype))  # float32 under autocast too
            outs.append(p @ v[:, :, k0:k1] if v is not None else None)
            if record:
                kept.append((k0, p if record == "probs" else logits.masked_fill(~visible, -math.inf)))
        out = torch.cat(outs, dim=2) if v is not None else None
        return out, (kept if record else None)

    def rows(self, q, k, positions, tau, rows) -> torch.Tensor:
        """Exact probabilities (B, H, R, Lk) of the query rows ``rows`` (indices into the keys)."""
        B, H, L, _ = q.shape
        out = q.new_zeros(B, H, len(rows), L)
        for a, r in enumerate(rows):
            pos = positions[..., : r + 1]
            _, (((_, p),)) = self(q[:, :, r : r + 1], k[:, :, : r + 1], None, pos, tau=tau, record="probs")
            out[:, :, a : a + 1, : r + 1] = p
        return out


def layer_module(scheme: Scheme, cfg) -> nn.Module | None:
    """The per-layer module of a survey scheme (CoPE's attention; None otherwise)."""
    return CopeAttention(scheme, cfg.head_dim) if isinstance(scheme, CoPE) else None


__all__ = [
    "ComplexOrderEmbedding",
    "FloaterDynamics",
    "FloaterFlow",
    "BilevelEmbedding",
    "CopeAttention",
    "SURVEY_KINDS",
    "default_positions",
    "model_module",
    "layer_module",
]
