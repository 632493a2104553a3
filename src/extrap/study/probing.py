"""Measuring one alignment-study model at one length: τ by Algorithm 1 and the closed forms, then accuracy.

Algorithm 1 (004) wants "a short sequence of length L_tr and a long sequence of length
L_ex"; task prompts differ in length by up to 10%, so every probe prompt is probed on its
own and the softmax rows are pooled.  Probe prompts are examples drawn with another seed
than the scored ones; their labels are never read.
"""

from __future__ import annotations

import time
from typing import Any

from extrap.results import MODES, SETTINGS

SCORE_SEED = 0  # the scored examples (extrap.tasks.score_task)
PROBE_SEED = 1  # the unlabeled prompts that Algorithm 1 probes: other examples than the scored ones


class PromptProber:
    """The prober of :func:`extrap.align.algorithm1` over lists of prompts, one list per length."""

    def __init__(self, model, prompts: dict[int, list]):
        self.model, self.prompts = model, prompts
        self.cache: dict = {}
        self.cf_cache: dict = {}  # averaged layer-0 logit vectors per length (closed forms)

    def __call__(self, length: int, taus, upto: int | None = None):
        from extrap.align.probe import attention_stats

        key = (int(length), tuple(round(float(t), 12) for t in taus), upto)
        if key not in self.cache:
            parts = [
                attention_stats(self.model, p.view(1, -1), list(taus), upto_layer=upto)
                for p in self.prompts[int(length)]
            ]
            self.cache[key] = merge_stats(parts)
        return self.cache[key]


def merge_stats(parts: list):
    """Pool :class:`extrap.align.Stats` of several inputs: every softmax row keeps weight 1."""
    from extrap.align.probe import Stats

    rows = sum(s.rows for s in parts)
    layers = [
        {m: sum(s.layers[i][m] * s.rows for s in parts) / rows for m in ("pmax", "entropy")}
        for i in range(len(parts[0].layers))
    ]
    return Stats(
        pmax=sum(v["pmax"] for v in layers) / len(layers),
        entropy=sum(v["entropy"] for v in layers) / len(layers),
        layers=layers,
        rows=rows,
    )


def averaged_prompt_logits(model, prompts: list, length: int):
    """004 §6's averaged sorted layer-0 logit vector over prompts of slightly different lengths.

    Each prompt's own average (``extrap.align.averaged_layer_logits``) is resampled to ``length``
    quantiles and the prompts are pooled, weighted by their number of rows.
    """
    import torch

    from extrap.align.formulas import resampled
    from extrap.align.probe import averaged_layer_logits

    total, rows = torch.zeros(length, dtype=torch.float64), 0
    for p in prompts:
        v = averaged_layer_logits(model, p.view(1, -1), 0).double()
        n = v.numel()
        total += resampled(v.view(1, -1), torch.tensor([n]), length)[0] * n
        rows += n
    return total / rows


def closed_form_taus(model, probe: PromptProber, train_length: int, length: int) -> dict:
    """Prop. 1, Prop. 2 and the log-length τ (``extrap.align.closed_forms``) on the probe prompts."""
    from extrap import align

    for L in (train_length, length):
        if ("avg", L) not in probe.cf_cache:
            probe.cf_cache[("avg", L)] = averaged_prompt_logits(model, probe.prompts[L], L)
    return align.closed_forms(
        model, None, train_length, length, max_length=max(train_length, length), _cache=probe.cf_cache
    )


def search_summary(res: dict) -> dict:
    keep = ("tau", "grid_tau", "target", "value", "at_grid_edge")
    out = {k: res[k] for k in keep if k in res}
    if "layers" in res:
        out["layers"] = [{k: v[k] for k in keep if k in v} for v in res["layers"]]
    return out


def find_taus(model, probe: PromptProber | None, train_length: int, length: int, cap: int) -> dict:
    """τ of every mode at ``length``, its source, and the closed forms."""
    from extrap import align
    from extrap.align.formulas import log_length_tau

    R = model.shape.n_layer
    if length <= train_length:
        taus = {"pmax": 1.0, "entropy": 1.0, "pmax-layer": [1.0] * R}
        return {"tau": taus, "source": {m: "L_tr" for m in MODES}, "algorithm1": {}, "closed_forms": None}
    if length > cap:  # probing is O(L^2): 004's log-length baseline instead, said so in the tables
        t = log_length_tau(train_length, length)
        why = f"log-length (L > probe cap {cap})"
        return {
            "tau": {"pmax": t, "entropy": t, "pmax-layer": [t] * R},
            "source": {m: why for m in MODES},
            "algorithm1": {},
            "closed_forms": {"log_length": t, "note": why},
        }
    a1 = {
        m: align.algorithm1(
            model,
            None,
            train_length,
            length,
            "pmax" if m == "pmax-layer" else m,
            per_layer=m == "pmax-layer",
            _prober=probe,
            max_length=cap,
        )
        for m in MODES
    }
    return {
        "tau": {m: a1[m]["tau"] for m in MODES},
        "source": {m: "algorithm1" for m in MODES},
        "algorithm1": {m: search_summary(a1[m]) for m in MODES},
        "closed_forms": closed_form_taus(model, probe, train_length, length),
    }


def add_probe_prompts(run, task: str, settings: dict, probe: PromptProber, lengths) -> None:
    """Probe prompts at each of ``lengths`` that ``probe`` lacks: enough prompts and enough tokens."""
    import torch

    from extrap.tasks import task_examples

    for length in lengths:
        if length not in probe.prompts:
            count = max(settings["probe_prompts"], -(-settings["probe_tokens"] // length))
            # buckets=count: the probe prompts' depths spread over the context
            exs = task_examples(task, run.tokenizer, length, count, seed=PROBE_SEED, buckets=count, filler=run.corpus)
            probe.prompts[length] = [torch.tensor(run.tokenizer.encode(e["prompt"]), dtype=torch.long) for e in exs]


def score_settings(run, task: str, length: int, settings: dict, taus_found: dict, rec: dict) -> None:
    """Exact-match accuracy without alignment and with each mode's τ, by greedy decoding (and by ranking)."""
    from extrap.model.protocol import temperature as model_temperature
    from extrap.tasks import score_task

    model, R = run.model, run.model.shape.n_layer
    methods = ["greedy"] + (["rank"] if settings["rank"] else [])
    rec["accuracy"], rec["by_depth"], rec["errors"] = {m: {} for m in methods}, {}, {}
    rec["seconds_method"] = {m: 0.0 for m in methods}  # scoring time per method (rank's cost beside greedy's)
    done: dict = {}  # settings with the same τs (all 1 at L_tr; one log-length τ beyond the cap) are scored once
    for setting in SETTINGS:
        tau = 1.0 if setting == "none" else taus_found[setting]
        taus = tau if isinstance(tau, list) else [tau] * R
        with model_temperature(model, taus):
            for method in methods:
                key = (tuple(round(float(t), 12) for t in taus), method)
                if key not in done:
                    t1 = time.perf_counter()
                    done[key] = score_task(
                        model,
                        run.tokenizer,
                        task,
                        [length],
                        n=settings["n"],
                        seed=SCORE_SEED,
                        method=method,
                        temperature=None,
                        buckets=settings["buckets"],
                        filler=run.corpus,
                    )["results"][0]
                    rec["seconds_method"][method] += time.perf_counter() - t1
                res = done[key]
                if "error" in res:
                    rec["errors"][f"{setting}/{method}"] = res["error"]
                    rec["accuracy"][method][setting] = None
                    continue
                rec["accuracy"][method][setting] = res["accuracy"]
                if method == "greedy":
                    rec["by_depth"][setting] = res["by_depth"]


def length_record(run, length: int, task: str, settings: dict, cap: int, probe: PromptProber) -> dict:
    """Everything measured at one length: τ of every mode, closed forms, accuracies and their timings."""
    add_probe_prompts(run, task, settings, probe, (run.train_length, length))
    t0 = time.perf_counter()
    found = find_taus(run.model, probe, run.train_length, length, cap)
    rec: dict[str, Any] = {"length": length, **found, "seconds_align": time.perf_counter() - t0}
    t0 = time.perf_counter()
    score_settings(run, task, length, settings, found["tau"], rec)
    rec["seconds_score"] = time.perf_counter() - t0
    return rec
