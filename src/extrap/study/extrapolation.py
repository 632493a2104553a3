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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from extrap.errors import ExtrapError
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
from extrap.study.learning import learning_gate
from extrap.study.orchestrator import (
    Experiment,
    Job,
    Outcome,
    StudyRequest,
    provenance,
    run_summary,
    saved_record,
)
from extrap.study.presets import DEFAULT_PES, STUDY_PRESETS, SlopeVariants, StudySettings
from extrap.study.trained import initial_rows, trained_theory

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


def recorded(run_dir: RunDir, name: str, compute: Callable[[], dict]) -> dict:
    """The run's result ``name``: computed and recorded first unless it is recorded already."""
    if not run_dir.has_result(name):
        run_dir.write_result(name, _Raw(compute()))
    return run_dir.read_result(name, _Raw).value


@dataclass(frozen=True)
class _Raw:  # interim: until every recorded report is a typed record
    value: dict

    def to_json(self):
        return self.value

    @classmethod
    def from_json(cls, d):
        return cls(d)


def pe_job(args: dict) -> dict:
    """One PE (in a worker process): train, evaluate with every protocol, receptive fields."""
    import torch

    torch.set_num_threads(args["threads"])
    import extrap
    from extrap import erf, evaluate
    from extrap import train as training

    rd = RunDir(args["run_dir"])
    if not rd.is_finished():
        m, t = training.build_configs(
            args["pe"], args["preset"], overrides={**args["overrides"], "threads": args["threads"]}
        )
        training.train(rd.path, m, t, resume=rd.exists(), progress=False)
    L_tr = rd.read_config().train_length
    run = cache(lambda: extrap.load(rd.path))  # loaded only when a stage is missing

    def evaluated(protocol):
        return evaluate.evaluate_run(
            rd.path,
            lengths=[L_tr * k for k in args["multiples"]],
            protocol=protocol,
            tokens=args["eval_tokens"],
            targets=args["targets"],
            delta=args["delta"],
            run=run(),
        )

    evals = {p: recorded(rd, f"eval-{p}", lambda p=p: evaluated(p)) for p in PROTOCOLS}
    receptive = recorded(
        rd, "erf", lambda: erf.run_erf(run(), "both", length=L_tr * args["erf_multiple"], segments=args["erf_segments"])
    )
    lengths = [L_tr * k for k in args["multiples"] if k > 1]
    theory = recorded(rd, "theory-trained", lambda: trained_theory(rd.path, args["pe"], THEORY_EPS, lengths, L_tr))
    return {
        "pe": args["pe"],
        "run_dir": str(rd.path),
        "train": rd.read_final().to_json(),
        "eval": evals,
        "erf": receptive,
        "theory": theory,
    }


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
    pes: list[str], num_heads: int, train_length: int, lengths: list[int], per_pe: dict[str, dict]
) -> list[TheoryRow]:
    """000 Theorem 0.4 and Eq. 22 for every PE, one row per head: initial parameters, then (schemes
    with learned bias parameters) the trained values of every layer."""
    rows = []
    for pe in pes:
        rows += initial_rows(pe, num_heads, THEORY_EPS, lengths, train_length)
        rows += (per_pe.get(pe, {}).get("theory") or {}).get("rows") or []
    return [TheoryRow.from_dict(r) for r in rows]


def erf_entry(pe: str, res: dict, num_heads: int) -> ErfEntry:
    """One run's measured ERFs beside the TRF (theory.STUDY_TRF) of the values its model uses."""
    from extrap.theory import STUDY_TRF, receptive_field

    e, attn = res["erf"], res["erf"].get("attn_erf")
    initial = receptive_field(pe, eps=STUDY_TRF.eps, reduce=STUDY_TRF.reduce, num_heads=num_heads)
    entry = ErfEntry(
        grad_erf=e.get("grad_erf"),
        grad_curve=e.get("grad_curve"),
        attn_erf=attn.get("summary") if isinstance(attn, dict) else attn,
        trf=initial.value,
        trf_eps=STUDY_TRF.eps,
        trf_reduce=STUDY_TRF.reduce,
        trf_params=INITIAL,
        trf_reason=initial.reason,
    )
    trained = res.get("theory") or {}
    if "trf" in trained:  # a scheme with learned bias parameters: the TRF of the trained model
        entry.trf, entry.trf_reason, entry.trf_params = trained["trf"], trained.get("trf_reason"), TRAINED
        entry.trf_initial = initial.value
    return entry


def erf_section(per_pe: dict[str, dict], num_heads: int) -> tuple[dict[str, ErfEntry], Spearman]:
    """Each run's measured ERFs beside its TRF (trained values where the scheme learns them), and their
    rank correlation."""
    from extrap.erf import spearman
    from extrap.theory import STUDY_TRF

    section = {pe: erf_entry(pe, res, num_heads) for pe, res in per_pe.items()}
    finite = [(v.trf, v.grad_erf, v.attn_erf) for v in section.values() if v.trf is not None]
    sp = Spearman(n=len(finite), trf_eps=STUDY_TRF.eps, trf_reduce=STUDY_TRF.reduce, trf_params=TRAINED)
    if len(finite) >= 3:
        sp.grad = spearman([a for a, _, _ in finite], [b for _, b, _ in finite])
        if all(c is not None for _, _, c in finite):
            sp.attn = spearman([a for a, _, _ in finite], [c for _, _, c in finite])
    return section, sp


def timing_section(out: Path, pes: list[str], done: dict, settings: StudySettings, jobs: int) -> Timing | None:
    """000 Table 1 on the first trained model (ALiBi when there is one), measured once per study folder."""
    path = out / TIMING_FILE
    if not path.exists():
        pe = next((p for p in ("alibi", *pes) if p in done), None)
        if pe is None:
            return None
        log.info("study: timing sliding vs non-overlapping inference (000 Table 1)")
        atomic_write_json(path, measure_timing(out / "runs" / slug(pe), settings, max(1, jobs)).to_dict())
    return Timing.from_dict(json.loads(path.read_text()))


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
    per_pe = {pe: outcome.done[pe] for pe in pes if pe in outcome.done}  # the study's order
    erf, sp = erf_section(per_pe, num_heads)
    results = StudyResults(
        preset=request.preset,
        experiment=request.experiment,
        pes=pes,
        train_length=L_tr,
        n_head=num_heads,
        lengths=[L_tr * k for k in settings.multiples],
        delta=request.delta,
        **provenance([r["run_dir"] for r in per_pe.values()]),
        settings=asdict(settings),
        theory=theory_rows(pes, num_heads, L_tr, [L_tr * k for k in settings.multiples if k > 1], per_pe),
        runs={pe: run_summary(r["run_dir"], r["train"], out) for pe, r in per_pe.items()},
        eval={pe: {p: EvalReport.from_dict(rep) for p, rep in r["eval"].items()} for pe, r in per_pe.items()},
        erf=erf,
        spearman=sp,
        learning=learning_gate(per_pe, L_tr),
        failures=outcome.failures,
    )
    if variants is not None:
        results.slopes = Slopes(variants=variants)
    if request.experiment == "extrapolation":
        results.timing = timing_section(out, pes, per_pe, settings, request.jobs)
    return results


def progress_line(res: dict) -> str:
    worst = (res["eval"].get("last-token") or {}).get("worst_ratio")
    return (
        f"loss {res['train']['final_loss']:.4f}, last-token worst ratio "
        f"{worst if worst is not None else float('nan'):.4f}"
    )


def build(request: StudyRequest) -> Experiment:
    """Experiment ``extrapolation`` or ``alibi-slopes``, checked before anything is trained."""
    from extrap import positional
    from extrap.config import build_configs

    if request.preset not in STUDY_PRESETS:
        raise ExtrapError(f"unknown preset {request.preset!r} (choose from {', '.join(STUDY_PRESETS)})")
    settings = STUDY_PRESETS[request.preset]
    overrides = {"steps": request.steps, "corpus": request.corpus}
    model_cfg, train_cfg = build_configs("nope", settings.train_preset, overrides=overrides)
    L_tr = train_cfg.train_length
    variants = slope_variants(L_tr, settings.slope_variants) if request.experiment == "alibi-slopes" else None
    saved = saved_record(request.out) if request.resume and request.pes is None else None
    resumed = saved.get("pes") if saved and isinstance(saved.get("pes"), list) else None  # resume: same PEs
    pes = list(dict.fromkeys([v.pe for v in variants] if variants else (request.pes or resumed or DEFAULT_PES)))
    for pe in pes:
        positional.get(pe)  # fail early, before any training, on a bad spec
    common = {
        "preset": settings.train_preset,
        "overrides": {k: v for k, v in overrides.items() if v is not None},
        "multiples": list(settings.multiples),
        "eval_tokens": settings.eval_tokens,
        "targets": settings.targets,
        "erf_multiple": settings.erf_multiple,
        "erf_segments": settings.erf_segments,
        "delta": request.delta,
        "threads": request.threads,
    }
    return Experiment(
        record={
            "preset": request.preset,
            "experiment": request.experiment,
            "pes": pes,
            "delta": request.delta,
            "steps": request.steps,
            "corpus": request.corpus,
        },
        must_match=("preset", "experiment", "pes", "delta", "steps", "corpus"),  # a report covers all its PEs
        headline=f"study: {len(pes)} PEs, preset {request.preset}, L_tr={L_tr}, {request.jobs} at a time "
        f"-> {request.out}",
        worker=pe_job,
        jobs=[Job(pe, {**common, "pe": pe, "run_dir": str(request.out / "runs" / slug(pe))}) for pe in pes],
        progress=progress_line,
        assemble=lambda outcome: assemble(request, settings, pes, variants, model_cfg.n_head, L_tr, outcome),
    )
