"""What experiments ``extrapolation`` and ``alibi-slopes`` measure beside the evaluations: the theory rows
(000 Theorem 0.4, Eq. 22), the TRF against the measured ERFs with their rank correlation, and the inference
timing (000 Table 1)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from extrap.erf import RunErf
from extrap.experiments.extrapolation.presets import StudySettings
from extrap.experiments.extrapolation.results import ErfEntry, Spearman, TheoryRow, Timing, TimingRow
from extrap.results import INITIAL, TRAINED
from extrap.run import RunDir
from extrap.run.parameters import head_values
from extrap.study.trained import TrainedTheory, learns_bias

THEORY_EPS = (1e-3, 1e-6)  # the theory table's ε

R = TypeVar("R")


def recorded(run_dir: RunDir, name: str, compute: Callable[[], R], kind: type[R]) -> R:
    """The run's result ``name`` (a ``kind`` record): computed and recorded first unless it is recorded already.

    It is always read back from its file, so a fresh result and a resumed one are the same object.
    """
    if not run_dir.has_result(name):
        run_dir.write_result(name, compute())
    return run_dir.read_result(name, kind)


TIMING_REPEATS = 3  # each timing is the fastest of this many runs: a busy machine only ever adds time


def fastest_time(method, W: int) -> float:
    """The shortest wall time of ``method(W)`` over :data:`TIMING_REPEATS` runs, after one untimed run.

    The untimed run takes the warm-up (kernel selection, allocations for this window's shapes) out of the
    timing: with it, the first sliding window once took 7.15 s at W = 16 against 0.53 s at W = 32, and the
    sliding / nonoverlapping ratio read 56.6× on one machine and 17.8× on another (issue 28).
    """
    method(W)
    best = math.inf
    for _ in range(TIMING_REPEATS):
        t0 = time.perf_counter()
        method(W)
        best = min(best, time.perf_counter() - t0)
    return best


def measure_timing(run_dir: Path, settings: StudySettings, threads: int) -> Timing:
    """000 Table 1: sliding (stride 1) vs non-overlapping vs cache-window inference, same tokens."""
    import torch

    import extrap
    from extrap import evaluate
    from extrap.run import eval_stream

    torch.set_num_threads(threads)
    run = extrap.load(run_dir)
    T = settings.timing_tokens
    stream = eval_stream(run, "validation", T + 1)
    methods = {
        "sliding": lambda W: evaluate.eval_sliding(run.model, stream, W, T, stride=1, batch=64),
        "nonoverlapping": lambda W: evaluate.eval_nonoverlapping(run.model, stream, W, T, batch=64),
        # a rolling KV cache of W tokens = attention limited to W keys (003 App. B)
        "cache-window": lambda W: run.model(stream[None, :T].long(), window=W),
    }
    rows: dict[str, list[float]] = {k: [] for k in methods}
    with torch.no_grad():
        for W in settings.timing_windows:
            for name, method in methods.items():
                rows[name].append(fastest_time(method, W))
    base = sum(rows["nonoverlapping"])
    return Timing(
        pe=run.pe,
        window_sizes=list(settings.timing_windows),
        tokens=T,
        rows=[TimingRow(method=k, seconds=v, relative=sum(v) / base) for k, v in rows.items()],
    )


def initial_rows(pe: str, num_heads: int, eps, lengths: list[int], train_length: int) -> list[TheoryRow]:
    """000 Theorem 0.4 and Eq. 22 for every head of ``pe`` at its initial parameters.

    A scheme whose bias learns records each head's initial ``values`` (a table per head, such
    as T5's buckets, as a list), which the trained rows are shown against.
    """
    from extrap import positional
    from extrap.theory import analyse

    scheme = positional.get(pe)
    init = scheme.init_values(num_heads) if learns_bias(scheme) else {}
    rows = []
    for r in analyse(pe, num_heads, eps=list(eps), lengths=lengths, train_length=train_length):
        row = {**r.to_json(), "pe": pe}  # keep the study's spelling of the spec
        if init:
            row.update(params=INITIAL, values=head_values(init, r.head))
        rows.append(TheoryRow.from_json(row))
    return rows


def theory_rows(
    pes: list[str], num_heads: int, train_length: int, lengths: list[int], trained: Mapping[str, TrainedTheory]
) -> list[TheoryRow]:
    """000 Theorem 0.4 and Eq. 22 for every PE, one row per head: initial parameters, then (schemes
    with learned bias parameters) the trained values of every layer."""
    rows = []
    for pe in pes:
        rows += initial_rows(pe, num_heads, THEORY_EPS, lengths, train_length)
        rows += [TheoryRow.from_json(h.to_json()) for h in trained[pe].rows] if pe in trained else []
    return rows


def erf_entry(pe: str, measured: RunErf, trained: TrainedTheory | None, num_heads: int) -> ErfEntry:
    """One run's measured ERFs beside the TRF (theory.STUDY_TRF) of the values its model uses."""
    from extrap.theory import STUDY_TRF, receptive_field

    initial = receptive_field(pe, eps=STUDY_TRF.eps, reduce=STUDY_TRF.reduce, num_heads=num_heads)
    grad = measured.grad
    entry = ErfEntry(
        grad_erf=grad.erf if grad else None,
        grad_curve=list(grad.curve) if grad and grad.curve else None,
        attn_erf=measured.attn.summary if measured.attn else None,
        trf=initial.value,
        trf_eps=STUDY_TRF.eps,
        trf_reduce=STUDY_TRF.reduce,
        trf_params=INITIAL,
        trf_reason=initial.reason,
    )
    if trained is not None and trained.learns_bias:  # learned bias parameters: the TRF of the trained model
        entry.trf, entry.trf_reason, entry.trf_params = trained.trf, trained.trf_reason, TRAINED
        entry.trf_initial = initial.value
    return entry


def erf_section(
    measured: Mapping[str, RunErf], trained: Mapping[str, TrainedTheory], num_heads: int
) -> tuple[dict[str, ErfEntry], Spearman]:
    """Each run's measured ERFs beside its TRF (trained values where the scheme learns them), and their
    rank correlation."""
    from extrap.erf import spearman
    from extrap.theory import STUDY_TRF

    section = {pe: erf_entry(pe, m, trained.get(pe), num_heads) for pe, m in measured.items()}
    finite = [(v.trf, v.grad_erf, v.attn_erf) for v in section.values() if v.trf is not None]
    sp = Spearman(n=len(finite), trf_eps=STUDY_TRF.eps, trf_reduce=STUDY_TRF.reduce, trf_params=TRAINED)
    if len(finite) >= 3:
        sp.grad = spearman([a for a, _, _ in finite], [b for _, b, _ in finite])
        if all(c is not None for _, _, c in finite):
            sp.attn = spearman([a for a, _, _ in finite], [c for _, _, c in finite])
    return section, sp
