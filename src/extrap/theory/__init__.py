"""Theory of length extrapolation for Toeplitz attention biases (Qin et al. 2024 = 000).

* :func:`analyse`: per head, does sum_t exp(r(t)) converge (000 Theorem 0.4), and
  if so its sum B and receptive field n(eps) (000 Eq. 22); otherwise how the
  partial sums grow, how much weight the far tail keeps, and the attention
  dilution S(L)/S(L_train).
* :func:`receptive_field`: one TRF for a scheme or a trained model (per-layer
  values), n(eps) reduced over heads and layers, with the reason when there is none;
  :data:`WINDOW_AUTO_TRF`, :data:`ERF_TRF`, :data:`STUDY_TRF` are the settings
  extrap's commands use.
* :func:`analyse_checkpoint`: the same on learned parameters, per layer (a :class:`CheckpointAnalysis`).
* :mod:`extrap.theory.reports`: what ``extrap theory`` prints (:class:`TheoryReport`, :class:`CheckpointTheory`).
* :func:`compare`: which of two RPEs has the smaller TRF as eps -> 0 (000 Theorem 0.5).
* :mod:`extrap.theory.plots`: heatmaps (000 Fig. 7), TRF curves (Fig. 6), partial sums.

>>> from extrap.theory import analyse, receptive_field
>>> analyse("type1", num_heads=1, eps=[1e-3])[0].trf
{'0.001': 608}
>>> receptive_field("type1", eps=1e-3).value
608
"""

from extrap.theory.analysis import (
    DEFAULT_EPS,
    DEFAULT_LENGTHS,
    DEFAULT_TRAIN_LENGTH,
    CheckpointAnalysis,
    HeadResult,
    LayerResults,
    analyse,
    analyse_checkpoint,
    check_eps,
    clear_cache,
    collapse,
    eps_key,
    not_applicable_reason,
    partial_sums,
)
from extrap.theory.compare import Comparison, compare
from extrap.theory.convergence import VERDICTS, Verdict, classify
from extrap.theory.receptive import (
    ERF_TRF,
    REDUCTIONS,
    STUDY_TRF,
    TRF,
    WINDOW_AUTO_TRF,
    HeadTRF,
    TRFSetting,
    receptive_field,
)
from extrap.theory.reports import CheckpointHead, CheckpointTheory, TheoryReport
from extrap.theory.trf import Series, SeriesError

__all__ = [
    "CheckpointAnalysis",
    "CheckpointHead",
    "CheckpointTheory",
    "LayerResults",
    "TheoryReport",
    "DEFAULT_EPS",
    "DEFAULT_LENGTHS",
    "DEFAULT_TRAIN_LENGTH",
    "HeadResult",
    "analyse",
    "analyse_checkpoint",
    "check_eps",
    "clear_cache",
    "collapse",
    "eps_key",
    "not_applicable_reason",
    "partial_sums",
    "Comparison",
    "compare",
    "VERDICTS",
    "Verdict",
    "classify",
    "ERF_TRF",
    "REDUCTIONS",
    "STUDY_TRF",
    "TRF",
    "WINDOW_AUTO_TRF",
    "HeadTRF",
    "TRFSetting",
    "receptive_field",
    "Series",
    "SeriesError",
]
