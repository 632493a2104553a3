"""Evaluation: perplexity versus length, the extrapolation verdict, and evaluating a whole run.

* :mod:`.protocols`: ``nonoverlapping``, ``sliding`` and ``last-token`` on any model (:func:`evaluate`);
* :mod:`.verdict`: 000 Definition 0.1;
* :mod:`.settings`: :class:`EvalSettings`, what an evaluation is asked for, checked up front;
* :mod:`.driver`: :func:`evaluate_run` on a loaded run (a directory or ``hf:PATH``), with the
  window and the temperature resolved, returning an :class:`EvalReport`;
* :mod:`.score`: :func:`score_file_run`, a text file as one sequence (``extrap eval --file``).

The records (:class:`EvalReport`, :class:`LengthResult`, :class:`FileScore`, ...) live in
:mod:`extrap.results.evaluation`, beside the study's results that hold them.
"""

from extrap.evaluate.driver import evaluate_run, model_trf_window, resolve_temperature, resolve_window
from extrap.evaluate.protocols import (
    PROTOCOLS,
    check_settings,
    eval_last_token,
    eval_nonoverlapping,
    eval_sliding,
    evaluate,
    last_token_targets,
)
from extrap.evaluate.score import score_file_run
from extrap.evaluate.settings import EvalSettings
from extrap.evaluate.verdict import ExtrapolationVerdict, verdict
from extrap.results.evaluation import EvalReport, FileScore, LengthResult

__all__ = [
    "PROTOCOLS",
    "EvalReport",
    "EvalSettings",
    "ExtrapolationVerdict",
    "FileScore",
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
    "score_file_run",
    "verdict",
]
