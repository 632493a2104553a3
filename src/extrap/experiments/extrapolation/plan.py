"""Experiments ``extrapolation`` (000) and ``alibi-slopes`` (003 §4, Table 1).

``extrapolation``: for every PE, the theory verdict and TRF; a model trained at L_tr; the
three evaluation protocols up to 16x L_tr; gradient and attention ERFs; and the sliding
versus non-overlapping timing (000 Table 1).  ``alibi-slopes``: the same runs for ALiBi
with shifted slopes, one slope for all heads, and windowed attention.

Every PE is trained and measured in its own run folder ``DIR/runs/<pe>/``; each finished
stage is a result recorded there (``eval-<protocol>``, ``erf``, ``theory-trained``) and is not
computed again.  A scheme with learned bias parameters is analysed at its trained values too
(:mod:`extrap.study.trained`): the theory table gets a row per layer and head, and its TRF beside the ERFs
is the trained model's.  The results record whether each model learned (:mod:`extrap.study.learning`):
the report judges the claims about trained models only on those.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import asdict
from functools import cache
from pathlib import Path

from extrap.erf import RunErf
from extrap.errors import ExtrapError
from extrap.experiments.extrapolation.about import DEFAULT_PES
from extrap.experiments.extrapolation.measure import (
    THEORY_EPS,
    erf_section,
    measure_timing,
    recorded,
    theory_rows,
)
from extrap.experiments.extrapolation.presets import PRESETS, SlopeVariants, StudySettings
from extrap.experiments.extrapolation.records import PeJob, PeOutput
from extrap.experiments.extrapolation.results import RESULTS, ExtrapolationBlock, Slopes, SlopeVariant, Timing
from extrap.experiments.extrapolation.values import PROTOCOLS
from extrap.io import atomic_write_json
from extrap.results import EvalReport, StudyResults, slug
from extrap.run import RunDir
from extrap.study.models import preset_settings, trained_results
from extrap.study.orchestrator import saved_record
from extrap.study.plan import Experiment, Job, Outcome, StudyRecord, StudyRequest
from extrap.study.trained import TrainedTheory, trained_theory

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
    trained = {pe: o.theory for pe, o in done.items()}
    erf, sp = erf_section({pe: o.erf for pe, o in done.items()}, trained, num_heads)
    runs = {pe: (o.run_dir, o.train) for pe, o in done.items()}
    evals = {pe: o.eval for pe, o in done.items()}
    lengths = [L_tr * k for k in settings.multiples]
    results = trained_results(
        request, request.experiment, runs, evals, L_tr, lengths, pes=pes, n_head=num_heads,
        settings=asdict(settings), failures=outcome.failures,
    )  # fmt: skip
    timed = request.experiment == "extrapolation"
    own = ExtrapolationBlock(
        theory=theory_rows(pes, num_heads, L_tr, [L_tr * k for k in settings.multiples if k > 1], trained),
        erf=erf,
        spearman=sp,
        slopes=Slopes(variants=variants) if variants is not None else None,
        timing=timing_section(out, pes, done, settings, request.jobs) if timed else None,
    )
    RESULTS.put(results, own)
    return results


def progress_line(res: PeOutput) -> str:
    last = res.eval.get("last-token")
    worst = last.worst_ratio if last is not None else None
    return f"loss {res.train.final_loss:.4f}, last-token worst ratio {worst if worst is not None else float('nan'):.4f}"


def build(request: StudyRequest) -> Experiment:
    """Experiment ``extrapolation`` or ``alibi-slopes``, checked before anything is trained."""
    from extrap import positional
    from extrap.config import build_configs

    settings: StudySettings = preset_settings(PRESETS, request.preset)
    overrides = {"steps": request.steps, "corpus": request.corpus, "device": request.device}
    model_cfg, train_cfg = build_configs("nope", settings.train_preset, overrides=overrides)
    L_tr = train_cfg.train_length
    variants = slope_variants(L_tr, settings.slope_variants) if request.experiment == "alibi-slopes" else None
    if variants and request.pes is not None:  # its PEs are the slope variants: a list would be dropped
        raise ExtrapError("the alibi-slopes experiment trains its own ALiBi slope variants: PEs are not chosen")
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
