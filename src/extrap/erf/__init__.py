"""Empirical receptive fields (ERF) of trained runs, and how they track the theory's TRF.

Two measurements, both computed on segments drawn deterministically from a
validation (or test) token stream:

* **Gradient ERF** (003 §5.1).  Predict one token from the ``L_ex - 1`` tokens
  before it (the same convention as 003, "predicting the next (L_ex-th) token",
  and as the ``last-token`` protocol of :mod:`extrap.evaluate`).  Backpropagate
  its negative log-probability to the input embeddings e_1..e_{L_ex-1} and
  normalise the gradient norms, s_m = ||g_m|| / sum_n ||g_n||.  The curve we
  return is indexed by *how many of the most recent context tokens* are kept::

      curve[k-1] = s_{L-k+1} + ... + s_L  (= 003's c_m with m = L-k+1, L = L_ex - 1)

  and the ERF is the smallest k with curve[k-1] > threshold (default 0.99).
  003 writes ERF = min{m | c_m > 0.99}; read literally this is always m = 1
  (c_1 = 1), and the paper reports the result as a number of tokens counted back
  from the prediction (e.g. "ERF = 768 tokens").  Our k is that count:
  k = L - m* + 1 with m* the largest index whose c_m still exceeds the threshold.

* **Attention ERF** (000, "Theoretical Receptive Field" section).  For query i of
  one head, C_i(j) is the attention mass on its j most recent keys (distances
  t < j) and n_emp(eps) = min{j : C_i(j) > C_i(i+1) (1 - eps)}; the rows are
  softmax outputs so C_i(i+1) = 1 up to rounding (we use the actual row sum).
  It needs the dense (L, L) probabilities of every layer, so its length is
  capped at :data:`ATTN_MAX_LENGTH`.

:func:`compare_trf_erf` lines both up against the theory's TRF (000 Eq. 22) over
several runs and reports Spearman rank correlations (000 Figs. 5-6 compare the
trends of TRF and ERF across RPEs).

:mod:`.measures` holds the two measurements on a model; :mod:`.runs` applies them to runs, as asked
by one :class:`ErfSettings`, and :mod:`.records` holds what they report (:class:`RunErf`, :class:`ErfReport`).
"""

from extrap.erf.measures import (
    ATTN_EPS,
    ATTN_MAX_LENGTH,
    DEFAULT_SEGMENTS,
    GRAD_THRESHOLD,
    HEAD_REDUCTIONS,
    KINDS,
    TRF_SOURCES,
    AttentionERF,
    GradientERF,
    attention_erf,
    attention_n_emp,
    by_distance,
    check_eps,
    check_threshold,
    cumulative_from_recent,
    erf_from_curve,
    gradient_erf,
    gradient_norms,
)
from extrap.erf.records import ERF_DEFAULTS, ErfReport, ErfSettings, ErfSpearman, RankCorrelation, RunErf
from extrap.erf.runs import (
    compare_trf_erf,
    plot_gradient_curves,
    run_erf,
    spearman,
    spearman_table,
)
from extrap.run.parameters import trained_bias_values

__all__ = [
    "ATTN_EPS",
    "ATTN_MAX_LENGTH",
    "DEFAULT_SEGMENTS",
    "ERF_DEFAULTS",
    "GRAD_THRESHOLD",
    "HEAD_REDUCTIONS",
    "KINDS",
    "TRF_SOURCES",
    "AttentionERF",
    "ErfReport",
    "ErfSettings",
    "ErfSpearman",
    "GradientERF",
    "RankCorrelation",
    "RunErf",
    "attention_erf",
    "attention_n_emp",
    "by_distance",
    "check_eps",
    "check_threshold",
    "compare_trf_erf",
    "cumulative_from_recent",
    "erf_from_curve",
    "gradient_erf",
    "gradient_norms",
    "plot_gradient_curves",
    "run_erf",
    "spearman",
    "spearman_table",
    "trained_bias_values",
]
