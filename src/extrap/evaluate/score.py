"""Score one long token stream or text file as a single sequence, streamed through a rolling KV cache.

The Python side of ``extrap eval RUN --file PATH``: the same streaming path as a windowed length
of :func:`extrap.evaluate.evaluate_run`, for text that is not a corpus split.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from extrap.errors import ExtrapError
from extrap.evaluate.stats import stderr
from extrap.evaluate.streaming import stream_nll, token_nll
from extrap.results.evaluation import FileScore
from extrap.run import Run


@dataclass(frozen=True)
class StreamScore:
    """The loss of every token of one sequence but the first."""

    tokens: int  # scored tokens (the sequence's length minus one)
    loss: float  # mean -log p per scored token, nats
    stderr: float | None  # batch-means standard error of ``loss`` (evaluate.stats)
    window: int | None  # keys per query (None: exact attention)
    seconds: float

    @property
    def ppl(self) -> float:
        return math.exp(self.loss)


def score_tokens(model, ids: torch.Tensor, window: int | None, chunk: int | None = None, progress=None) -> StreamScore:
    """Score ``ids`` (N,) as one sequence: windowed (streamed, memory O(W)) or, with ``window`` None, exact.

    ``progress``: a callable told how many tokens were just processed (a tqdm bar's ``update``).
    """
    if ids.dim() != 1 or ids.numel() < 2:
        raise ExtrapError(f"a token stream to score needs at least 2 tokens, got {ids.numel()}")
    seq = ids.long().view(1, -1)
    x, y = seq[:, :-1], seq[:, 1:]
    t0 = time.perf_counter()
    model.eval()
    with torch.no_grad():
        if window is None:
            nll = token_nll(model, x, y, None, on_tokens=progress)[0]
        else:
            nll = stream_nll(model, x, y, int(window), chunk=chunk, on_tokens=progress)[0]
    return StreamScore(nll.numel(), float(nll.double().mean()), stderr(nll), window, time.perf_counter() - t0)


def file_tokens(run: Run, path: str | Path) -> torch.Tensor:
    """The UTF-8 text of ``path`` in the run's tokenizer, as a 1-D tensor."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ExtrapError(f"{p} is not UTF-8 text") from None
    except OSError as e:
        raise ExtrapError(f"cannot read {p}: {e.strerror or e}") from None
    return torch.from_numpy(run.tokenizer.encode_array(text).astype("int64"))


def score_file_run(
    run: Run,
    path: str | Path,
    window: str | int = "auto",
    eps: float | None = None,
    progress: bool = False,
    measure: bool = True,
) -> FileScore:
    """``extrap eval RUN --file PATH``: the whole file as one sequence, scored by a loaded run.

    ``window``: "auto", W or "none" as in :func:`extrap.evaluate.resolve_window` (``eps``: the TRF's
    ε of ``auto``, default :data:`extrap.theory.WINDOW_AUTO_TRF`'s).  With a window the score carries
    its bound and, when ``measure``, its effect measured on the file's first tokens.
    """
    import hashlib

    from extrap.evaluate.driver import check_evaluation, resolve_window
    from extrap.evaluate.window_error import window_error
    from extrap.theory.receptive import WINDOW_AUTO_TRF

    ids = file_tokens(run, path)
    window_for, info = resolve_window(run, window, WINDOW_AUTO_TRF.eps if eps is None else eps)
    W = window_for(ids.numel() - 1) if window_for else None
    check_evaluation(run.model, [(ids.numel(), 1, W)], hint="give a window (--window W) or a shorter file")
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=ids.numel() - 1, desc=Path(path).name, unit="tok", unit_scale=True, leave=False)
    try:
        res = score_tokens(run.model, ids, W, progress=bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    if W is not None and measure:
        info = replace(info, error=window_error(run.model, ids, W, ids.numel() - 1, info))
    return FileScore(
        run=str(run.path),
        pe=run.pe,
        file=str(path),
        file_sha256=hashlib.sha256(Path(path).read_bytes()).hexdigest(),
        tokens=res.tokens,
        loss=res.loss,
        stderr=res.stderr,
        window=info,
        seconds=res.seconds,
        step=run.step,
        provenance=run.provenance(),
    )
