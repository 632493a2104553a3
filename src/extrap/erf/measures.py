"""The two empirical receptive fields, measured on a model and a token stream (see :mod:`extrap.erf`)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from extrap.data.streams import segments as segments_of
from extrap.errors import ExtrapError
from extrap.model.protocol import model_device

GRAD_THRESHOLD = 0.99  # 003 §5.1: ERF = where 99% of the normalised gradient is reached
ATTN_EPS = 1e-2  # 000: n_emp(eps); 1% of the attention mass may lie outside the window
ATTN_MAX_LENGTH = 2048  # dense per-layer (B, H, L, L) probabilities beyond this get too large
DEFAULT_SEGMENTS = 8
KINDS = ("grad", "attn", "both")
HEAD_REDUCTIONS = ("mean", "median", "max")  # one number for a model; the theory also offers "none"
TRF_SOURCES = ("init", "trained")


# ---------------------------------------------------------------------------
# argument checks (user input -> ExtrapError)
# ---------------------------------------------------------------------------
def check_threshold(threshold: float) -> float:
    # strict ">" in 003's definition: a threshold of 1 could never be exceeded
    if not (isinstance(threshold, (int, float)) and 0 < threshold < 1):
        raise ExtrapError(f"threshold must be in (0, 1), got {threshold}")
    return float(threshold)


def check_eps(eps: float) -> float:
    if not (isinstance(eps, (int, float)) and 0 < eps < 1):
        raise ExtrapError(f"eps must be in (0, 1), got {eps}")
    return float(eps)


def check_positive(name: str, value: int) -> int:
    if int(value) < 1:
        raise ExtrapError(f"{name} must be >= 1, got {value}")
    return int(value)


def gradient_norms(
    model, context: torch.Tensor, target: torch.Tensor, positions: torch.Tensor | None = None
) -> torch.Tensor:
    """||d(-log p(target | context)) / d e_m||_2 for every context position m.

    context (B, L) token ids, target (B,) the token that follows each row.
    Returns (B, L) float64, oldest position first.  Rows are independent (no
    normalisation mixes them), so one backward of the summed loss gives each
    row's own gradients.
    """
    dev = model_device(model)
    context, target = context.to(dev), target.to(dev)
    if positions is None:
        positions = model.default_positions(context.shape[1], dev)
    with torch.enable_grad():
        # 003 §5.1: g_m is the gradient w.r.t. the input embedding e_m (token + any absolute PE)
        emb = model.embed(context, positions).detach().requires_grad_(True)
        logits = model(context, positions, embeds=emb, last=1).logits[:, -1].float()  # (B, V)
        nll = F.cross_entropy(logits, target, reduction="sum")
        (grad,) = torch.autograd.grad(nll, emb)
    return grad.double().norm(dim=-1)  # (B, L)


def cumulative_from_recent(norms: torch.Tensor) -> torch.Tensor:
    """Normalised mass of the k most recent positions: (..., L) -> (..., L), index k-1.

    ``norms`` is ordered oldest -> newest.  Dividing the running sum by its own
    last entry (instead of summing pre-normalised s_m) makes the curve exactly
    1.0 from the point where only zero gradients remain: exact support checks work.
    """
    run = norms.flip(-1).cumsum(-1)
    total = run[..., -1:]
    return run / torch.where(total > 0, total, torch.ones_like(total))


def erf_from_curve(curve: torch.Tensor, threshold: float = GRAD_THRESHOLD) -> torch.Tensor:
    """Smallest k with curve[k-1] > threshold (003 §5.1, counted from the prediction): (..., L) -> (...,)."""
    above = curve > threshold
    k = above.to(torch.int8).argmax(-1) + 1
    # a curve that never exceeds the threshold (all-zero gradients) needs the whole context
    return torch.where(above.any(-1), k, torch.full_like(k, curve.shape[-1]))


@dataclass(frozen=True)
class GradientERF:
    """Gradient ERF of one model at one length, over several segments.

    A number a JSON file wrote as null (not finite when measured) reads back as None.
    """

    erf: float | None  # mean over segments of the per-segment ERF (tokens)
    erf_of_mean_curve: int | None  # ERF read off the averaged curve (as one would from 003 Fig. 4)
    per_segment: tuple[int, ...]
    curve: tuple[float | None, ...]  # averaged curve[k-1]: share of the gradient on the k most recent context tokens
    length: int  # L_ex: context of L_ex - 1 tokens, predicting the L_ex-th
    segments: int
    threshold: float

    def to_json(self) -> dict:
        return {
            "erf": self.erf,
            "erf_of_mean_curve": self.erf_of_mean_curve,
            "per_segment": list(self.per_segment),
            "curve": list(self.curve),
            "length": self.length,
            "segments": self.segments,
            "threshold": self.threshold,
        }

    @classmethod
    def from_json(cls, d: dict) -> GradientERF:
        return cls(
            erf=d.get("erf"),
            erf_of_mean_curve=d.get("erf_of_mean_curve"),
            per_segment=tuple(d.get("per_segment") or ()),
            curve=tuple(d.get("curve") or ()),
            length=d.get("length"),
            segments=d.get("segments"),
            threshold=d.get("threshold"),
        )


def gradient_erf(
    model,
    stream: torch.Tensor,
    length: int,
    segments: int = DEFAULT_SEGMENTS,
    threshold: float = GRAD_THRESHOLD,
    batch: int = 4,
) -> GradientERF:
    """Gradient ERF (003 §5.1) averaged over ``segments`` windows of ``length`` tokens of ``stream``.

    Each window's first ``length - 1`` tokens are the context and its last token
    the target, so the curve has ``length - 1`` entries.
    """
    threshold = check_threshold(threshold)
    if length < 2:
        raise ExtrapError(f"gradient ERF needs a length >= 2 (a context and a target), got {length}")
    segments, batch = check_positive("segments", segments), check_positive("batch", batch)
    windows = segments_of(stream, length, segments)
    model.eval()
    curves = []
    for b0 in range(0, segments, batch):
        w = windows[b0 : b0 + batch]
        curves.append(cumulative_from_recent(gradient_norms(model, w[:, :-1], w[:, -1])).cpu())
    curves = torch.cat(curves)  # (segments, length - 1)
    per_seg = erf_from_curve(curves, threshold)
    mean_curve = curves.mean(0)
    return GradientERF(
        erf=float(per_seg.double().mean()),
        erf_of_mean_curve=int(erf_from_curve(mean_curve, threshold)),
        per_segment=tuple(int(v) for v in per_seg),
        curve=tuple(float(v) for v in mean_curve),
        length=length,
        segments=segments,
        threshold=threshold,
    )


# ---------------------------------------------------------------------------
# attention ERF (000, n_emp)
# ---------------------------------------------------------------------------
def by_distance(probs: torch.Tensor, first_query: int = 0) -> torch.Tensor:
    """Re-index causal attention rows by distance t = i - j.

    probs (..., L, L) with query i and key j -> (..., L - first_query, L), entry
    [.., i - first_query, t] = probs[.., i, i - t], zero where t > i.
    """
    L = probs.shape[-1]
    i = torch.arange(first_query, L, device=probs.device).unsqueeze(-1)  # (Lq, 1)
    j = i - torch.arange(L, device=probs.device)  # (Lq, L)
    rows = probs[..., first_query:, :]
    out = rows.gather(-1, j.clamp_min(0).expand(*rows.shape[:-2], *j.shape))
    return out * (j >= 0)


def attention_n_emp(probs: torch.Tensor, eps: float = ATTN_EPS, first_query: int = 0) -> torch.Tensor:
    """000's n_emp(eps) for every query i >= first_query: (..., L, L) -> (..., L - first_query) int64.

    C_i(j) = attention mass on the j most recent keys; n_emp = min{j : C_i(j) > C_i(i+1) (1 - eps)}.
    """
    eps = check_eps(eps)
    mass = by_distance(probs.double(), first_query).cumsum(-1)  # C_i(j) at index j-1
    total = mass[..., -1:]  # C_ii: the whole row (1 up to rounding)
    return (mass > total * (1 - eps)).to(torch.int8).argmax(-1) + 1


@dataclass(frozen=True)
class AttentionERF:
    """Attention ERF (000 n_emp) per layer and head, aggregated over segments and queries.

    Only ``summary`` is required: early study files recorded the summary alone.
    """

    summary: float | None  # mean over (layer, head) of the per-head median n_emp
    max_head: float | None = None  # largest per-head median
    per_layer_head: tuple[tuple[float, ...], ...] = ()  # (n_layer, n_head) median n_emp over queries and segments
    per_layer_head_mean: tuple[tuple[float, ...], ...] = ()
    eps: float | None = None
    length: int | None = None
    first_query: int | None = None  # queries i >= first_query (0-based) are aggregated
    segments: int | None = None

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["per_layer_head"] = [list(row) for row in self.per_layer_head]
        out["per_layer_head_mean"] = [list(row) for row in self.per_layer_head_mean]
        return out

    @classmethod
    def from_json(cls, d: dict | float) -> AttentionERF:
        """The JSON object, or the bare summary number an early study file holds."""
        if not isinstance(d, dict):
            return cls(summary=d)
        known = {f.name: d[f.name] for f in fields(cls) if f.name in d}
        for key in ("per_layer_head", "per_layer_head_mean"):
            known[key] = tuple(tuple(row) for row in known.get(key) or ())
        return cls(**known)


def attention_erf(
    model,
    stream: torch.Tensor,
    length: int,
    segments: int = DEFAULT_SEGMENTS,
    eps: float = ATTN_EPS,
    first_query: int | None = None,
) -> AttentionERF:
    """n_emp(eps) of every head, on ``segments`` windows of ``length`` tokens (length <= ATTN_MAX_LENGTH).

    Early queries see fewer than j keys, so their n_emp is bounded by i + 1 and
    says little about the receptive field; by default only the second half of
    the queries (i >= length // 2) is aggregated.
    """
    from extrap.model.attention import dense_probs

    eps = check_eps(eps)
    segments = check_positive("segments", segments)
    if not 1 <= length <= ATTN_MAX_LENGTH:
        raise ExtrapError(
            f"attention ERF needs dense probabilities; length must be in [1, {ATTN_MAX_LENGTH}], got {length}"
        )
    first_query = length // 2 if first_query is None else int(first_query)
    if not 0 <= first_query < length:
        raise ExtrapError(f"first_query must be in [0, {length}), got {first_query}")
    windows = segments_of(stream, length, segments).to(model_device(model))
    model.eval()
    per_layer: list[list[torch.Tensor]] | None = None
    with torch.no_grad():
        for w in windows:  # one segment at a time: dense (1, H, L, L) per layer
            out = model(w[None], return_probs=True)
            if per_layer is None:
                per_layer = [[] for _ in out.probs]
            for layer, blocks in enumerate(out.probs):
                n = attention_n_emp(dense_probs(blocks, length), eps, first_query)  # (1, H, Lq)
                per_layer[layer].append(n[0].cpu())
    stacked = [torch.cat(v, dim=-1).double() for v in per_layer]  # per layer (H, segments * Lq)
    med = [s.median(-1).values.tolist() for s in stacked]
    mean = [s.mean(-1).tolist() for s in stacked]
    heads = [v for row in med for v in row]
    return AttentionERF(
        summary=sum(heads) / len(heads),
        max_head=max(heads),
        per_layer_head=tuple(tuple(row) for row in med),
        per_layer_head_mean=tuple(tuple(row) for row in mean),
        eps=eps,
        length=length,
        first_query=first_query,
        segments=segments,
    )
