"""The extrapolation report's constants (protocols, thresholds, figure sizes) and how it names PEs and TRFs."""

from __future__ import annotations

from extrap.report.values import fmt

PROTOCOLS = ("nonoverlapping", "sliding", "last-token")
VERDICT_PROTOCOLS = ("last-token", "nonoverlapping", "sliding")  # 003 §3.4's protocol first
PAPER_SLIDING_RELATIVE = 44.35  # 000 Table 1: sliding window vs nonoverlapping inference time
SLIDING_SLOWER_FACTOR = 10.0  # "much slower": our threshold for the Table 1 claim
SPEARMAN_MIN = 0.5  # TRF and ERF trends "agree" (000 Figs. 5-6) when rho >= this
SPEARMAN_MIN_N = 3  # below 3 PEs a rank correlation says nothing
HEATMAP_LENGTH = 32  # positions shown in each exp(RPE) heatmap (000 Fig. 7)
HEATMAP_HEAD = 0
DEFAULT_HEADS = 8  # when the results do not record the number of heads
MAX_HEATMAPS = 12
REDUCE_WORDS = {"max": "widest head", "median": "median over heads", "mean": "mean over heads"}
PARAMS_WORDS = {
    "trained": "trained values (every layer) for schemes with learned bias parameters",
    "initial": "initial parameters",
}


def scheme_name(pe: str) -> str:
    """Scheme name of a spec ("window:64" -> "window")."""
    return pe.split(":", 1)[0].strip()


def match_spec(keys, name: str) -> str | None:
    """The spec among ``keys`` whose scheme name is ``name`` (the exact spec preferred)."""
    keys = list(keys)
    if name in keys:
        return name
    return next((k for k in keys if scheme_name(k) == name), None)


def trf_setting(eps: float | None, reduce: str | None) -> str:
    """How a TRF number was taken, in words: "widest head, ε = 0.001"."""
    if eps is None and reduce is None:
        return "setting not recorded"
    how = REDUCE_WORDS.get(reduce or "", reduce or "reduction not recorded")
    return f"{how}, ε = {fmt(eps, 3)}"
