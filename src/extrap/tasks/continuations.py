"""Log-likelihood and greedy match of continuations given a prompt: the model side of task scoring."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from extrap.model.protocol import ExtrapLM, model_device


@dataclass(frozen=True)
class Continuation:
    """A continuation scored given its prompt: summed log-likelihood, whether greedy decoding reproduces it, and
    the greedy prediction ids up to and including its first wrong token."""

    loglik: float
    greedy: bool
    prediction: list[int]


def continuation_summary(rows: torch.Tensor, cont: list[int]) -> Continuation:
    """Log-likelihood, greedy match and greedy prediction of ``cont`` from its log-prob rows (T, V)."""
    tgt = torch.tensor(cont, dtype=torch.long)
    arg = rows.argmax(-1)
    hits = (arg == tgt).tolist()
    j = hits.index(False) if False in hits else len(cont)
    return Continuation(
        loglik=float(rows.gather(1, tgt[:, None]).sum()),
        greedy=j == len(cont),
        prediction=list(cont[:j]) + ([int(arg[j])] if j < len(cont) else []),
    )


@torch.no_grad()
def score_continuations(
    model: ExtrapLM, pairs: list[tuple[list[int], list[int]]], batch: int = 4
) -> list[Continuation]:
    """For (prompt ids, continuation ids): log-likelihood, greedy match, greedy prediction ids.

    Rows are right-padded (harmless for a causal model); only the logits of the
    continuation positions are computed (``last=``).
    """
    device = model_device(model)
    out = []
    for b0 in range(0, len(pairs), batch):
        chunk = pairs[b0 : b0 + batch]
        seqs = [p + c for p, c in chunk]
        width = max(len(s) for s in seqs) - 1
        x = torch.zeros(len(chunk), width, dtype=torch.long)
        for i, s in enumerate(seqs):
            x[i, : len(s) - 1] = torch.tensor(s[:-1], dtype=torch.long)
        start = min(len(p) for p, _ in chunk) - 1  # first position whose prediction is needed
        logits = model(x.to(device), last=width - start).logits.float()
        logp = F.log_softmax(logits, dim=-1).cpu()
        for i, (p, c) in enumerate(chunk):
            out.append(continuation_summary(logp[i, len(p) - 1 - start : len(p) - 1 - start + len(c)], c))
    return out


@torch.no_grad()
def score_candidates(model: ExtrapLM, prompt: list[int], conts: list[list[int]]) -> list[Continuation]:
    """:func:`score_continuations` of several continuations of one prompt, sharing the prompt.

    For an :class:`extrap.model.protocol.ExtrapLM` the prompt is run once into the model's KV cache; the
    continuations then advance together, one token per step, so ranking N candidates costs
    about one forward pass instead of N.  Other models score every (prompt, continuation)
    pair on its own.
    """
    if not isinstance(model, ExtrapLM):
        return score_continuations(model, [(prompt, c) for c in conts], batch=len(conts))
    device = model_device(model)
    N, T = len(conts), max(len(c) for c in conts)
    cache = model.new_cache(seq_len=len(prompt) + T - 1)  # θ of a length-dependent RoPE: the longest row's
    first = model.step(torch.tensor([prompt], dtype=torch.long, device=device), 0, cache, last=1)[:, -1]  # no (L, V)
    cache.expand(N)
    tok = torch.tensor([c + [0] * (T - len(c)) for c in conts], dtype=torch.long, device=device)  # padded
    rows = [first.expand(N, -1)]
    for t in range(T - 1):
        rows.append(model.step(tok[:, t : t + 1], len(prompt) + t, cache)[:, -1])
    logp = F.log_softmax(torch.stack(rows, 1).float(), dim=-1).cpu()  # (N, T, V)
    return [continuation_summary(logp[i, : len(c)], c) for i, c in enumerate(conts)]
