"""Putting an extension method into a model: extrap runs trained with rope or xpos, and hf: Llama-family models.

* GPT: every layer's :class:`~extrap.model.gpt.Attention` gets ``extend`` (a :class:`GptExtension`):
  its queries and keys then come unrotated, and :func:`extended_attention` rotates them with the
  scheme's own ``rotate`` at the method's positions (on CUDA as branches merged by their log-sum-exp,
  :mod:`~extrap.extend.branches`; on the CPU blockwise).  A KV cache stores keys before rotation, so a
  bounded method (sinks, lm-infinite) streams through a rolling cache that keeps its first keys too.
* hf: the rotary module returns cos = 1, sin = 0 while the extension is on (q and k reach attention
  unrotated, and the cache stores them so), and the attention implementation ``extrap_extend`` rotates
  them with the module's own θ and attention factor (:func:`~extrap.positional.rotation.apply_rotary`,
  HF's rotate-half).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from extrap.errors import ExtrapError
from extrap.extend.attention import extended_probe, streamed_attention
from extrap.extend.branches import attend
from extrap.extend.catalog import parse
from extrap.extend.methods import Method, scale_queries
from extrap.model.kernel import consecutive, softmax_attention


@dataclass
class GptExtension:
    """The extension of one GPT: called by each layer's attention with its unrotated q, k, v."""

    method: Method
    streams: bool = True

    @property
    def window(self) -> int | None:
        return self.method.bounded

    def __call__(self, attn, q, k, v, positions, cache=None, seq_len=None, window=None, record=None, rows=None):
        """q, k, v (B, H, L, Dh) unrotated, positions (L,) -> (B, H, L, Dh) and the probe ``record``
        ("probs" or "logits" blocks, whole sequences only) or None."""
        if rows is not None or window is not None or (record and cache is not None):
            raise ExtrapError(f"{self.method.name}: row probes, windows and cached probes are not available with it")
        if positions.dim() != 1 or positions.is_floating_point():
            raise ExtrapError(f"{self.method.name}: an extension needs one integer position per token")
        scheme, scale = attn.scheme, 1.0 / (math.sqrt(q.shape[-1]) * float(attn.temperature))
        if cache is None and not record and consecutive(positions) and self.method.no_op(positions.numel()):
            q, k = scheme.rotate(q, k, positions, seq_len=seq_len)  # d = t everywhere: plain RoPE, bit for bit
            return softmax_attention(q, k, v, None, scale)[0], None
        i = positions
        if cache is not None and cache.window is not None and cache.window < (self.method.bounded or math.inf):
            raise ExtrapError(f"{self.method.name}: a rolling cache of {cache.window} keys drops keys it attends to")
        if cache is not None:
            k, v, positions = cache.extend(k, v, positions)
        n, W = self.method.sinks_kept, self.method.bounded
        origin = 0
        if cache is not None and W is not None:  # StreamingLLM's in-cache positions: sinks 0..n-1, then the
            origin = max(0, int(i[0]) - W + 1 - n)  # first query's window from n on (relative branches only)
        length = seq_len or int(positions.max()) + 1
        q = scale_queries(self.method, q, i, length)  # the authors' log-length scalings (ReRoPE log=1, ...)

        def rotate(qb, kb, qpos, kpos):
            return scheme.rotate(qb, kb, qpos, k_positions=kpos, seq_len=length)

        if record:
            return extended_probe(self.method, rotate, q, k, v, i, positions, scale, record)
        if cache is not None and W is not None:  # a rolling cache: one pass per chunk over its sinks and window
            return streamed_attention(self.method, rotate, q, k, v, i, positions, scale, origin=origin), None
        out = attend(self.method, rotate, q, k, v, i, positions, scale, origin=origin, spans=cache is None)
        return out, None


def extend_model(model, method: Method) -> Method:
    """Run ``model`` (a GPT or an HFModel) with ``method`` from now on; returns the method."""
    from extrap.model.gpt import GPT

    if isinstance(model, GPT):
        if not model.scheme.rotates:
            raise ExtrapError(f"{method.name} extends a rotary model (rope, xpos); this one uses {model.cfg.pe}")
        ext = GptExtension(method)
        model.extension = ext
        for blk in model.blocks:
            blk.attn.extend = ext
        return method
    from extrap.extend.hf import extend_hf

    extend_hf(model, method)
    return method


def extend_run(run, spec: str | Method) -> Method:
    """Parse ``spec`` for the run's training length and put it into the run's model.

    The run's ``pe`` then reads ``PE+METHOD:options`` (every report names the extension): an hf: run's
    config says so, and an extrap run records it where its load-time RoPE record goes (``rope``:
    ``{"extend": spec, "trained_pe": ..., "pe": ...}``), which its provenance carries.
    """
    method = spec if isinstance(spec, Method) else parse(spec, run.train_length)
    extend_model(run.model, method)
    label = f"{run.pe}+{method.spec}"
    if hasattr(run.config, "hf_path"):
        run.config = replace(run.config, pe=label)
    else:
        run.rope = {"extend": method.spec, "trained_pe": run.pe, "pe": label}
    return method


def plain_rotate(scheme, seq_len: int | None = None):
    """The ``rotate`` of :func:`extended_attention` for a registry scheme (tests, benchmarks)."""

    def rotate(qb, kb, qpos, kpos):
        return scheme.rotate(qb, kb, qpos, k_positions=kpos, seq_len=seq_len)

    return rotate


__all__ = ["GptExtension", "extend_model", "extend_run", "plain_rotate"]
