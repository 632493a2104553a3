"""Empirical receptive fields (ERF) of trained runs, and how they track the theory's TRF.

Two measurements, both computed on segments drawn deterministically from a
validation (or test) token stream:

* **Gradient ERF** (003 §5.1).  Predict one token from the ``L_ex - 1`` tokens
  before it (the same convention as 003, "predicting the next (L_ex-th) token",
  and as the ``last-token`` protocol of :mod:`extrap.evaluate`).  Backpropagate
  its negative log-probability to the input embeddings e_1..e_{L_ex-1} and
  normalise the gradient norms, s_m = ||g_m|| / sum_n ||g_n||.  The curve we
  return is indexed by *how many of the most recent context tokens* are kept::

      curve[k-1] = s_{L-k+1} + ... + s_L  (= 003's c_m with m = L-k+1, L = L_ex - 1)

  and the ERF is the smallest k with curve[k-1] > threshold (default 0.99).
  003 writes ERF = min{m | c_m > 0.99}; read literally this is always m = 1
  (c_1 = 1), and the paper reports the result as a number of tokens counted back
  from the prediction (e.g. "ERF = 768 tokens").  Our k is that count:
  k = L - m* + 1 with m* the largest index whose c_m still exceeds the threshold.

* **Attention ERF** (000, "Theoretical Receptive Field" section).  For query i of
  one head, C_i(j) is the attention mass on its j most recent keys (distances
  t < j) and n_emp(eps) = min{j : C_i(j) > C_i(i+1) (1 - eps)}; the rows are
  softmax outputs so C_i(i+1) = 1 up to rounding (we use the actual row sum).
  It needs the dense (L, L) probabilities of every layer, so its length is
  capped at :data:`ATTN_MAX_LENGTH`.

:func:`compare_trf_erf` lines both up against the theory's TRF (000 Eq. 22) over
several runs and reports Spearman rank correlations (000 Figs. 5-6 compare the
trends of TRF and ERF across RPEs).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from extrap.data.streams import segments as segments_of
from extrap.errors import ExtrapError
from extrap.lm import model_device
from extrap.run import eval_stream
from extrap.theory.receptive import ERF_TRF

log = logging.getLogger(__name__)

GRAD_THRESHOLD = 0.99  # 003 §5.1: ERF = where 99% of the normalised gradient is reached
ATTN_EPS = ERF_TRF.eps  # 000: n_emp(eps); 1% of the attention mass may lie outside the window
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


def _check_positive(name: str, value: int) -> int:
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


@dataclass
class GradientERF:
    """Gradient ERF of one model at one length, over several segments."""

    erf: float  # mean over segments of the per-segment ERF (tokens)
    erf_of_mean_curve: int  # ERF read off the averaged curve (as one would from 003 Fig. 4)
    per_segment: list[int]
    curve: list[float]  # averaged curve[k-1]: share of the gradient on the k most recent context tokens
    length: int  # L_ex: context of L_ex - 1 tokens, predicting the L_ex-th
    segments: int
    threshold: float

    def to_dict(self) -> dict:
        return asdict(self)


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
    segments, batch = _check_positive("segments", segments), _check_positive("batch", batch)
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
        per_segment=[int(v) for v in per_seg],
        curve=[float(v) for v in mean_curve],
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


@dataclass
class AttentionERF:
    """Attention ERF (000 n_emp) per layer and head, aggregated over segments and queries."""

    summary: float  # mean over (layer, head) of the per-head median n_emp
    max_head: float  # largest per-head median
    per_layer_head: list[list[float]]  # (n_layer, n_head) median n_emp over queries and segments
    per_layer_head_mean: list[list[float]]
    eps: float
    length: int
    first_query: int  # queries i >= first_query (0-based) are aggregated
    segments: int

    def to_dict(self) -> dict:
        return asdict(self)


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
    from extrap.attention import dense_probs

    eps = check_eps(eps)
    segments = _check_positive("segments", segments)
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
        per_layer_head=med,
        per_layer_head_mean=mean,
        eps=eps,
        length=length,
        first_query=first_query,
        segments=segments,
    )


# ---------------------------------------------------------------------------
# rank correlation
# ---------------------------------------------------------------------------
def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rho (scipy: Pearson correlation of average ranks, ties handled); None if undefined."""
    from scipy.stats import spearmanr

    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} values against {len(y)}")
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:  # a constant ranking has no order to correlate with
        return None
    return float(spearmanr(x, y).statistic)


# ---------------------------------------------------------------------------
# runs
# ---------------------------------------------------------------------------
def run_erf(
    run_or_dir,
    kind: str = "both",
    length: int | None = None,
    segments: int = DEFAULT_SEGMENTS,
    threshold: float = GRAD_THRESHOLD,
    eps: float = ATTN_EPS,
    split: str = "validation",
    batch: int = 4,
    trf_reduce: str = ERF_TRF.reduce,
    trf_source: str = "init",
    device: str = "cpu",
    corpus: str | None = None,
) -> dict:
    """Gradient and/or attention ERF of one run, JSON-ready.

    ``length`` defaults to 4 x the training length (003 measures at L_ex = 4 L_tr);
    the attention ERF uses min(length, ATTN_MAX_LENGTH).  ``trf_source``: ``init``
    (the scheme's formula parameters, as in 000) or ``trained`` (this run's
    learned bias parameters, every layer).  ``corpus``: the corpus of an ``hf:PATH`` model
    (default stdlib; a project run always reads its training corpus).
    """
    import extrap

    if kind not in KINDS:
        raise ExtrapError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if trf_source not in TRF_SOURCES:
        raise ExtrapError(f"trf_source must be one of {', '.join(TRF_SOURCES)}, got {trf_source!r}")
    threshold, eps = check_threshold(threshold), check_eps(eps)
    _check_positive("segments", segments)
    _check_positive("batch", batch)
    run = extrap.load(run_or_dir, device) if isinstance(run_or_dir, (str, Path)) else run_or_dir
    if corpus is not None:
        run.use_corpus(corpus)
    length = int(length) if length is not None else 4 * run.train_length
    if length < 2:
        raise ExtrapError(f"length must be >= 2, got {length}")
    stream = eval_stream(run, split, length)
    row = {
        "run": str(run.path),
        "pe": run.pe,
        "length": length,
        "train_length": run.train_length,
        "split": split,
        "segments": segments,
        "step": run.step,
        "grad_erf": None,
        "grad_erf_of_mean_curve": None,
        "grad_per_segment": None,
        "grad_curve": None,
        "threshold": threshold,
        "attn_erf": None,
        "eps": eps,
        "trf": _run_trf(run, eps, trf_reduce, trf_source),
        "trf_eps": eps,
        "trf_reduce": trf_reduce,
        "trf_source": trf_source,
        **run.provenance(),
    }
    if kind in ("grad", "both"):
        g = gradient_erf(run.model, stream, length, segments, threshold, batch)
        row.update(
            grad_erf=g.erf,
            grad_erf_of_mean_curve=g.erf_of_mean_curve,
            grad_per_segment=g.per_segment,
            grad_curve=g.curve,
        )
    if kind in ("attn", "both"):
        row["attn_erf"] = attention_erf(run.model, stream, min(length, ATTN_MAX_LENGTH), segments, eps).to_dict()
    return row


def _run_trf(run, eps: float, reduce: str, source: str) -> float | None:
    """The theory's TRF(eps) (000 Eq. 22) of the run's scheme, reduced over heads (and layers)."""
    from extrap.theory import receptive_field

    scheme = run.model.scheme
    if scheme is None:  # hf: see `extrap theory --checkpoint hf:PATH` for its bias
        return None
    values = run.model.bias_values() if source == "trained" else None
    return receptive_field(scheme, values, eps=eps, reduce=reduce, num_heads=run.model.shape.n_head).value


def spearman_table(rows: list[dict]) -> dict:
    """Spearman rho of TRF against each ERF, over the rows with a finite TRF and that ERF."""
    out = {}
    for key, get in (
        ("grad", lambda r: r["grad_erf"]),
        ("attn", lambda r: r["attn_erf"]["summary"] if r["attn_erf"] else None),
    ):
        pairs = [(r["trf"], get(r)) for r in rows if r["trf"] is not None and get(r) is not None]
        out[key] = {"rho": spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None, "n": len(pairs)}
    return out


def compare_trf_erf(runs: list, eps: float = ATTN_EPS, kind: str = "both", progress: bool = False, **kwargs) -> dict:
    """TRF (000 Eq. 22) versus gradient and attention ERF over several runs.

    Returns {"rows": [{"run", "pe", "trf", "grad_erf", "attn_erf", ...}], "spearman": {"grad": {"rho", "n"},
    "attn": {"rho", "n"}}}; runs whose TRF is None (no bias RPE, divergent series)
    are listed but left out of the correlations.  ``kwargs`` go to :func:`run_erf`.
    """
    rows = []
    for r in runs:
        if progress:
            log.info("  erf: %s", r)
        rows.append(run_erf(r, kind=kind, eps=eps, **kwargs))
    return {"rows": rows, "spearman": spearman_table(rows)}


# ---------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------
def plot_gradient_curves(rows: list[dict], out_dir: str | Path, name: str = "grad_erf") -> list[Path]:
    """Cumulative normalised gradient against tokens kept (003 Fig. 4 style), PNG + SVG."""
    from extrap.plotting import new_figure, save_figure

    rows = [r for r in rows if r.get("grad_curve")]
    if not rows:
        raise ExtrapError("nothing to plot: no gradient ERF was measured (measure kind grad or both)")
    fig = new_figure(6.4, 4.2)
    ax = fig.add_subplot()
    pes = [r["pe"] for r in rows]
    for r in rows:
        k = range(1, len(r["grad_curve"]) + 1)
        name_ = r["pe"] if pes.count(r["pe"]) == 1 else f"{r['pe']} [{Path(r['run']).name}]"
        ax.plot(k, r["grad_curve"], label=f"{name_} (ERF {r['grad_erf']:.1f})")
    thr = rows[0]["threshold"]
    ax.axhline(thr, color="grey", ls=":", lw=1)
    for L_tr in sorted({r["train_length"] for r in rows}):
        ax.axvline(L_tr, color="grey", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("most recent context tokens kept (k)")
    ax.set_ylabel("cumulative normalised gradient")
    ax.set_title(f"Gradient ERF at L_ex = {rows[0]['length']} (dashed: L_tr, dotted: {thr})")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    return save_figure(fig, out_dir, name)


__all__ = [
    "ATTN_EPS",
    "ATTN_MAX_LENGTH",
    "GRAD_THRESHOLD",
    "AttentionERF",
    "GradientERF",
    "attention_erf",
    "attention_n_emp",
    "compare_trf_erf",
    "cumulative_from_recent",
    "erf_from_curve",
    "gradient_erf",
    "gradient_norms",
    "plot_gradient_curves",
    "run_erf",
    "spearman",
    "spearman_table",
]
