"""Evaluation: perplexity versus length, the extrapolation verdict, and evaluating a whole run.

* :mod:`.protocols`: ``nonoverlapping``, ``sliding`` and ``last-token`` on any model (:func:`evaluate`);
* :mod:`.verdict`: 000 Definition 0.1;
* :mod:`.driver`: :func:`evaluate_run` on a run directory or ``hf:PATH``, with ``--window`` and
  ``--temperature`` resolved.
"""

from extrap.evaluate.driver import evaluate_run, model_trf_window, resolve_temperature, resolve_window
from extrap.evaluate.protocols import (
    PROTOCOLS,
    LengthResult,
    check_settings,
    eval_last_token,
    eval_nonoverlapping,
    eval_sliding,
    evaluate,
    last_token_targets,
)
from extrap.evaluate.verdict import ExtrapolationVerdict, verdict

__all__ = [
    "PROTOCOLS",
    "ExtrapolationVerdict",
    "LengthResult",
    "check_settings",
    "eval_last_token",
    "eval_nonoverlapping",
    "eval_sliding",
    "evaluate",
    "evaluate_run",
    "last_token_targets",
    "model_trf_window",
    "resolve_temperature",
    "resolve_window",
    "verdict",
]
