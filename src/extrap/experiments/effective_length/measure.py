"""What the effective-length study measures on one trained model.

* The RULER-style suite (:func:`extrap.tasks.ruler.score_ruler`, rank scoring) at L_tr × the preset's
  multiples: per task, length and needle depth, and each task's effective length in the relative form
  (0.85 × the score at L_tr, NoLiMa; the record says which form).
* Whether the model learned each task above chance at L_tr (:func:`.results.task_gate`):
  a model that did not is reported as not learned and is not ranked on that task.
* Perplexity and LongPPL (Fang et al. 2025, :func:`extrap.evaluate.longppl.longppl_report`, the model as its
  own evaluator) at the same lengths, nonoverlapping chunks.
* Its TRF: n(ε) of :data:`extrap.theory.STUDY_TRF` (ε = 1e-3, widest head) from
  :func:`extrap.theory.receptive_field`, the code the extrapolation study uses, at the trained values for a
  scheme whose bias learns (KERPLE), read as ``extrap theory --checkpoint`` reads them.
"""

from __future__ import annotations

import math

from extrap.experiments.effective_length.results import (
    FINITE,
    INFINITE,
    NOT_APPLICABLE,
    UNKNOWN,
    EffectiveLengthModel,
    TaskGate,
    TrfValue,
    task_gate,
)
from extrap.results import INITIAL, TRAINED, EvalReport

PROTOCOL = "nonoverlapping"  # of perplexity and LongPPL: LongPPL cuts each chunk's context blockwise


def trf_status(trf) -> str:
    """finite, infinite (some head's series diverges), not-applicable (no Toeplitz bias) or unknown."""
    if trf.value is not None and trf.value != math.inf:
        return FINITE
    if any(h.value == math.inf for h in trf.heads) or trf.value == math.inf:
        return INFINITE
    return NOT_APPLICABLE if (trf.reason or "").startswith("not a Toeplitz bias") else UNKNOWN


def model_trf(run_dir, pe: str, num_heads: int) -> TrfValue:
    """The TRF of the model in ``run_dir``: initial parameters, or the trained ones where the bias learns."""
    import torch

    from extrap import positional
    from extrap.run.parameters import read_checkpoint_bias
    from extrap.study.trained import learns_bias
    from extrap.theory import STUDY_TRF, receptive_field

    eps, reduce = STUDY_TRF.eps, STUDY_TRF.reduce
    initial = receptive_field(pe, eps=eps, reduce=reduce, num_heads=num_heads)
    scheme = positional.get(pe)
    trf, params, before = initial, INITIAL, None
    if learns_bias(scheme):  # the values the model uses: every layer's trained parameters (000 Eq. 22 on them)
        ckpt = read_checkpoint_bias(run_dir)
        stored = [
            {k: torch.as_tensor(v).detach().double() for k, v in ckpt.layers[name].items()} for name in ckpt.layers
        ]
        layers = [scheme.values(x, ckpt.heads) for x in stored]
        trf = receptive_field(scheme, layers, eps=eps, reduce=reduce, num_heads=ckpt.heads)
        params, before = TRAINED, initial.value if trf_status(initial) == FINITE else None
    status = trf_status(trf)
    value = trf.value if status == FINITE else None
    return TrfValue(status, value, eps, reduce, params, before, trf.reason)


def task_gates(report, tokenizer, train_length: int) -> tuple[TaskGate, ...]:
    """Each task's gate at L_tr: chance is 1/candidates of rank scoring (every example has as many)."""
    from extrap.tasks.ruler import make_ruler_example

    out = []
    for t in report.tasks:
        at = next((r for r in t.results if r.length == train_length), None)
        k = len(make_ruler_example(t.task, tokenizer, train_length, seed=0).candidates)
        score = at.score if at is not None and at.error is None else None
        out.append(task_gate(t.task, k, report.n, score))
    return tuple(out)


def measure_model(run, job, num_heads: int) -> tuple[EvalReport, EffectiveLengthModel]:
    """Perplexity with LongPPL, the RULER-style suite, the task gates and the TRF of a loaded run."""
    from extrap.evaluate.longppl import longppl_report
    from extrap.evaluate.settings import EvalSettings
    from extrap.tasks.ruler import RulerSettings, score_ruler

    s, lengths = job.settings, job.lengths
    at = EvalSettings(lengths, PROTOCOL, tokens=s.eval_tokens, delta=job.delta)
    ppl = longppl_report(run, at)
    suite = RulerSettings(
        s.tasks, lengths, train_length=s.train_length, n=s.n, buckets=s.buckets, threshold=s.threshold, method="rank"
    )
    ruler = score_ruler(run.model, run.tokenizer, suite)
    model = EffectiveLengthModel(
        pe=job.pe,
        trf=model_trf(run.path, job.pe, num_heads),
        ruler=ruler,
        gates=task_gates(ruler, run.tokenizer, s.train_length),
        longppl=ppl.longppl,
    )
    return ppl.report, model
