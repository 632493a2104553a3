"""LongPPL (Fang et al., "What is Wrong with Perplexity for Long-context Language Modeling?", ICLR 2025).

Perplexity averages over every token, and most tokens are predicted as well from a short context as from
a long one.  LongPPL keeps only the *key tokens*, those that an evaluator model predicts much better with
the whole context than with a truncated one, and is the evaluated model's perplexity over them.

The key tokens are chosen as the authors' ``find_key_token`` chooses them (PKU-ML/LongPPL,
``longppl/longppl.py``, PyPI ``longppl`` 0.3.0): the evaluator scores every token with its whole context
(``loss_full``) and with a truncated one (``loss_short``), in blocks of ``block`` consecutive tokens that
share one cut: token k of a block sees the ``trunc_len`` tokens before the block and the k before it in the
block, trunc_len + k in all.  The first block starts at the row's start, so the tokens with fewer than
``trunc_len + block`` tokens before them have nothing cut (and cannot be key).  Here
trunc_len = L_tr of the evaluated run and block = a fraction of it (default 1/4, the authors' 1024/4096).

Every evaluation row (a chunk, a sliding window, the context of a last-token target) is one sequence:
its scored tokens are judged with that row as their whole context.  The evaluated model's losses are those
of the evaluation itself (with its window and τ); the evaluator scores with exact attention, blockwise
(no L x L tensor), its τ untouched.  Several rows pool their key tokens: LongPPL = exp(mean key loss).
(The authors' script averages per-text LongPPLs weighted by their key-token counts; for one text the two
agree.)
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass

import torch

from extrap.errors import ExtrapError
from extrap.evaluate.driver import evaluate_run, evaluation_stream
from extrap.evaluate.protocols import Plan
from extrap.evaluate.settings import EvalSettings
from extrap.evaluate.streaming import LOGITS_BUDGET, token_nll
from extrap.results.evaluation import LengthResult
from extrap.results.longppl import ALPHA, BETA, BLOCK_FRACTION, LongPPL, LongPPLReport, LongPPLResult
from extrap.run import Run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LongPPLSettings:
    """LongPPL's thresholds: a token is key when LSD > ``alpha`` and LCL > ``beta`` (both in nats), its
    truncated contexts in blocks of ``block_fraction`` x L_tr tokens.  Checked when built."""

    alpha: float = ALPHA
    beta: float = BETA
    block_fraction: float = BLOCK_FRACTION

    def __post_init__(self):
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ExtrapError(
                f"LongPPL alpha (the long-short difference) must be a finite number >= 0, got {self.alpha}"
            )
        if not (math.isfinite(self.beta) and self.beta < 0):
            raise ExtrapError(
                f"LongPPL beta (a log-probability) must be a finite number < 0, got {self.beta}: "
                "no token has log p above 0"
            )
        if not 0 < self.block_fraction <= 1:  # NaN fails this too
            raise ExtrapError(f"the LongPPL block must be a fraction of L_tr in (0, 1], got {self.block_fraction}")

    def block_size(self, trunc_len: int) -> int:
        """Tokens per block of one truncated context: ``block_fraction`` x trunc_len, at least 1."""
        return max(1, round(self.block_fraction * trunc_len))


def key_tokens(
    loss_full: torch.Tensor, loss_short: torch.Tensor, alpha: float = ALPHA, beta: float = BETA
) -> torch.Tensor:
    """Which tokens are key: (N,) bool from the evaluator's whole-context and truncated-context losses (N,)."""
    # Fang et al. 2025, Eq. (2) LSD = log p(long) - log p(short) > alpha, and LCL = log p(long) > beta
    return ((loss_short - loss_full) > alpha) & (loss_full < -beta)


def key_loss(nll: torch.Tensor, key: torch.Tensor) -> float | None:
    """The evaluated model's mean loss over the key tokens (None: none); LongPPL = exp of it (Fang et al. 2025)."""
    return float(nll[key].double().mean()) if bool(key.any()) else None


@dataclass(frozen=True)
class Row:
    """One evaluated sequence: inputs stream[start : start + length], the last ``scored`` positions scored."""

    start: int
    length: int
    scored: int


def protocol_rows(plan: Plan, L: int) -> list[Row]:
    """The rows that :func:`extrap.evaluate.evaluate` scores at L_ex = L, in the order of its losses."""
    if plan.protocol == "nonoverlapping":
        return [Row(r * L, L, L) for r in range(plan.tokens // L)]
    if plan.protocol == "sliding":
        stride = plan.stride_at(L)
        return [Row(0, L, L)] + [Row(s, L, stride) for s in range(stride, plan.tokens - L + 1, stride)]
    return [Row(p - L + 1, L - 1, 1) for p in plan.target_positions]


def short_segments(row: Row, trunc: int, block: int) -> list[tuple[int, int]]:
    """(s, e) for each block with a scored token: inputs [s, e) of the row, positions [s + trunc - 1, e) scored.

    Block b starts its inputs at s = b x block (the authors' ``start_token``); position j predicts token
    j + 1 from j + 1 - s tokens, trunc + k for the block's k-th position.
    """
    first = row.length - row.scored
    b0 = max(0, (first - trunc + 1) // block)  # the first block that reaches a scored position
    out = []
    for s in range(b0 * block, max(0, row.length - trunc + 1), block):
        out.append((s, min(row.length, s + trunc - 1 + block)))
    return out


def _score(model, stream: torch.Tensor, rows: list[Row], batch: int) -> list[torch.Tensor]:
    """The model's loss at the scored positions of each row, exact attention; rows of one shape batched."""
    out: list[torch.Tensor | None] = [None] * len(rows)
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[(r.length, r.scored)].append(i)
    for (T, S), members in groups.items():
        for b0 in range(0, len(members), batch):
            part = members[b0 : b0 + batch]
            seg = torch.stack([stream[rows[i].start : rows[i].start + T + 1] for i in part]).long()
            nll = token_nll(model, seg[:, :-1], seg[:, 1:], None, S).float().cpu()
            for k, i in enumerate(part):
                out[i] = nll[k]
    return out


@torch.no_grad()
def evaluator_losses(
    model, stream: torch.Tensor, rows: list[Row], trunc: int, block: int, batch: int = 8
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss_full, loss_short), (N,) each: the evaluator's loss at every scored position of ``rows``, in order.

    ``loss_full`` sees the whole row before the position; ``loss_short`` the block's truncated context
    (:func:`short_segments`), and equals ``loss_full`` where at most ``trunc`` tokens precede.  ``batch``:
    rows per step of the whole-row pass; the short pass holds about as many tokens per step.
    """
    full = _score(model, stream, rows, batch)
    short = [f.clone() for f in full]
    pieces = [(i, s, e) for i, r in enumerate(rows) for s, e in short_segments(r, trunc, block)]
    segs = [Row(rows[i].start + s, e - s, e - (s + trunc - 1)) for i, s, e in pieces]
    held = min(batch, len(rows)) * max((r.length for r in rows), default=1)  # tokens of a whole-row step
    per_step = max(1, held // (trunc + block))
    if not getattr(model, "chunked_head", False):  # its logits of every scored position: within the budget
        per_step = max(1, min(per_step, LOGITS_BUDGET // max(1, block * model.shape.vocab_size)))
    for (i, s, e), loss in zip(pieces, _score(model, stream, segs, per_step), strict=True):
        first = rows[i].length - rows[i].scored
        lo = max(s + trunc - 1, first)  # the positions of this block that the row scores
        short[i][lo - first : e - first] = loss[lo - (s + trunc - 1) :]
    return torch.cat(full), torch.cat(short)


_FAILURES = (RuntimeError, MemoryError, ExtrapError)  # what one length may raise without stopping the others


def longppl_at(
    result: LengthResult, evaluator, plan: Plan, trunc: int, block: int, spec: LongPPLSettings
) -> LongPPLResult:
    """LongPPL at one evaluated length: the evaluator's key tokens, the evaluated losses ``result.nll`` on them."""
    L, t0 = result.length, time.perf_counter()
    if not result.ok or result.nll is None:
        why = "the evaluation failed at this length" if result.error else "no per-token losses to select from"
        return LongPPLResult(L, None, None, result.tokens, None, error=why)
    try:
        full, short = evaluator_losses(evaluator, plan.stream, protocol_rows(plan, L), trunc, block, plan.batch)
    except _FAILURES as e:
        why = f"the evaluator failed: {(str(e).splitlines() or [type(e).__name__])[0][:200]}"
        return LongPPLResult(L, None, None, result.tokens, result.loss, time.perf_counter() - t0, why)
    nll = result.nll.float().cpu()
    if full.numel() != nll.numel():  # the rows must be the evaluation's own
        raise ExtrapError(f"LongPPL at {L}: the evaluator scored {full.numel()} tokens, the evaluation {nll.numel()}")
    seconds = time.perf_counter() - t0
    if not (torch.isfinite(full).all() and torch.isfinite(short).all()):
        return LongPPLResult(L, None, None, nll.numel(), result.loss, seconds, "the evaluator's loss is not finite")
    key = key_tokens(full, short, spec.alpha, spec.beta)
    n = int(key.sum())
    return LongPPLResult(L, key_loss(nll, key), n, nll.numel(), result.loss, seconds, key=key)


def check_evaluator(run: Run, evaluator: Run) -> None:
    """Refuse an evaluator that is not a causal LM or reads text with another tokenizer than ``run``."""
    from extrap.model.protocol import ExtrapLM

    if not isinstance(evaluator.model, ExtrapLM):
        raise ExtrapError(f"{evaluator.path} is not a causal LM: LongPPL's evaluator must predict the next token")
    a, b = run.tokenizer, evaluator.tokenizer
    if (a.name, a.vocab_size, a.fingerprint) != (b.name, b.vocab_size, b.fingerprint):
        raise ExtrapError(
            f"the evaluator {evaluator.path} reads text with another tokenizer ({b.name}, {b.vocab_size} tokens, "
            f"{b.fingerprint}) than {run.path} ({a.name}, {a.vocab_size} tokens, {a.fingerprint}): "
            "key tokens are chosen token by token, so both must share one"
        )


def longppl_report(
    run: Run, settings: EvalSettings, evaluator: Run | None = None, spec: LongPPLSettings | None = None
) -> LongPPLReport:
    """Evaluate ``run`` as :func:`extrap.evaluate.evaluate_run` does, and its LongPPL at every length.

    ``evaluator``: the run that chooses the key tokens (default: ``run`` itself); it must share the
    run's tokenizer.  ``spec``: α, β and the block (default :class:`LongPPLSettings`).  A length whose
    evaluation or evaluator pass fails keeps its ``error`` and the others are kept.
    """
    spec = spec or LongPPLSettings()
    judge = run if evaluator is None else evaluator
    check_evaluator(run, judge)  # before anything is evaluated
    report = evaluate_run(run, settings)
    lengths = [r.length for r in report.results]
    stream, tokens = evaluation_stream(run, settings, lengths)
    s = settings
    plan = Plan(judge.model, stream, s.protocol, tokens or max(lengths), s.stride, s.targets, s.batch, max(lengths))
    trunc, block = run.train_length, spec.block_size(run.train_length)
    judge.model.eval()
    results = []
    for r in report.results:
        if s.progress:
            log.info("  L_ex=%s: LongPPL: the evaluator's whole and truncated (%s + k) contexts...", r.length, trunc)
        results.append(longppl_at(r, judge.model, plan, trunc, block, spec))
        if s.progress:
            _show(results[-1])
    info = LongPPL(spec.alpha, spec.beta, trunc, block, spec.block_fraction, str(judge.path), tuple(results))
    return LongPPLReport(report, info)


def _show(r: LongPPLResult) -> None:
    if r.error:
        log.info("  L_ex=%s: LongPPL: %s", r.length, r.error)
    elif r.longppl is None:
        log.info("  L_ex=%s: LongPPL: no key tokens among %s", r.length, r.tokens)
    else:
        log.info("  L_ex=%s: LongPPL %.3f on %s key tokens of %s", r.length, r.longppl, r.key_tokens, r.tokens)
