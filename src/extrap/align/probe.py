"""Probing a model for 004's alignment: softmax statistics and averaged layer logits.

* **Statistics** (:func:`attention_stats`): the average over *every* softmax
  row (all layers, heads, query positions, segments) of P_max and of H, plus the
  same per layer.  N = R x H x L rows per segment, each with weight 1, as in 004
  §4 ("averaged ... over all logit vectors").  The rows are causal, so row i has
  i + 1 keys; the first row is always one-hot.  Probabilities are consumed one
  layer at a time from the model's ``attention_probs`` stream (each layer's
  blocks are reduced to sums and dropped before the next layer runs), so for
  an extrap GPT at most one layer's lower-triangular blocks exist at once and
  no (L, L) matrix is assembled.  Still O(L^2) time and memory per layer, so
  probing lengths are capped at :data:`extrap.align.formulas.MAX_PROBE_LENGTH` (4096; ``max_length=``
  raises the cap).
* **Layer logits** (:func:`averaged_layer_logits`): the averaged sorted, centred
  pre-softmax logit vector of one layer, which the closed forms of 004 §6 read.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import torch

from extrap.align.formulas import SoftmaxStat, check_lengths, resampled, row_stats, sorted_centred
from extrap.align.records import LengthStats, Stats
from extrap.data.streams import segments as spread_segments
from extrap.errors import ExtrapError
from extrap.model.protocol import ExtrapLM, Seq2SeqLM, model_device, temperature

ProbedLM = ExtrapLM | Seq2SeqLM  # alignment reads a causal LM, or the encoder of a T5

DEFAULT_SEGMENTS = 4
TOKEN_BUDGET = 4096  # segments batched so that batch x length <= this


def segments_of(stream: torch.Tensor, length: int, n: int) -> torch.Tensor:
    """``n`` windows of ``length`` tokens, starts spread evenly over the stream: (n, length).

    A 2-D ``stream`` (N, >= length) is taken as ready-made segments: the first ``length``
    tokens of every row (``n`` is then ignored).
    """
    stream = torch.as_tensor(stream)
    if stream.dim() == 2:
        if stream.shape[1] < length:
            raise ExtrapError(f"the segments hold {stream.shape[1]} tokens, fewer than L={length}")
        return stream[:, :length].long()
    return spread_segments(stream.reshape(-1), length, n)


def _batches(seg: torch.Tensor, model: ProbedLM):
    b = max(1, TOKEN_BUDGET // seg.shape[1])
    device = model_device(model)
    for i in range(0, seg.shape[0], b):
        yield seg[i : i + b].to(device)


@contextmanager
def _eval_mode(model: ProbedLM):
    """Eval mode (no dropout) in the block; the previous mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def current_temperature(model: ProbedLM) -> list[float]:
    return model.temperatures()


@torch.no_grad()
def attention_stats(model: ProbedLM, segments: torch.Tensor, tau=None, *, upto_layer: int | None = None) -> Stats:
    """Average P_max and entropy of every softmax row of every layer, over ``segments`` (N, L).

    ``tau``: temperature for this probe (None: the model's current one).  ``upto_layer``:
    run the layers up to this one only (later layers are not reported).
    """
    last = model.shape.n_layer - 1 if upto_layer is None else int(upto_layer)
    sums = [[0.0, 0.0, 0] for _ in range(last + 1)]
    with _eval_mode(model), temperature(model, tau):
        for x in _batches(segments, model):
            for layer, blocks in model.attention_probs(x, upto_layer=last):
                acc = sums[layer]
                for _, p in blocks:
                    sp, sh, n = row_stats(p)
                    acc[0] += sp
                    acc[1] += sh
                    acc[2] += n
    layers = tuple(SoftmaxStat(pmax=s[0] / s[2], entropy=s[1] / s[2]) for s in sums)
    return Stats(
        pmax=sum(v.pmax for v in layers) / len(layers),
        entropy=sum(v.entropy for v in layers) / len(layers),
        layers=layers,
        rows=sums[0][2],
    )


class Prober:
    """Caches attention statistics per (length, τ-tuple, upto_layer) so the same probe never runs twice."""

    def __init__(self, model, stream, segments: int):
        self.model, self.stream, self.n = model, stream, segments
        self.cache: dict = {}
        self.segs: dict = {}

    def __call__(self, length: int, taus: Sequence[float], upto: int | None = None) -> Stats:
        key = (length, tuple(round(float(t), 12) for t in taus), upto)
        if key not in self.cache:
            if length not in self.segs:
                self.segs[length] = segments_of(self.stream, length, self.n)
            self.cache[key] = attention_stats(self.model, self.segs[length], list(taus), upto_layer=upto)
        return self.cache[key]


def dispersion(
    model,
    stream: torch.Tensor,
    lengths: Sequence[int],
    segments: int = DEFAULT_SEGMENTS,
    tau=1.0,
    max_length: int | None = None,
) -> list[LengthStats]:
    """004 Table 1: average P_max and entropy (overall and per layer) at each length, at temperature τ."""
    check_lengths(min(lengths), lengths, max_length)
    return [LengthStats(int(L), attention_stats(model, segments_of(stream, int(L), segments), tau)) for L in lengths]


@torch.no_grad()
def layer_logit_blocks(model: ProbedLM, idx: torch.Tensor, layer: int = 0) -> list[torch.Tensor]:
    """The pre-softmax logit blocks (B, H, Lq, Lk) of one layer for input ``idx`` (B, L); -inf = masked."""
    return model.layer_logits(idx, layer)


@torch.no_grad()
def averaged_layer_logits(model: ProbedLM, segments: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """004 §6: the averaged sorted (centred) logit vector of one layer over all H x L rows of all segments."""
    L = segments.shape[1]
    total = torch.zeros(L, dtype=torch.float64, device=model_device(model))
    rows = 0
    with _eval_mode(model):
        for x in _batches(segments, model):
            for blk in model.layer_logits(x, layer):
                s, n = sorted_centred(blk)
                total += resampled(s, n, L).sum(0)
                rows += s.shape[0]
    return (total / rows).cpu()
