"""Perplexity versus length under three protocols, and the extrapolation verdict.

All protocols read the same token stream (a validation or test split):

* ``nonoverlapping``: the first ``tokens`` tokens cut into chunks of L_ex; every
  token of every chunk is scored (so early tokens of a chunk see little context).
* ``sliding``: windows of L_ex moved by ``stride``; only the last ``stride``
  tokens of each window are scored (the first window scores all of its tokens).
* ``last-token`` (003 §3.4): N fixed target positions; for every L_ex each target
  is predicted from exactly L_ex - 1 preceding tokens, so the same tokens are
  scored at every length and only their context grows.

The verdict follows 000 Definition 0.1: the model extrapolates when
|ppl_n - ppl_m| / ppl_m < δ for every tested n >= m = L_tr.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from extrap.errors import ExtrapError

PROTOCOLS = ("nonoverlapping", "sliding", "last-token")


@dataclass
class LengthResult:
    length: int
    loss: float  # mean negative log-likelihood per scored token, nats
    tokens: int  # scored tokens
    seconds: float
    window: int | None = None
    error: str | None = None
    exact_loss: float | None = None  # the same length with exact attention, when a window was used
    temperature: float | list | None = None  # softmax τ used at this length (004), when one was set

    @property
    def ppl(self) -> float:
        return math.exp(self.loss) if math.isfinite(self.loss) else math.inf

    def to_dict(self) -> dict:
        return {"length": self.length, "loss": self.loss, "ppl": self.ppl, "bits_per_token": self.loss / math.log(2),
                "tokens": self.tokens, "seconds": self.seconds, "window": self.window,
                **({"temperature": self.temperature} if self.temperature is not None else {}),
                **({"error": self.error} if self.error else {}),
                **({"exact_ppl": math.exp(self.exact_loss),
                    "window_rel_diff": abs(math.exp(self.loss) - math.exp(self.exact_loss)) / math.exp(self.exact_loss)}
                   if self.exact_loss is not None else {})}


@dataclass
class Verdict:
    extrapolates: bool | None
    worst_ratio: float | None
    reference_length: int
    delta: float
    detail: list = field(default_factory=list)


def _nll_sum(model, x: torch.Tensor, y: torch.Tensor, window: int | None, score_last: int | None) -> torch.Tensor:
    """Sum of -log p(y) over the scored positions of each row of x (B, L)."""
    out = model(x, window=window, last=score_last)
    logits = out.logits.float()
    yy = y if score_last is None else y[:, -score_last:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yy.reshape(-1), reduction="sum")


@torch.no_grad()
def eval_nonoverlapping(model, stream: torch.Tensor, length: int, tokens: int, window=None, batch: int = 8):
    """Chunks of ``length`` from the first ``tokens`` + 1 tokens of the stream."""
    n_chunks = tokens // length
    if n_chunks < 1:
        raise ExtrapError(f"nonoverlapping: {tokens} tokens hold no chunk of length {length}; raise --tokens")
    total, count = 0.0, 0
    for c0 in range(0, n_chunks, batch):
        rows = range(c0, min(n_chunks, c0 + batch))
        seg = torch.stack([stream[r * length:(r + 1) * length + 1] for r in rows]).long()
        total += float(_nll_sum(model, seg[:, :-1], seg[:, 1:], window, None))
        count += seg.shape[0] * length
    return total / count, count


@torch.no_grad()
def eval_sliding(model, stream: torch.Tensor, length: int, tokens: int, stride: int, window=None, batch: int = 8):
    """Windows of ``length`` moved by ``stride`` over ``tokens`` tokens; each token scored exactly once."""
    if not 1 <= stride <= length:
        raise ExtrapError(f"sliding: stride must be in [1, L_ex={length}], got {stride}")
    if tokens < length:
        raise ExtrapError(f"sliding: {tokens} tokens are fewer than L_ex={length}; raise --tokens")
    total = float(_nll_sum(model, stream[None, :length].long(), stream[None, 1:length + 1].long(), window, None))
    count = length
    starts = list(range(stride, tokens - length + 1, stride))
    for b0 in range(0, len(starts), batch):
        seg = torch.stack([stream[s:s + length + 1] for s in starts[b0:b0 + batch]]).long()
        total += float(_nll_sum(model, seg[:, :-1], seg[:, 1:], window, stride))
        count += seg.shape[0] * stride
    return total / count, count


def last_token_targets(stream_len: int, max_length: int, n: int) -> list[int]:
    """N target positions, evenly spread, each with at least ``max_length`` - 1 tokens before it."""
    lo, hi = max_length - 1, stream_len - 1
    if hi - lo + 1 < n:
        raise ExtrapError(f"last-token: the stream ({stream_len} tokens) is too short for {n} targets at "
                          f"L_ex={max_length}; lower --targets or the longest length")
    step = (hi - lo + 1) // n
    return [lo + k * step for k in range(n)]


@torch.no_grad()
def eval_last_token(model, stream: torch.Tensor, length: int, targets: list[int], window=None, batch: int = 8):
    """Score only stream[p] for each p in ``targets``, from the L_ex - 1 tokens before it."""
    total = 0.0
    for b0 in range(0, len(targets), batch):
        ps = targets[b0:b0 + batch]
        ctx = torch.stack([stream[p - length + 1:p] for p in ps]).long()  # (B, L_ex - 1)
        y = torch.stack([stream[p:p + 1] for p in ps]).long()  # (B, 1)
        if ctx.shape[1] == 0:  # L_ex = 1: no context at all; predict from an empty prefix is undefined
            raise ExtrapError("last-token: L_ex must be >= 2")
        total += float(_nll_sum(model, ctx, y, window, 1))
    return total / len(targets), len(targets)


def evaluate(model, stream: torch.Tensor, lengths: list[int], protocol: str, *, tokens: int | None = None,
             stride: int | None = None, targets: int = 64, window_for: Callable[[int], int | None] | None = None,
             on_result: Callable[[LengthResult], None] | None = None, batch: int = 8,
             temperature_for: Callable[[int], float | list | None] | None = None) -> list[LengthResult]:
    """Evaluate at every length; a length that fails is recorded and the rest are kept.

    ``temperature_for(L)``: softmax τ (one, or one per layer) set with ``model.set_temperature``
    while evaluating L (None: leave it); the model's previous τ is restored at the end.
    """
    if protocol not in PROTOCOLS:
        raise ExtrapError(f"unknown protocol {protocol!r} (choose from {', '.join(PROTOCOLS)})")
    if not lengths or any(L < 2 for L in lengths):
        raise ExtrapError("lengths must be integers >= 2")
    lengths = sorted(set(lengths))
    tokens = tokens or max(lengths)
    need = tokens + 1 if protocol != "last-token" else max(lengths) + targets
    if stream.numel() < need:
        raise ExtrapError(f"the evaluation stream has {stream.numel():,} tokens; {protocol} at these settings "
                          f"needs {need:,}")
    tgt = last_token_targets(stream.numel(), max(lengths), targets) if protocol == "last-token" else None
    results = []
    model.eval()
    old_tau = [float(b.attn.temperature) for b in model.blocks] if temperature_for else None
    try:
        for L in lengths:
            results.append(_evaluate_length(model, stream, L, protocol, tokens, stride, tgt, window_for, batch,
                                            temperature_for))
            if on_result:
                on_result(results[-1])
    finally:
        if old_tau is not None:
            model.set_temperature(old_tau)
    return results


def _evaluate_length(model, stream, L, protocol, tokens, stride, tgt, window_for, batch, temperature_for):
    """One length of :func:`evaluate`, under ``temperature_for(L)`` when given."""
    window = window_for(L) if window_for else None
    tau = temperature_for(L) if temperature_for else None
    if tau is not None:
        model.set_temperature(tau)
    t0 = time.perf_counter()
    try:
        if protocol == "nonoverlapping":
            loss, n = eval_nonoverlapping(model, stream, L, tokens, window, batch)
        elif protocol == "sliding":
            loss, n = eval_sliding(model, stream, L, tokens, stride or max(1, L // 2), window, batch)
        else:
            loss, n = eval_last_token(model, stream, L, tgt, window, batch)
        res = LengthResult(L, loss, n, time.perf_counter() - t0, window, temperature=tau)
    except (RuntimeError, MemoryError) as e:  # out of memory at a long length: keep what we have
        res = LengthResult(L, math.nan, 0, time.perf_counter() - t0, window, error=str(e).splitlines()[0][:200],
                           temperature=tau)
    return res


def verdict(results: list[LengthResult], train_length: int, delta: float = 0.02) -> Verdict:
    """000 Definition 0.1 over the tested lengths n >= m = L_tr."""
    if not delta > 0:
        raise ExtrapError(f"delta must be > 0, got {delta}")
    ok = [r for r in results if r.error is None]
    ref = next((r for r in ok if r.length == train_length), None)
    if ref is None:
        return Verdict(None, None, train_length, delta)
    ratios = [(r.length, abs(r.ppl - ref.ppl) / ref.ppl) for r in ok if r.length >= train_length]
    worst = max(x for _, x in ratios)
    return Verdict(worst < delta, worst, train_length, delta, ratios)


# ---------------------------------------------------------------------------
# evaluating a run directory (CLI and Python API)
# ---------------------------------------------------------------------------
def eval_stream_for(run, split: str, min_tokens: int) -> torch.Tensor:
    from extrap.data import eval_stream, load_corpus

    if split not in ("validation", "test"):
        raise ExtrapError(f"--split must be validation or test, got {split!r}")
    corpus = load_corpus(run.config["train"]["corpus"])
    if "hf_path" in run.config:  # no training corpus to compare with: record the one used
        run.config["corpus_hash"] = corpus.hash
    elif corpus.hash != run.config.get("corpus_hash"):
        raise ExtrapError(f"corpus {corpus.name} changed since training (hash differs); evaluate on the same data")
    return eval_stream(corpus, run.tokenizer, split, min_tokens)


def resolve_window(run, mode: str, eps: float) -> tuple[Callable[[int], int | None] | None, dict]:
    """``none``, a fixed W, or ``auto``: the theory's TRF(eps) of the trained bias, when its series converges."""
    if mode in (None, "none"):
        return None, {"mode": "none", "size": None, "reason": "exact attention"}
    if mode != "auto":
        try:
            w = int(mode)
        except ValueError:
            raise ExtrapError(f"--window must be auto, none or an integer, got {mode!r}") from None
        if w < 1:
            raise ExtrapError("--window must be >= 1")
        return (lambda L: w if w < L else None), {"mode": "fixed", "size": w, "reason": "set by the user"}
    if not 0 < eps < 1:
        raise ExtrapError(f"--eps must be in (0, 1), got {eps}")
    w, reason = model_trf_window(run.model, eps)
    info = {"mode": "auto", "size": w, "eps": eps, "reason": reason}
    if w is None:
        return None, info
    return (lambda L: w if w < L else None), info


def resolve_temperature(run, spec, stream: torch.Tensor, lengths: list[int], mode: str = "pmax",
                        segments: int = 4, per_layer: bool = False, max_length: int | None = None):
    """``--temperature``: None (τ untouched), a fixed τ, or ``auto`` (004: the aligned τ for each L_ex).

    ``auto`` calls :func:`extrap.align.aligned_temperature` with ``mode`` on ``segments`` segments of
    the evaluation stream (only its attention is read); τ = 1 for L_ex <= L_tr.  Returns
    (temperature_for or None, info for the report).
    """
    if spec in (None, "", "none"):
        return None, {"mode": "none"}
    from extrap import align

    if spec != "auto":
        try:
            tau = float(spec)
        except (TypeError, ValueError):
            raise ExtrapError(f"--temperature must be auto, none or a positive number, got {spec!r}") from None
        tau = align.check_tau(tau)
        return (lambda L: tau), {"mode": "fixed", "tau": tau}
    align.check_mode(mode)
    if per_layer and mode not in align.SEARCH_MODES:
        raise ExtrapError(f"per-layer temperatures need --align-mode pmax or entropy, not {mode}")
    L_tr = run.train_length
    if mode != "log-length":  # probing lengths are capped: fail before evaluating anything
        align.check_lengths(L_tr, [L for L in lengths if L > L_tr], max_length)
    chosen: dict = {}

    def temperature_for(L: int):
        if L not in chosen:
            chosen[L] = align.aligned_temperature(run.model, stream, L_tr, L, mode, per_layer, segments,
                                                  max_length=max_length)
        return chosen[L]
    return temperature_for, {"mode": "auto", "align_mode": mode, "per_layer": per_layer, "segments": segments,
                             "chosen": chosen}


def model_trf_window(model, eps: float) -> tuple[int | None, str]:
    """The attention window that the theory allows: max over layers and heads of TRF(eps).

    Only for Toeplitz bias RPEs whose series converges in every head (000 Theorem 0.4):
    the keys beyond TRF(eps) then hold less than a fraction eps of the bias mass
    (000 Eq. 22), so dropping them changes the output by O(eps).
    """
    from extrap.theory import analyse, eps_key

    scheme = model.scheme
    if scheme.kind != "bias" or scheme.is_identity or not scheme.toeplitz:
        return None, f"{scheme.spec} is not a Toeplitz bias RPE: exact attention"
    widest, where = 0, None
    for layer, blk in enumerate(model.blocks):
        values = {k: v.detach().double().cpu() for k, v in blk.attn.bias_values().items()}
        for r in analyse(scheme, model.cfg.n_head, values, eps=[eps]):
            if r.verdict != "converges":
                return None, f"layer {layer} head {r.head}: series {r.verdict} ({r.test}): exact attention"
            n = r.trf.get(eps_key(eps))
            if n is None:
                return None, f"layer {layer} head {r.head}: no TRF at eps={eps:g}: exact attention"
            if n > widest:
                widest, where = n, (layer, r.head)
    return widest, (f"TRF({eps:g}) of the trained bias, widest at layer {where[0]} head {where[1]}; "
                    "keys further back are dropped")


def evaluate_run(run_dir, lengths=None, protocol="nonoverlapping", stride=None, targets=64, tokens=None,
                 split="validation", window="none", eps=1e-6, delta=0.02, batch=8, progress=False,
                 run=None, exact_check_max: int = 8192, backend: str | None = None, temperature=None,
                 align_mode: str = "pmax", align_segments: int = 4, align_per_layer: bool = False,
                 align_max_length: int | None = None, corpus: str | None = None,
                 hf_options: dict | None = None) -> dict:
    """Evaluate a run directory; returns the JSON-ready report (000 Def. 0.1 verdict included).

    ``temperature``: None, a τ, or "auto" (004 attention alignment by ``align_mode``; the τ
    used at each length is recorded in its result and under "temperature" in the report).
    """
    import extrap
    from extrap.io import run_metadata

    from extrap.hf import config_summary

    hf = str(run_dir).startswith("hf:") if run is None else "hf_path" in run.config
    if not hf and (corpus is not None or hf_options):
        raise ExtrapError("--corpus, --dtype, --rope, --factor and --train-length are only for hf: models")
    if run is None:
        run = extrap.load(run_dir, **(hf_options or {})) if hf else extrap.load(run_dir)
    if hf:
        if corpus is not None:
            run.config["train"]["corpus"] = corpus
        if window == "auto":
            raise ExtrapError("--window auto reads the trained bias of an extrap run; give --window W for hf: models")
        if backend is not None:
            raise ExtrapError("--backend is not available for hf: models")
    if backend is not None:
        if backend not in ("auto", "blocked", "flex"):
            raise ExtrapError(f"--backend must be auto, blocked or flex, got {backend!r}")
        run.model.cfg.attn_backend = backend
    L_tr = run.train_length
    lengths = sorted(set(lengths or [L_tr * 2**k for k in range(5)]) | {L_tr})
    if protocol not in PROTOCOLS:
        raise ExtrapError(f"unknown protocol {protocol!r} (choose from {', '.join(PROTOCOLS)})")
    window_for, window_info = resolve_window(run, window, eps)
    need = (tokens or max(lengths)) + 1 if protocol != "last-token" else max(lengths) + targets
    stream = eval_stream_for(run, split, need)
    temperature_for, temperature_info = resolve_temperature(run, temperature, stream, lengths, align_mode,
                                                            align_segments, align_per_layer, align_max_length)

    def show(r: LengthResult):
        if progress:
            msg = f"  L_ex={r.length}: " + (f"ppl {r.ppl:.3f} ({r.seconds:.1f} s)" if not r.error else r.error)
            print(msg, file=__import__("sys").stderr, flush=True)

    results = evaluate(run.model, stream, lengths, protocol, tokens=tokens, stride=stride, targets=targets,
                       window_for=window_for, on_result=show, batch=batch, temperature_for=temperature_for)
    if window_for is not None:  # measure what the window costs where exact attention is affordable
        for r in results:
            if r.window is not None and r.error is None and r.length <= exact_check_max:
                exact = evaluate(run.model, stream, [r.length], protocol, tokens=tokens, stride=stride,
                                 targets=targets, batch=batch, temperature_for=temperature_for)[0]
                r.exact_loss = exact.loss
    v = verdict(results, L_tr, delta)
    meta = run_metadata(run.config.get("seed"), run.config.get("corpus_hash"))
    return {"run": str(run.path), "pe": run.config["model"]["pe"], "protocol": protocol, "split": split,
            "train_length": L_tr, "delta": delta, "extrapolates": v.extrapolates, "worst_ratio": v.worst_ratio,
            "window": window_info, "results": [r.to_dict() for r in results], "step": run.step,
            **({"temperature": _temperature_report(temperature_info)} if temperature is not None else {}), **meta,
            **config_summary(run), **({"corpus": run.config["train"]["corpus"]} if hf else {})}


def _temperature_report(info: dict) -> dict:
    out = {k: v for k, v in info.items() if k != "chosen"}
    if "chosen" in info:
        out["tau"] = {str(L): t for L, t in sorted(info["chosen"].items())}
    return out
