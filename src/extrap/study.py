"""``extrap study``: the paper's experiments end to end, resumable, with an HTML report.

Experiment ``extrapolation`` (000): for every PE, the theory verdict and TRF; a
model trained at L_tr; the three evaluation protocols up to 16x L_tr; gradient
and attention ERFs; and the sliding-versus-non-overlapping timing (000 Table 1).
Experiment ``alibi-slopes`` (003 §4, Table 1): ALiBi with shifted slopes, one
slope for all heads, and windowed attention.  Experiment ``alignment`` (004
§5.2): retrieval accuracy with and without temperature alignment, in
:mod:`extrap.study_alignment`.

Every PE is trained and measured in its own folder ``DIR/runs/<pe>/``; a finished
stage leaves a JSON file there and is skipped on the next call, so an
interrupted study resumes where it stopped.  Two PEs run at a time (one thread
each) because the machine this is built for has two cores.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

from extrap.errors import ExtrapError
from extrap.io import atomic_write_json, run_metadata

DEFAULT_PES = ["alibi", "kerple-log", "sandwich", "type1", "type2", "example1", "example2", "sinusoidal", "rope",
               "nope"]
PROTOCOLS = ("nonoverlapping", "sliding", "last-token")


@dataclass
class StudySettings:
    train_preset: str
    multiples: list[int]  # evaluation lengths as multiples of L_tr
    eval_tokens: int  # tokens per length for nonoverlapping / sliding
    targets: int  # last-token targets
    erf_multiple: int  # ERF at L_ex = erf_multiple * L_tr
    erf_segments: int
    timing_windows: list[int]
    timing_tokens: int
    steps: int | None = None  # override the training preset's steps
    train_overrides: dict = field(default_factory=dict)


STUDY_PRESETS = {
    "smoke": StudySettings("smoke", [1, 2, 4, 8, 16], 2048, 16, 4, 2, [8, 16, 32], 256),
    "cpu": StudySettings("cpu", [1, 2, 4, 8, 16], 16384, 64, 4, 8, [16, 32, 64, 128], 1024),
    "paper": StudySettings("paper", [1, 2, 4, 8, 16, 18], 65536, 256, 4, 16, [16, 32, 64, 128, 256, 512], 4096),
}

# 003 Table 1 variants; window sizes scale with L_tr (the paper trains at 512)
SLOPE_VARIANTS = {
    "shift": [-3, 0, 2, 4, 6, 8],
    "same-h": [0, 2, 4, 6, 8],
    "window": [40, 80, 100, 120, 160, 320],
}
SLOPE_VARIANTS_SMOKE = {"shift": [0, 6], "same-h": [2], "window": [40, 320]}


def slug(pe: str) -> str:
    """A folder name for a PE spec (formulas included)."""
    s = re.sub(r"[^A-Za-z0-9.=+-]+", "_", pe).strip("_")
    return s[:80] or "pe"


def slope_variants(train_length: int, smoke: bool) -> list[dict]:
    table = SLOPE_VARIANTS_SMOKE if smoke else SLOPE_VARIANTS
    out = []
    for d in table["shift"]:
        out.append({"pe": f"alibi:shift={d}" if d else "alibi", "group": "shift", "label": f"Δ={d}"})
    for h in table["same-h"]:
        out.append({"pe": f"alibi:h={h}", "group": "same-h", "label": f"h={h}"})
    for w in table["window"]:
        ww = max(1, round(w * train_length / 512))
        out.append({"pe": f"window:{ww}", "group": "window", "label": f"w={w}→{ww}"})
    return out


# ---------------------------------------------------------------------------
# one PE: train, evaluate, receptive fields (runs in a worker process)
# ---------------------------------------------------------------------------
def _pe_job(job: dict) -> dict:
    import torch

    torch.set_num_threads(job["threads"])
    from extrap.train import build_configs, train

    run_dir = Path(job["run_dir"])
    out = {"pe": job["pe"], "run_dir": str(run_dir)}
    final = run_dir / "final.json"
    if not final.exists():
        m, t = build_configs(job["pe"], job["preset"], overrides={**job["overrides"], "threads": job["threads"]})
        train(run_dir, m, t, resume=(run_dir / "config.json").exists(), progress=False)
    out["train"] = json.loads(final.read_text())

    from extrap.evaluate import evaluate_run
    import extrap

    run = extrap.load(run_dir)
    L_tr = run.train_length
    lengths = [L_tr * k for k in job["multiples"]]
    out["eval"] = {}
    for protocol in PROTOCOLS:
        path = run_dir / f"eval-{protocol}.json"
        if not path.exists():
            rep = evaluate_run(run_dir, lengths=lengths, protocol=protocol, tokens=job["eval_tokens"],
                               targets=job["targets"], delta=job["delta"], run=run)
            atomic_write_json(path, rep)
        out["eval"][protocol] = json.loads(path.read_text())

    path = run_dir / "erf.json"
    if not path.exists():
        from extrap.erf import run_erf

        atomic_write_json(path, run_erf(run, "both", length=L_tr * job["erf_multiple"], segments=job["erf_segments"]))
    out["erf"] = json.loads(path.read_text())
    return out


def _timing(run_dir: Path, settings: StudySettings, threads: int) -> dict:
    """000 Table 1: sliding (stride 1) vs non-overlapping vs cache-window inference, same tokens."""
    import torch

    import extrap
    from extrap.evaluate import eval_nonoverlapping, eval_sliding, eval_stream_for

    torch.set_num_threads(threads)
    run = extrap.load(run_dir)
    T = settings.timing_tokens
    stream = eval_stream_for(run, "validation", T + 1)
    rows = {"sliding": [], "nonoverlapping": [], "cache-window": []}
    for W in settings.timing_windows:
        t0 = time.perf_counter()
        eval_sliding(run.model, stream, W, T, stride=1, batch=64)
        rows["sliding"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        eval_nonoverlapping(run.model, stream, W, T, batch=64)
        rows["nonoverlapping"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with torch.no_grad():  # a rolling KV cache of W tokens = attention limited to W keys (003 App. B)
            run.model(stream[None, :T].long(), window=W)
        rows["cache-window"].append(time.perf_counter() - t0)
    base = sum(rows["nonoverlapping"])
    return {"pe": run.config["model"]["pe"], "window_sizes": settings.timing_windows, "tokens": T,
            "rows": [{"method": k, "seconds": v, "relative": sum(v) / base} for k, v in rows.items()]}


# ---------------------------------------------------------------------------
# the study
# ---------------------------------------------------------------------------
def run_study(out: str | os.PathLike, preset: str = "cpu", pes: list[str] | None = None,
              experiment: str = "extrapolation", resume: bool = True, jobs: int = 2, delta: float = 0.02,
              steps: int | None = None, corpus: str | None = None, tasks: list[str] | None = None,
              log=print) -> dict:
    from extrap import positional

    if preset not in STUDY_PRESETS:
        raise ExtrapError(f"unknown preset {preset!r} (choose from {', '.join(STUDY_PRESETS)})")
    if experiment not in ("extrapolation", "alibi-slopes", "alignment"):
        raise ExtrapError(f"unknown experiment {experiment!r} (extrapolation | alibi-slopes | alignment)")
    if jobs < 1:
        raise ExtrapError("--jobs must be >= 1")
    if tasks is not None and experiment != "alignment":
        raise ExtrapError("--tasks is only for --experiment alignment")
    if experiment == "alignment":  # 004 §5.2: its own presets, models and results (extrap.study_alignment)
        from extrap.study_alignment import run_alignment_study

        return run_alignment_study(out, preset=preset, pes=pes, resume=resume, jobs=jobs, steps=steps,
                                   corpus=corpus, tasks=tasks, log=log)
    settings = STUDY_PRESETS[preset]
    out = Path(out)
    from extrap.train import build_configs

    overrides = {"steps": steps, "corpus": corpus}
    _, tcfg = build_configs("nope", settings.train_preset, overrides=overrides)
    L_tr = tcfg.train_length
    variants = None
    if experiment == "alibi-slopes":
        variants = slope_variants(L_tr, preset == "smoke")
        pes = [v["pe"] for v in variants]
    pes = list(dict.fromkeys(pes or DEFAULT_PES))
    for pe in pes:
        positional.get(pe)  # fail early, before any training, on a bad spec
    settings_file = out / "study.json"
    mine = {"preset": preset, "experiment": experiment, "pes": pes, "delta": delta, "steps": steps,
            "corpus": corpus}
    if settings_file.exists() and not resume:
        raise ExtrapError(f"{out} already holds a study; pass --resume to continue or choose another --out")
    if settings_file.exists():
        prev = json.loads(settings_file.read_text())
        for k in ("preset", "experiment", "delta", "steps", "corpus"):
            if prev.get(k) != mine[k]:
                raise ExtrapError(f"{out}: the saved study used {k}={prev.get(k)!r}; use another --out")
    atomic_write_json(settings_file, mine)

    t_start = time.perf_counter()
    threads = 1 if jobs > 1 else max(1, os.cpu_count() or 1)
    common = {"preset": settings.train_preset, "overrides": {k: v for k, v in overrides.items() if v is not None},
              "multiples": settings.multiples, "eval_tokens": settings.eval_tokens, "targets": settings.targets,
              "erf_multiple": settings.erf_multiple, "erf_segments": settings.erf_segments, "delta": delta,
              "threads": threads}
    job_list = [{**common, "pe": pe, "run_dir": str(out / "runs" / slug(pe))} for pe in pes]
    per_pe: dict[str, dict] = {}
    failures: dict[str, str] = {}
    log(f"study: {len(pes)} PEs, preset {preset}, L_tr={L_tr}, {jobs} at a time -> {out}")
    run_jobs(_pe_job, job_list, jobs, lambda job, get: _collect(job, get, per_pe, failures, log))

    results = assemble(out, preset, experiment, pes, per_pe, failures, L_tr, settings, delta)
    if variants is not None:
        results["slopes"] = {"variants": variants}
    if experiment == "extrapolation":
        timing_path = out / "timing.json"
        timing_pe = next((pe for pe in ("alibi", *pes) if pe in per_pe), None)
        if timing_pe and not timing_path.exists():
            log("study: timing sliding vs non-overlapping inference (000 Table 1)")
            atomic_write_json(timing_path, _timing(out / "runs" / slug(timing_pe), settings, max(1, jobs)))
        if timing_path.exists():
            results["timing"] = json.loads(timing_path.read_text())
    return finish(out, results, t_start, log)


def run_jobs(fn, job_list: list[dict], jobs: int, collect) -> None:
    """Run ``fn(job)`` for every job, ``jobs`` at a time in spawned processes; ``collect(job, get_result)``."""
    if jobs == 1 or len(job_list) == 1:
        for job in job_list:
            collect(job, lambda j=job: fn(j))
        return
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(fn, job): job for job in job_list}
        for fut in as_completed(futures):
            collect(futures[fut], fut.result)


def finish(out: Path, results: dict, t_start: float, log) -> dict:
    """Claims, results.json and report.html: the last step of every experiment."""
    from extrap.report import compute_claims, write_report

    results["claims"] = compute_claims(results)
    results["seconds"] = time.perf_counter() - t_start
    atomic_write_json(out / "results.json", results)
    report = write_report(results, out)
    log(f"study: report -> {report}")
    return results


def _collect(job, get, per_pe, failures, log):
    try:
        res = get()
    except ExtrapError as e:
        failures[job["pe"]] = str(e)
        log(f"  {job['pe']}: failed: {e}")
        return
    except Exception as e:  # one PE failing must not lose the others
        failures[job["pe"]] = f"{type(e).__name__}: {e}"
        log(f"  {job['pe']}: failed: {type(e).__name__}: {e}")
        return
    per_pe[job["pe"]] = res
    lt = res["eval"].get("last-token", {})
    log(f"  {job['pe']}: loss {res['train']['final_loss']:.4f}, last-token worst ratio "
        f"{lt.get('worst_ratio', float('nan')):.4f}")


def theory_rows(pes: list[str], num_heads: int, eps: list[float], train_length: int, lengths: list[int]) -> list:
    """000 Theorem 0.4 and Eq. 22 for every PE at its initial parameters, one row per head."""
    from extrap.theory import analyse

    rows = []
    for pe in pes:
        for r in analyse(pe, num_heads, eps=eps, lengths=lengths, train_length=train_length):
            d = r.to_dict()
            d["pe"] = pe  # keep the study's spelling of the spec
            rows.append(d)
    return rows


def assemble(out: Path, preset, experiment, pes, per_pe, failures, L_tr, settings, delta) -> dict:
    """Merge per-PE results, theory and receptive-field statistics into one results dict."""
    from extrap.erf import spearman
    from extrap.train import build_configs

    m, _ = build_configs("nope", settings.train_preset)
    first = next(iter(per_pe.values()), None)
    meta = run_metadata(None, None)
    if first is not None:
        cfg = json.loads((Path(first["run_dir"]) / "config.json").read_text())
        meta.update(seed=cfg.get("seed"), corpus_hash=cfg.get("corpus_hash"))
    eps = [1e-3, 1e-6]
    theory = theory_rows(pes, m.n_head, eps, L_tr, [L_tr * k for k in settings.multiples if k > 1])
    erf = {}
    for pe, res in per_pe.items():
        e = res["erf"]
        attn = e.get("attn_erf")
        erf[pe] = {"grad_erf": e.get("grad_erf"), "grad_curve": e.get("grad_curve"),
                   "attn_erf": attn.get("summary") if isinstance(attn, dict) else attn,
                   "trf": _model_trf(theory, pe, "0.001")}
    finite = [(v["trf"], v["grad_erf"], v["attn_erf"]) for v in erf.values() if v["trf"] is not None]
    sp = {"n": len(finite), "grad": None, "attn": None}
    if len(finite) >= 3:
        sp["grad"] = spearman([a for a, _, _ in finite], [b for _, b, _ in finite])
        if all(c is not None for _, _, c in finite):
            sp["attn"] = spearman([a for a, _, _ in finite], [c for _, _, c in finite])
    return {
        "preset": preset, "experiment": experiment, "pes": pes, "train_length": L_tr, "n_head": m.n_head,
        "lengths": [L_tr * k for k in settings.multiples], "delta": delta, **meta,
        "corpus": first and json.loads((Path(first["run_dir"]) / "config.json").read_text())["train"]["corpus"],
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "settings": asdict(settings), "theory": theory,
        "runs": {pe: {"run_dir": os.path.relpath(r["run_dir"], out), **{k: r["train"].get(k) for k in
                                                                        ("final_loss", "seconds", "params")}}
                 for pe, r in per_pe.items()},
        "eval": {pe: r["eval"] for pe, r in per_pe.items()},
        "erf": erf, "spearman": sp, "failures": failures,
    }


def _model_trf(theory: list[dict], pe: str, eps_key: str) -> int | None:
    """A PE's TRF for the TRF-vs-ERF comparison: the widest head; None unless every head converges."""
    rows = [r for r in theory if r["pe"] == pe]
    if not rows or any(r["verdict"] != "converges" for r in rows):
        return None
    vals = [r["trf"].get(eps_key) for r in rows]
    return None if any(v is None for v in vals) else max(vals)
