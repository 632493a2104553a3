"""Experiments ``extrapolation`` (000) and ``alibi-slopes`` (003 §4, Table 1).

``extrapolation``: for every PE, the theory verdict and TRF; a model trained at L_tr; the
three evaluation protocols up to 16x L_tr; gradient and attention ERFs; and the sliding
versus non-overlapping timing (000 Table 1).  ``alibi-slopes``: the same runs for ALiBi
with shifted slopes, one slope for all heads, and windowed attention.

Every PE is trained and measured in its own run folder ``DIR/runs/<pe>/``; each finished
stage is a result recorded there (``eval-<protocol>``, ``erf``, ``theory-trained``) and is not
computed again.  A scheme with learned bias parameters is analysed at its trained values too
(:mod:`.trained`): the theory table gets a row per layer and head, and its TRF beside the ERFs
is the trained model's.  The results record whether each model learned (:mod:`.learning`):
the report judges the claims about trained models only on those.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from extrap.erf import RunErf
from extrap.errors import ExtrapError
from extrap.evaluate.settings import EvalSettings
from extrap.io import atomic_write_json
from extrap.results import (
    INITIAL,
    TRAINED,
    ErfEntry,
    EvalReport,
    Slopes,
    SlopeVariant,
    Spearman,
    StudyResults,
    TheoryRow,
    Timing,
    TimingRow,
    slug,
)
from extrap.run import RunDir
from extrap.run.records import TrainingSummary
from extrap.study.learning import learning_gate
from extrap.study.orchestrator import (
    Experiment,
    Job,
    Outcome,
    StudyRecord,
    StudyRequest,
    provenance,
    run_summary,
    saved_record,
)
from extrap.study.presets import DEFAULT_PES, STUDY_PRESETS, SlopeVariants, StudySettings
from extrap.study.trained import TrainedTheory, initial_rows, trained_theory

PROTOCOLS = ("nonoverlapping", "sliding", "last-token")
THEORY_EPS = (1e-3, 1e-6)  # the theory table's ε
TIMING_FILE = "timing.json"

log = logging.getLogger(__name__)


def slope_variants(train_length: int, table: SlopeVariants) -> list[SlopeVariant]:
    """003 Table 1's models for a study at ``train_length`` (window sizes scaled from L_tr = 512)."""
    out = [SlopeVariant(f"alibi:shift={d}" if d else "alibi", "shift", f"Δ={d}") for d in table.shift]
    out += [SlopeVariant(f"alibi:h={h}", "same-h", f"h={h}") for h in table.same_h]
    for w in table.window:
        ww = max(1, round(w * train_length / 512))
        out.append(SlopeVariant(f"window:{ww}", "window", f"w={w}→{ww}"))
    return out


R = TypeVar("R")


def recorded(run_dir: RunDir, name: str, compute: Callable[[], R], kind: type[R]) -> R:
    """The run's result ``name`` (a ``kind`` record): computed and recorded first unless it is recorded already.

    It is always read back from its file, so a fresh result and a resumed one are the same object.
    """
    if not run_dir.has_result(name):
        run_dir.write_result(name, compute())
    return run_dir.read_result(name, kind)


@dataclass(frozen=True)
class PeJob:
    """One PE of an extrapolation or ALiBi-slope study: what its worker trains and measures (picklable)."""

    pe: str
    run_dir: str
    preset: str  # the training preset
    overrides: Mapping[str, Any]  # training settings over the preset's (steps, corpus)
    multiples: tuple[int, ...]  # evaluation lengths, as multiples of L_tr
    eval_tokens: int | None
    targets: int
    erf_multiple: int
    erf_segments: int
    delta: float  # δ of 000 Definition 0.1
    threads: int

    def eval_settings(self, train_length: int, protocol: str) -> EvalSettings:
        lengths = tuple(train_length * k for k in self.multiples)
        return EvalSettings(lengths, protocol, tokens=self.eval_tokens, targets=self.targets, delta=self.delta)


@dataclass(frozen=True)
class PeOutput:
    """What one PE's worker measured: its training summary (final.json), every protocol's evaluation,
    its receptive fields (``extrap erf``'s JSON) and its trained theory rows."""

    pe: str
    run_dir: str
    train: TrainingSummary | None
    eval: Mapping[str, EvalReport]  # {protocol: report}
    erf: RunErf
    theory: TrainedTheory

    def to_json(self) -> dict:
        reports = {p: rep.to_json() for p, rep in self.eval.items()}
        train = self.train.to_json() if self.train is not None else None
        head = {"pe": self.pe, "run_dir": self.run_dir, "train": train, "eval": reports}
        return {**head, "erf": self.erf.to_json(), "theory": self.theory.to_json()}


def pe_job(job: PeJob) -> PeOutput:
    """One PE (in a worker process): train, evaluate with every protocol, receptive fields."""
    import torch

    torch.set_num_threads(job.threads)
    import extrap
    from extrap import erf, evaluate
    from extrap import train as training

    rd = RunDir(job.run_dir)
    if not rd.is_finished():
        m, t = training.build_configs(job.pe, job.preset, overrides={**job.overrides, "threads": job.threads})
        training.train(rd.path, m, t, resume=rd.exists(), progress=False)
    L_tr = rd.read_config().train_length
    run = cache(lambda: extrap.load(rd.path, job.overrides.get("device")))  # loaded only when a stage is missing

    def evaluated(protocol: str) -> EvalReport:
        return recorded(
            rd,
            f"eval-{protocol}",
            lambda: evaluate.evaluate_run(run(), job.eval_settings(L_tr, protocol)),
            EvalReport,
        )

    evals = {p: evaluated(p) for p in PROTOCOLS}
    at = erf.ErfSettings(length=L_tr * job.erf_multiple, segments=job.erf_segments)
    receptive = recorded(rd, "erf", lambda: erf.run_erf(run(), at), RunErf)
    lengths = [L_tr * k for k in job.multiples if k > 1]
    theory = recorded(
        rd, "theory-trained", lambda: trained_theory(rd.path, job.pe, THEORY_EPS, lengths, L_tr), TrainedTheory
    )
    return PeOutput(job.pe, str(rd.path), rd.read_final(), evals, receptive, theory)


TIMING_REPEATS = 3  # each timing is the fastest of this many runs: a busy machine only ever adds time


def _fastest(method, W: int) -> float:
    """The shortest wall time of ``method(W)`` over :data:`TIMING_REPEATS` runs."""
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
                rows[name].append(_fastest(method, W))
    base = sum(rows["nonoverlapping"])
    return Timing(
        pe=run.pe,
        window_sizes=list(settings.timing_windows),
        tokens=T,
        rows=[TimingRow(method=k, seconds=v, relative=sum(v) / base) for k, v in rows.items()],
    )


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


def timing_section(
    out: Path, pes: list[str], done: Collection[str], settings: StudySettings, jobs: int
) -> Timing | None:
    """000 Table 1 on the first trained model (ALiBi when there is one), measured once per study folder."""
    path = out / TIMING_FILE
    if not path.exists():
        pe = next((p for p in ("alibi", *pes) if p in done), None)
        if pe is None:
            return None
        log.info("study: timing sliding vs non-overlapping inference (000 Table 1)")
        atomic_write_json(path, measure_timing(out / "runs" / slug(pe), settings, max(1, jobs)).to_json())
    return Timing.from_json(json.loads(path.read_text()))


def assemble(
    request: StudyRequest,
    settings: StudySettings,
    pes: list[str],
    variants: list[SlopeVariant] | None,
    num_heads: int,
    train_length: int,
    outcome: Outcome,
) -> StudyResults:
    """The study's results from the per-PE outputs, with theory, TRFs and (extrapolation) timing."""
    out, L_tr = request.out, train_length
    done: dict[str, PeOutput] = {pe: outcome.done[pe] for pe in pes if pe in outcome.done}  # the study's order
    evals = {pe: dict(o.eval) for pe, o in done.items()}
    first_run = next((o.run_dir for o in done.values()), None)
    trained = {pe: o.theory for pe, o in done.items()}
    erf, sp = erf_section({pe: o.erf for pe, o in done.items()}, trained, num_heads)
    results = StudyResults(
        preset=request.preset,
        experiment=request.experiment,
        pes=pes,
        train_length=L_tr,
        n_head=num_heads,
        lengths=[L_tr * k for k in settings.multiples],
        delta=request.delta,
        **asdict(provenance([o.run_dir for o in done.values()])),
        settings=asdict(settings),
        theory=theory_rows(pes, num_heads, L_tr, [L_tr * k for k in settings.multiples if k > 1], trained),
        runs={pe: run_summary(o.run_dir, o.train, out) for pe, o in done.items()},
        eval=evals,
        erf=erf,
        spearman=sp,
        learning=learning_gate(evals, first_run, L_tr),
        failures=outcome.failures,
    )
    if variants is not None:
        results.slopes = Slopes(variants=variants)
    if request.experiment == "extrapolation":
        results.timing = timing_section(out, pes, done, settings, request.jobs)
    return results


def progress_line(res: PeOutput) -> str:
    last = res.eval.get("last-token")
    worst = last.worst_ratio if last is not None else None
    return f"loss {res.train.final_loss:.4f}, last-token worst ratio {worst if worst is not None else float('nan'):.4f}"


def build(request: StudyRequest) -> Experiment:
    """Experiment ``extrapolation`` or ``alibi-slopes``, checked before anything is trained."""
    from extrap import positional
    from extrap.config import build_configs

    if request.preset not in STUDY_PRESETS:
        raise ExtrapError(f"unknown preset {request.preset!r} (choose from {', '.join(STUDY_PRESETS)})")
    settings = STUDY_PRESETS[request.preset]
    overrides = {"steps": request.steps, "corpus": request.corpus, "device": request.device}
    model_cfg, train_cfg = build_configs("nope", settings.train_preset, overrides=overrides)
    L_tr = train_cfg.train_length
    variants = slope_variants(L_tr, settings.slope_variants) if request.experiment == "alibi-slopes" else None
    saved = saved_record(request.out) if request.resume and request.pes is None else None
    resumed = list(saved.pes) if saved else None  # resume: same PEs
    pes = list(dict.fromkeys([v.pe for v in variants] if variants else (request.pes or resumed or DEFAULT_PES)))
    for pe in pes:
        positional.get(pe)  # fail early, before any training, on a bad spec
    common = dict(
        preset=settings.train_preset,
        overrides={k: v for k, v in overrides.items() if v is not None},
        multiples=tuple(settings.multiples),
        eval_tokens=settings.eval_tokens,
        targets=settings.targets,
        erf_multiple=settings.erf_multiple,
        erf_segments=settings.erf_segments,
        delta=request.delta,
        threads=request.threads,
    )
    return Experiment(
        record=StudyRecord(
            request.preset,
            request.experiment,
            tuple(pes),
            steps=request.steps,
            corpus=request.corpus,
            device=request.device,
            delta=request.delta,
        ),
        must_match=("preset", "experiment", "pes", "delta", "steps", "corpus"),  # a report covers all its PEs
        headline=f"study: {len(pes)} PEs, preset {request.preset}, L_tr={L_tr}, {request.jobs} at a time "
        f"-> {request.out}",
        worker=pe_job,
        jobs=[Job(pe, PeJob(pe, str(request.out / "runs" / slug(pe)), **common)) for pe in pes],
        progress=progress_line,
        assemble=lambda outcome: assemble(request, settings, pes, variants, model_cfg.n_head, L_tr, outcome),
    )
