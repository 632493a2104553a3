"""``extrap study --experiment alignment``: attention alignment on retrieval tasks (004 §5.2).

Chi, Fan and Rudnicky (004) sharpen every softmax at L_ex > L_tr with a
temperature τ < 1 found by Algorithm 1 (match the average P_max, or entropy,
of all attention rows at L_ex to its value at L_tr with τ = 1).  Their Table 4
reports exact-match accuracy on passkey / line / topic retrieval without and
with alignment, Table 5 the τ that Algorithm 1 picks at each length, Figs. 3-5
the τs of Propositions 1-2 and of the log-length rule beside it, and Table 9
accuracy by the position of the answer.

Here, for every task (``tasks``: passkey, line, topic) and every PE (default:
T5 bias ``t5`` and ALiBi ``alibi``):

1. a model is trained at the task's L_tr on the task (answer-only loss,
   optionally mixed with language-modelling batches: ``task_mix``).  Line and
   topic prompts need more tokens than passkey (with bytes, 175 and 213 against
   81), so each task has its own L_tr (``train_lengths``);
2. at every L in L_tr x multiples, τ is found on *probe prompts* of the task
   (examples drawn with another seed than the scored ones; labels are never
   read): reference statistics on probe prompts at L_tr (τ = 1), extended
   statistics on probe prompts at L.  Modes ``pmax`` and ``entropy``
   (Algorithm 1, one τ for all layers, refined, see :mod:`extrap.align`) and
   ``pmax-layer`` (one τ per layer, greedy layer by layer).  Beside them the
   closed forms of 004 §6 (Prop. 1, Prop. 2, log-length rule) from layer 0.
   Probing is O(L^2) and capped at ``max_probe_length`` (default
   :data:`extrap.align.MAX_PROBE_LENGTH` = 4096): beyond the cap every mode
   uses the log-length rule τ = log_L L_tr instead, and the tables say so;
3. exact-match accuracy of ``n`` examples per length without alignment
   (``none``, τ = 1) and with each τ, with the accuracy per answer-depth
   bucket: greedy, and with ``rank`` also 004's ranking of the candidate
   answers by log-likelihood (the candidates share one pass over the prompt,
   :func:`extrap.tasks.score_candidates`).

Each (task, PE, length) leaves ``runs/<task>/<pe>/alignment/L<length>.json``; a
finished one is skipped on the next call (``--resume``), and the trained model
is reused, as in the main study.  Two runs go at a time, one thread each.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from extrap.errors import ExtrapError
from extrap.io import atomic_write_json, run_metadata

DEFAULT_PES = ["t5", "alibi"]
MODES = ("pmax", "entropy", "pmax-layer")  # Algorithm 1 settings (004 Table 4's "w/ P_max", "w/ H"; §8 per layer)
SETTINGS = ("none",) + MODES  # "none": τ = 1, the unaligned model
LABELS = {"none": "no alignment (τ = 1)", "pmax": "w/ P_max", "entropy": "w/ H", "pmax-layer": "w/ P_max per layer"}
SCORE_SEED = 0  # the scored examples (extrap.tasks.score_task)
PROBE_SEED = 1  # the unlabeled prompts that Algorithm 1 probes: other examples than the scored ones
TAU_TOL = 1e-3  # Algorithm 1's refinement resolution (0.05 / 64 < 0.001): smaller τ changes are noise
MIN_TRAIN_ACC = 0.2  # accuracy claims are judged only on models that retrieve at L_tr at least this often


@dataclass
class AlignmentSettings:
    train_preset: str  # model size and optimiser of extrap.train.PRESETS
    tasks: list[str]  # tasks run by default (``tasks=`` / --tasks picks others)
    train_lengths: dict[str, int]  # L_tr per task
    steps: int
    multiples: list[int]  # evaluation lengths as multiples of L_tr (1 first)
    n: int  # scored examples per length (stratified over the depth buckets)
    buckets: int
    probe_prompts: int  # unlabeled prompts per length for Algorithm 1 and the closed forms (at least) ...
    probe_tokens: int = 0  # ... and at least this many tokens in all: more (cheap) prompts at short lengths
    rank: bool = False  # also score by ranking the candidates (one shared pass over each prompt)
    task_mix: float = 0.0
    max_probe_length: int | None = None  # None: extrap.align.MAX_PROBE_LENGTH
    train_overrides: dict = field(default_factory=dict)


# byte tokens an example needs with its answer: passkey 81, line 175, topic 213
ALIGNMENT_PRESETS = {
    "smoke": AlignmentSettings("smoke", ["passkey"], {"passkey": 96, "line": 224, "topic": 224}, 40, [1, 2, 4],
                               n=5, buckets=5, probe_prompts=2, probe_tokens=512, rank=True,
                               train_overrides={"save_every": 40, "log_every": 10}),
    # cpu: a 3-layer d=64 model (the 4-layer d=128 cpu preset is 4x slower per step, and the zero-initialised T5
    # table moves ~lr per step, so T5 needs lr 3e-3 and ~1800 steps before it retrieves at all); half the batches
    # are language modelling, which teaches the position table faster than the 6 scored answer tokens alone.
    "cpu": AlignmentSettings("cpu", ["passkey", "line", "topic"], {"passkey": 128, "line": 256, "topic": 256}, 3000,
                             [1, 2, 4, 8, 16], n=40, buckets=5, probe_prompts=1, probe_tokens=2048, rank=True,
                             task_mix=0.5,
                             train_overrides={"n_layer": 3, "d_model": 64, "n_head": 4, "lr": 3e-3, "save_every": 500,
                                              "log_every": 50}),
    "paper": AlignmentSettings("paper", ["passkey", "line", "topic"], {"passkey": 512, "line": 512, "topic": 512},
                               20000, [1, 2, 4, 8, 16], n=100, buckets=5, probe_prompts=4, probe_tokens=16384,
                               rank=True, task_mix=0.25),
}


def _key(L: int) -> str:
    return str(int(L))


# ---------------------------------------------------------------------------
# probing the task's own prompts (Algorithm 1 wants "a short sequence of length
# L_tr and a long sequence of length L_ex"; task prompts differ in length by up
# to 10%, so every prompt is probed on its own and the rows are pooled)
# ---------------------------------------------------------------------------
class PromptProber:
    """The ``_prober`` of :func:`extrap.align.algorithm1` over lists of prompts, one list per length."""

    def __init__(self, model, prompts: dict[int, list]):
        self.model, self.prompts = model, prompts
        self.cache: dict = {}
        self.cf_cache: dict = {}  # averaged layer-0 logit vectors per length (closed forms)

    def __call__(self, length: int, taus, upto: int | None = None):
        from extrap import align

        key = (int(length), tuple(round(float(t), 12) for t in taus), upto)
        if key not in self.cache:
            parts = [align.attention_stats(self.model, p.view(1, -1), list(taus), upto_layer=upto)
                     for p in self.prompts[int(length)]]
            self.cache[key] = merge_stats(parts)
        return self.cache[key]


def merge_stats(parts: list):
    """Pool :class:`extrap.align.Stats` of several inputs: every softmax row keeps weight 1."""
    from extrap.align import Stats

    rows = sum(s.rows for s in parts)
    layers = [{m: sum(s.layers[i][m] * s.rows for s in parts) / rows for m in ("pmax", "entropy")}
              for i in range(len(parts[0].layers))]
    return Stats(pmax=sum(v["pmax"] for v in layers) / len(layers),
                 entropy=sum(v["entropy"] for v in layers) / len(layers), layers=layers, rows=rows)


def averaged_prompt_logits(model, prompts: list, length: int):
    """004 §6's averaged sorted layer-0 logit vector over prompts of slightly different lengths.

    Each prompt's own average (``extrap.align.averaged_layer_logits``) is resampled to ``length``
    quantiles and the prompts are pooled, weighted by their number of rows.
    """
    import torch

    from extrap import align

    total, rows = torch.zeros(length, dtype=torch.float64), 0
    for p in prompts:
        v = align.averaged_layer_logits(model, p.view(1, -1), 0).double()
        n = v.numel()
        total += align.resampled(v.view(1, -1), torch.tensor([n]), length)[0] * n
        rows += n
    return total / rows


def closed_form_taus(model, probe: PromptProber, train_length: int, length: int, cache: dict) -> dict:
    """Prop. 1, Prop. 2 and the log-length τ (``extrap.align.closed_forms``) on the probe prompts."""
    from extrap import align

    for L in (train_length, length):
        if ("avg", L) not in cache:
            cache[("avg", L)] = averaged_prompt_logits(model, probe.prompts[L], L)
    return align.closed_forms(model, None, train_length, length, max_length=max(train_length, length),
                              _cache=cache)


def _search_summary(res: dict) -> dict:
    keep = ("tau", "grid_tau", "target", "value", "at_grid_edge")
    out = {k: res[k] for k in keep if k in res}
    if "layers" in res:
        out["layers"] = [{k: v[k] for k in keep if k in v} for v in res["layers"]]
    return out


def find_taus(model, probe: PromptProber, train_length: int, length: int, cap: int) -> dict:
    """τ of every mode at ``length``, its source, and the closed forms."""
    from extrap import align

    R = len(model.blocks)
    if length <= train_length:
        taus = {"pmax": 1.0, "entropy": 1.0, "pmax-layer": [1.0] * R}
        return {"tau": taus, "source": {m: "L_tr" for m in MODES}, "algorithm1": {}, "closed_forms": None}
    if length > cap:  # probing is O(L^2): 004's log-length baseline instead, said so in the tables
        t = align.log_length_tau(train_length, length)
        why = f"log-length (L > probe cap {cap})"
        return {"tau": {"pmax": t, "entropy": t, "pmax-layer": [t] * R}, "source": {m: why for m in MODES},
                "algorithm1": {}, "closed_forms": {"log_length": t, "note": why}}
    a1 = {
        "pmax": align.algorithm1(model, None, train_length, length, "pmax", _prober=probe, max_length=cap),
        "entropy": align.algorithm1(model, None, train_length, length, "entropy", _prober=probe, max_length=cap),
        "pmax-layer": align.algorithm1(model, None, train_length, length, "pmax", per_layer=True, _prober=probe,
                                       max_length=cap),
    }
    cf = closed_form_taus(model, probe, train_length, length, probe.cf_cache)
    return {"tau": {m: a1[m]["tau"] for m in MODES}, "source": {m: "algorithm1" for m in MODES},
            "algorithm1": {m: _search_summary(a1[m]) for m in MODES}, "closed_forms": cf}


# ---------------------------------------------------------------------------
# one (task, PE) run (in a worker process)
# ---------------------------------------------------------------------------
def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _score(model, tok, task, L, settings: dict, filler, method) -> dict:
    from extrap.tasks import score_task

    rep = score_task(model, tok, task, [L], n=settings["n"], seed=SCORE_SEED, method=method, temperature=None,
                     buckets=settings["buckets"], filler=filler)
    return rep["results"][0]


def _length_record(run, L: int, job: dict, probe: PromptProber) -> dict:
    import torch

    from extrap import align
    from extrap.tasks import task_examples

    s, task = job["settings"], job["task"]
    L_tr, model, tok = run.train_length, run.model, run.tokenizer
    filler = run.config["train"].get("corpus")
    for length in (L_tr, L):
        if length not in probe.prompts:
            count = max(s["probe_prompts"], -(-s["probe_tokens"] // length))
            # buckets=count: the probe prompts' depths spread over the context
            exs = task_examples(task, tok, length, count, seed=PROBE_SEED, buckets=count, filler=filler)
            probe.prompts[length] = [torch.tensor(tok.encode(e["prompt"]), dtype=torch.long) for e in exs]
    t0 = time.perf_counter()
    found = find_taus(model, probe, L_tr, L, job["cap"])
    rec: dict[str, Any] = {"length": L, **found, "seconds_align": time.perf_counter() - t0}
    t0 = time.perf_counter()
    methods = ["greedy"] + (["rank"] if s["rank"] else [])
    rec["accuracy"], rec["by_depth"], rec["errors"] = {m: {} for m in methods}, {}, {}
    rec["seconds_method"] = {m: 0.0 for m in methods}  # scoring time per method (rank's cost beside greedy's)
    done: dict = {}  # settings with the same τs (all 1 at L_tr; one log-length τ beyond the cap) are scored once
    for setting in SETTINGS:
        tau = 1.0 if setting == "none" else found["tau"][setting]
        taus = tau if isinstance(tau, list) else [tau] * len(model.blocks)
        with align.temperature(model, taus):
            for method in methods:
                key = (tuple(round(float(t), 12) for t in taus), method)
                if key not in done:
                    t1 = time.perf_counter()
                    done[key] = _score(model, tok, task, L, s, filler, method)
                    rec["seconds_method"][method] += time.perf_counter() - t1
                res = done[key]
                if "error" in res:
                    rec["errors"][f"{setting}/{method}"] = res["error"]
                    rec["accuracy"][method][setting] = None
                    continue
                rec["accuracy"][method][setting] = res["accuracy"]
                if method == "greedy":
                    rec["by_depth"][setting] = res["by_depth"]
    rec["seconds_score"] = time.perf_counter() - t0
    return rec


def _tau_text(t) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in t) + "]" if isinstance(t, list) else f"{t:.3f}"


def _alignment_job(job: dict) -> dict:
    import torch

    torch.set_num_threads(job["threads"])
    import extrap
    from extrap.train import build_configs, train

    run_dir = Path(job["run_dir"])
    s, task, name = job["settings"], job["task"], f"{job['task']}/{job['pe']}"
    final = run_dir / "final.json"
    if not final.exists():
        over = {**s["train_overrides"], "task": task, "task_mix": s["task_mix"],
                "train_length": job["train_length"], "steps": s["steps"], **job["overrides"],
                "threads": job["threads"]}
        m, t = build_configs(job["pe"], s["train_preset"], overrides=over)
        _say(f"  {name}: training {t.steps} steps at L_tr={t.train_length}")
        train(run_dir, m, t, resume=(run_dir / "config.json").exists(), progress=False)
    out = {"pe": job["pe"], "task": task, "run_dir": str(run_dir), "train": json.loads(final.read_text()),
           "lengths": {}}
    run = extrap.load(run_dir)
    if run.config["train"].get("task") != task:
        raise ExtrapError(f"{run_dir} was trained on {run.config['train'].get('task')!r}, not {task!r}")
    probe = PromptProber(run.model, {})
    for k in s["multiples"]:
        L = run.train_length * k
        path = run_dir / "alignment" / f"L{L}.json"
        if not path.exists():
            rec = _length_record(run, L, job, probe)
            atomic_write_json(path, rec)
            acc = rec["accuracy"]["greedy"]
            _say(f"  {name} L={L}: τ " + ", ".join(f"{m} {_tau_text(rec['tau'][m])}" for m in MODES)
                 + " | accuracy " + ", ".join(f"{st} {acc.get(st) if acc.get(st) is None else round(acc[st], 3)}"
                                              for st in SETTINGS)
                 + f" ({rec['seconds_align']:.0f} s align, {rec['seconds_score']:.0f} s score)")
        out["lengths"][_key(L)] = json.loads(path.read_text())
    return out


# ---------------------------------------------------------------------------
# the study
# ---------------------------------------------------------------------------
def run_alignment_study(out, preset: str = "cpu", pes: list[str] | None = None, resume: bool = True, jobs: int = 2,
                        steps: int | None = None, corpus: str | None = None, tasks: list[str] | None = None,
                        log=print) -> dict:
    from extrap import align, positional
    from extrap.study import finish, run_jobs, slug

    if preset not in ALIGNMENT_PRESETS:
        raise ExtrapError(f"unknown preset {preset!r} (choose from {', '.join(ALIGNMENT_PRESETS)})")
    if jobs < 1:
        raise ExtrapError("--jobs must be >= 1")
    from extrap.data import get_tokenizer, load_corpus
    from extrap.tasks import min_length
    from extrap.tasks.generators import check_task
    from extrap.train import build_configs

    settings = ALIGNMENT_PRESETS[preset]
    tasks = [check_task(t) for t in dict.fromkeys(tasks or settings.tasks)]
    settings = AlignmentSettings(**{**asdict(settings), "tasks": tasks,
                                    "steps": settings.steps if steps is None else steps})
    pes = list(dict.fromkeys(pes or DEFAULT_PES))
    for pe in pes:
        positional.get(pe)  # fail early, before any training, on a bad spec
    m, t = build_configs("nope", settings.train_preset, overrides=settings.train_overrides)
    tok = get_tokenizer(t.tokenizer, load_corpus(corpus or t.corpus))
    for task in tasks:
        need, L_tr = min_length(task, tok, include_target=True), settings.train_lengths[task]
        if L_tr + 1 < need:
            raise ExtrapError(f"{task} needs L_tr >= {need - 1} tokens with the {tok.name} tokenizer, "
                              f"the preset has {L_tr}")
    out = Path(out)
    settings_file = out / "study.json"
    mine = {"preset": preset, "experiment": "alignment", "pes": pes, "tasks": tasks, "steps": steps,
            "corpus": corpus}
    if settings_file.exists() and not resume:
        raise ExtrapError(f"{out} already holds a study; pass --resume to continue or choose another --out")
    if settings_file.exists():
        prev = json.loads(settings_file.read_text())
        for k in ("preset", "experiment", "steps", "corpus"):  # other tasks or PEs may join: runs are per task, PE
            if prev.get(k) != mine[k]:
                raise ExtrapError(f"{out}: the saved study used {k}={prev.get(k)!r}; use another --out")
    atomic_write_json(settings_file, mine)

    t_start = time.perf_counter()
    threads = 1 if jobs > 1 else max(1, os.cpu_count() or 1)
    cap = settings.max_probe_length or align.MAX_PROBE_LENGTH
    common = {"settings": asdict(settings), "overrides": {"corpus": corpus} if corpus else {}, "threads": threads,
              "cap": cap}
    job_list = [{**common, "task": task, "train_length": settings.train_lengths[task], "pe": pe,
                 "run_dir": str(out / "runs" / task / slug(pe))} for task in tasks for pe in pes]
    done: dict[tuple, dict] = {}
    failures: dict[str, str] = {}
    log(f"study alignment: {', '.join(pes)}, preset {preset}, "
        + "; ".join(f"{task} at L_tr={settings.train_lengths[task]}" for task in tasks)
        + f", lengths L_tr x {settings.multiples}, {jobs} at a time -> {out}")
    run_jobs(_alignment_job, job_list, jobs, lambda job, get: _collect(job, get, done, failures, log))

    results = assemble(out, preset, pes, done, failures, settings, cap, n_head=m.n_head)
    return finish(out, results, t_start, log)


def _collect(job, get, done, failures, log):
    name = f"{job['task']}/{job['pe']}"
    try:
        res = get()
    except Exception as e:  # one run failing must not lose the others
        failures[name] = str(e) if isinstance(e, ExtrapError) else f"{type(e).__name__}: {e}"
        log(f"  {name}: failed: {failures[name]}")
        return
    done[(job["task"], job["pe"])] = res
    log(f"  {name}: done (training loss {res['train']['final_loss']:.4f})")


def assemble(out: Path, preset: str, pes: list[str], done: dict, failures: dict, settings: AlignmentSettings,
             cap: int, n_head: int | None = None) -> dict:
    """results.json: run metadata, and ``alignment[task]`` = the per-PE τs, closed forms, accuracies, depth tables."""
    meta = run_metadata(None, None)
    first = next(iter(done.values()), None)
    cfg = json.loads((Path(first["run_dir"]) / "config.json").read_text()) if first else {}
    meta.update(seed=cfg.get("seed"), corpus_hash=cfg.get("corpus_hash"))
    blocks, runs = {}, {}
    for task in settings.tasks:
        L_tr = settings.train_lengths[task]
        lengths = [L_tr * k for k in settings.multiples]
        got = {pe: done[(task, pe)] for pe in pes if (task, pe) in done}  # the study's order
        blocks[task] = {"task": task, "train_length": L_tr, "lengths": lengths, "n": settings.n,
                        "buckets": settings.buckets, "rank": settings.rank, "probe_prompts": settings.probe_prompts,
                        "probe_tokens": settings.probe_tokens, "probe_cap": cap, "settings": list(SETTINGS),
                        "modes": list(MODES), "models": {pe: model_summary(r, L_tr, lengths) for pe, r in got.items()}}
        runs.update({f"{task}/{pe}": {"run_dir": os.path.relpath(r["run_dir"], out),
                                      **{k: r["train"].get(k) for k in ("final_loss", "seconds", "params")}}
                     for pe, r in got.items()})
    return {
        "preset": preset, "experiment": "alignment", "pes": pes, "tasks": list(settings.tasks),
        "train_length": {t: b["train_length"] for t, b in blocks.items()}, "n_head": n_head,
        "lengths": sorted({L for b in blocks.values() for L in b["lengths"]}), **meta,
        "corpus": (cfg.get("train") or {}).get("corpus"),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "settings": asdict(settings), "runs": runs, "alignment": blocks, "failures": failures,
    }


def _mean_tau(t):
    return sum(t) / len(t) if isinstance(t, list) else t


def model_summary(res: dict, L_tr: int, lengths: list[int]) -> dict:
    """One PE's part of results["alignment"]["models"] from its per-length records."""
    recs = {k: v for k, v in res["lengths"].items()}
    acc: dict = {st: {} for st in SETTINGS}
    rank: dict = {st: {} for st in SETTINGS}
    tau: dict = {m: {} for m in MODES}
    src: dict = {m: {} for m in MODES}
    edge: dict = {m: {} for m in MODES}
    cfs, by_depth, errors = {}, {st: {} for st in SETTINGS}, {}
    for L in lengths:
        r = recs.get(_key(L))
        if r is None:
            continue
        for st in SETTINGS:
            acc[st][_key(L)] = r["accuracy"]["greedy"].get(st)
            if "rank" in r["accuracy"]:
                rank[st][_key(L)] = r["accuracy"]["rank"].get(st)
            if st in r["by_depth"]:
                by_depth[st][_key(L)] = r["by_depth"][st]
        for m in MODES:
            tau[m][_key(L)] = r["tau"][m]
            src[m][_key(L)] = r["source"][m]
            edge[m][_key(L)] = bool((r.get("algorithm1") or {}).get(m, {}).get("at_grid_edge", False))
        if r.get("closed_forms") is not None:
            cfs[_key(L)] = r["closed_forms"]
        errors.update({f"L={L} {k}": v for k, v in (r.get("errors") or {}).items()})
    out = {"accuracy": acc, "tau": tau, "tau_source": src, "at_grid_edge": edge, "closed_forms": cfs,
           "depth": depth_summary(acc, by_depth, L_tr), "errors": errors}
    if any(rank[st] for st in SETTINGS):
        out["rank_accuracy"] = rank
    return out


def mean_beyond(acc_by_len: dict, L_tr: int) -> float | None:
    """Mean of {L: accuracy} over L > L_tr (None entries skipped; None if nothing is left)."""
    vals = [v for k, v in (acc_by_len or {}).items() if int(k) > L_tr and isinstance(v, (int, float))]
    return sum(vals) / len(vals) if vals else None


def best_setting(acc: dict, L_tr: int) -> str | None:
    """The aligned setting with the highest mean accuracy over L > L_tr (ties: MODES order)."""
    scored = [(mean_beyond(acc.get(m), L_tr), -i, m) for i, m in enumerate(MODES)]
    scored = [s for s in scored if s[0] is not None]
    return max(scored)[2] if scored else None


def depth_summary(acc: dict, by_depth: dict, L_tr: int) -> dict:
    """004 Table 9 analogue: accuracy per answer-depth bucket, per length, and pooled over L > L_tr."""
    best = best_setting(acc, L_tr)
    pooled = {}
    buckets = None
    for st, per_len in by_depth.items():
        rows = [bs for k, bs in per_len.items() if int(k) > L_tr]
        if not rows:
            continue
        buckets = [[b["lo"], b["hi"]] for b in rows[0]]
        n = [sum(r[i]["n"] for r in rows) for i in range(len(buckets))]
        c = [sum(r[i]["correct"] for r in rows) for i in range(len(buckets))]
        pooled[st] = [ci / ni if ni else None for ci, ni in zip(c, n)]
    if buckets is None:
        first = next((bs for per_len in by_depth.values() for bs in per_len.values()), None)
        buckets = [[b["lo"], b["hi"]] for b in first] if first else []
    return {"best_setting": best, "buckets": buckets,
            "by_length": {st: {k: [b["accuracy"] for b in bs] for k, bs in per_len.items()}
                          for st, per_len in by_depth.items()},
            "pooled_beyond": pooled}

