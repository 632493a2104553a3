"""Measuring one alignment-study model at one length: τ by Algorithm 1 and the closed forms, then accuracy.

Algorithm 1 (004) wants "a short sequence of length L_tr and a long sequence of length
L_ex"; task prompts differ in length by up to 10%, so every probe prompt is probed on its
own and the softmax rows are pooled.  Probe prompts are examples drawn with another seed
than the scored ones; their labels are never read.
"""

from __future__ import annotations

import time

from extrap.align.formulas import SoftmaxStat
from extrap.align.records import Algorithm1, ClosedForms, LogLengthForm, Stats
from extrap.experiments.alignment.presets import AlignmentSettings
from extrap.experiments.alignment.records import LengthRecord, SettingScores, TauFindings
from extrap.experiments.alignment.results import MODES, SETTINGS
from extrap.tasks.records import TaskSettings

SCORE_SEED = 0  # the scored examples (extrap.tasks.score_task)
PROBE_SEED = 1  # the unlabeled prompts that Algorithm 1 probes: other examples than the scored ones


class PromptProber:
    """The prober of :func:`extrap.align.algorithm1` over lists of prompts, one list per length.

    ``prompts``: {length: [(L',) token ids]}, filled by :func:`add_probe_prompts`.  :meth:`averaged` gives the
    closed forms their averaged layer-0 logits on the same prompts.
    """

    def __init__(self, model, prompts=None):
        self.model = model
        self.prompts: dict = {} if prompts is None else prompts
        self.cache: dict = {}
        self.averages: dict = {}  # averaged layer-0 logit vectors per length (closed forms)

    def __call__(self, length: int, taus, upto: int | None = None) -> Stats:
        from extrap.align.probe import attention_stats

        key = (int(length), tuple(round(float(t), 12) for t in taus), upto)
        if key not in self.cache:
            parts = [
                attention_stats(self.model, p.view(1, -1), list(taus), upto_layer=upto)
                for p in self.prompts[int(length)]
            ]
            self.cache[key] = merge_stats(parts)
        return self.cache[key]

    def averaged(self, length: int):
        """004 §6's averaged sorted layer-0 logits at ``length``, over this length's prompts (computed once)."""
        if length not in self.averages:
            self.averages[length] = averaged_prompt_logits(self.model, self.prompts[length], length)
        return self.averages[length]


def merge_stats(parts: list[Stats]) -> Stats:
    """Pool :class:`extrap.align.Stats` of several inputs: every softmax row keeps weight 1."""
    rows = sum(s.rows for s in parts)
    layers = tuple(
        SoftmaxStat(
            pmax=sum(s.layers[i].pmax * s.rows for s in parts) / rows,
            entropy=sum(s.layers[i].entropy * s.rows for s in parts) / rows,
        )
        for i in range(len(parts[0].layers))
    )
    return Stats(
        pmax=sum(v.pmax for v in layers) / len(layers),
        entropy=sum(v.entropy for v in layers) / len(layers),
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


def closed_form_taus(model, probe: PromptProber, train_length: int, length: int) -> ClosedForms:
    """Prop. 1, Prop. 2 and the log-length τ (``extrap.align.closed_forms``) on the probe prompts."""
    from extrap import align

    return align.closed_forms(
        model, None, train_length, length, max_length=max(train_length, length), averages=probe.averaged
    )


def find_taus(model, probe: PromptProber | None, train_length: int, length: int, cap: int) -> TauFindings:
    """τ of every mode at ``length``, its source, Algorithm 1's picks and the closed forms."""
    from extrap import align
    from extrap.align.formulas import log_length_tau

    R = model.shape.n_layer
    if length <= train_length:
        return TauFindings({"pmax": 1.0, "entropy": 1.0, "pmax-layer": (1.0,) * R}, {m: "L_tr" for m in MODES})
    if length > cap:  # probing is O(L^2): 004's log-length baseline instead, said so in the tables
        t = log_length_tau(train_length, length)
        why = f"log-length (L > probe cap {cap})"
        return TauFindings(
            {"pmax": t, "entropy": t, "pmax-layer": (t,) * R},
            {m: why for m in MODES},
            closed_forms=LogLengthForm(t, why),
        )
    a1: dict[str, Algorithm1] = {
        m: align.algorithm1(
            model,
            None,
            train_length,
            length,
            "pmax" if m == "pmax-layer" else m,
            per_layer=m == "pmax-layer",
            prober=probe,
            max_length=cap,
        )
        for m in MODES
    }
    return TauFindings(
        tau={m: a1[m].tau for m in MODES},
        source={m: "algorithm1" for m in MODES},
        algorithm1={m: a1[m].summary() for m in MODES},
        closed_forms=closed_form_taus(model, probe, train_length, length),
    )


def add_probe_prompts(run, task: str, settings: AlignmentSettings, probe: PromptProber, lengths) -> None:
    """Probe prompts at each of ``lengths`` that ``probe`` lacks: enough prompts and enough tokens."""
    import torch

    from extrap.tasks import task_examples

    for length in lengths:
        if length not in probe.prompts:
            count = max(settings.probe_prompts, -(-settings.probe_tokens // length))
            # buckets=count: the probe prompts' depths spread over the context
            exs = task_examples(task, run.tokenizer, length, count, seed=PROBE_SEED, buckets=count, filler=run.corpus)
            probe.prompts[length] = [torch.tensor(e.prompt_ids(run.tokenizer), dtype=torch.long) for e in exs]


def score_settings(run, task: str, length: int, settings: AlignmentSettings, found: TauFindings) -> SettingScores:
    """Exact-match accuracy without alignment and with each mode's τ, by greedy decoding (and by ranking)."""
    from extrap.model.protocol import temperature as model_temperature
    from extrap.tasks import score_task

    model, R = run.model, run.model.shape.n_layer
    methods = ["greedy"] + (["rank"] if settings.rank else [])
    accuracy: dict = {m: {} for m in methods}
    by_depth, errors = {}, {}
    seconds = {m: 0.0 for m in methods}  # scoring time per method (rank's cost beside greedy's)
    done: dict = {}  # settings with the same τs (all 1 at L_tr; one log-length τ beyond the cap) are scored once
    for setting in SETTINGS:
        tau = 1.0 if setting == "none" else found.tau[setting]
        taus = list(tau) if isinstance(tau, tuple) else [tau] * R
        with model_temperature(model, taus):
            for method in methods:
                key = (tuple(round(float(t), 12) for t in taus), method)
                if key not in done:
                    t1 = time.perf_counter()
                    request = TaskSettings(
                        task,
                        [length],
                        n=settings.n,
                        seed=SCORE_SEED,
                        method=method,
                        buckets=settings.buckets,
                        filler=run.corpus,
                    )
                    done[key] = score_task(model, run.tokenizer, request).results[0]
                    seconds[method] += time.perf_counter() - t1
                res = done[key]
                if res.error is not None:
                    errors[f"{setting}/{method}"] = res.error
                    accuracy[method][setting] = None
                    continue
                accuracy[method][setting] = res.accuracy
                if method == "greedy":
                    by_depth[setting] = res.by_depth
    return SettingScores(accuracy, by_depth, errors, seconds)


def length_record(
    run, length: int, task: str, settings: AlignmentSettings, cap: int, probe: PromptProber
) -> LengthRecord:
    """Everything measured at one length: τ of every mode, closed forms, accuracies and their timings."""
    add_probe_prompts(run, task, settings, probe, (run.train_length, length))
    t0 = time.perf_counter()
    found = find_taus(run.model, probe, run.train_length, length, cap)
    seconds_align = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores = score_settings(run, task, length, settings, found)
    return LengthRecord(length, found, seconds_align, scores, time.perf_counter() - t0)
