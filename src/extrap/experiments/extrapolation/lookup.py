"""What the claims, figures and tables all look up in the results: verdicts, TRFs, the ERF table, slope groups."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from extrap.experiments.extrapolation.results import SlopeVariant, TheoryRow, all_pes, block
from extrap.experiments.extrapolation.values import DEFAULT_HEADS, VERDICT_PROTOCOLS
from extrap.report.values import num
from extrap.results import StudyResults
from extrap.theory.receptive import STUDY_TRF, reduce_values


def pe_verdict(results: StudyResults, pe: str) -> tuple[bool | None, float | None, str | None]:
    """(extrapolates, worst_ratio, protocol) of ``pe``: last-token first, then nonoverlapping, then sliding."""
    reports = results.eval.get(pe) or {}
    for proto in VERDICT_PROTOCOLS:
        rep = reports.get(proto)
        if rep is not None and rep.extrapolates is not None:
            return rep.extrapolates, num(rep.worst_ratio), proto
    return None, None, None


def eps_keys(rows: list[TheoryRow]) -> list[str]:
    """ε keys of the per-head TRF dicts, largest ε first."""
    keys = {k for r in rows for k in r.trf}

    def val(k):
        try:
            return -float(k)
        except ValueError:
            return math.inf

    return sorted(keys, key=val)


def widest_head_trf(rows: list[TheoryRow], eps: str) -> int | None:
    """A PE's TRF at ε as the study records it (:data:`STUDY_TRF`'s reduction over the theory rows' heads)."""
    vals = [v for r in rows if (v := num(r.trf.get(eps))) is not None]
    return int(reduce_values(vals, STUDY_TRF.reduce)) if vals else None


@dataclass
class ErfRow:
    pe: str
    trf: float | None
    trf_eps: float | None
    trf_reduce: str | None
    grad_erf: float | None
    attn_erf: float | None
    params: str = "initial"  # the parameter values of ``trf``: "trained" or "initial"
    trf_initial: float | None = None  # the TRF at the initial parameters, beside a trained one
    trf_reason: str | None = None  # why ``trf`` is None


def count(x) -> int | float | None:
    """A number of tokens as the table prints it: an int stays exact, anything else as :func:`num`."""
    return x if isinstance(x, int) and not isinstance(x, bool) else num(x)


def erf_table(results: StudyResults) -> list[ErfRow]:
    """Per PE with receptive fields: its TRF (with how it was taken), gradient and attention ERF."""
    erf = block(results).erf
    return [
        ErfRow(
            pe,
            count(e.trf),
            e.trf_eps,
            e.trf_reduce,
            num(e.grad_erf),
            num(e.attn_erf),
            e.params,
            count(e.trf_initial),
            e.trf_reason,
        )
        for pe in all_pes(results)
        if (e := erf.get(pe)) is not None
    ]


def slope_groups(results: StudyResults) -> dict[str, list[SlopeVariant]]:
    groups: dict[str, list[SlopeVariant]] = {}
    slopes = block(results).slopes
    for v in slopes.variants if slopes else []:
        if v.pe:
            groups.setdefault(v.group or "variants", []).append(v)
    return groups


def slopes_protocol(results: StudyResults, variants: list[SlopeVariant]) -> str | None:
    """The first protocol (verdict order) that evaluated any of ``variants``."""
    return next((p for p in VERDICT_PROTOCOLS if any(p in (results.eval.get(v.pe) or {}) for v in variants)), None)


def num_heads(results: StudyResults, study_dir: Path | None = None) -> int:
    """Heads per layer: recorded in the results, else from a trained run's config, else DEFAULT_HEADS."""
    from extrap.run import RunDir

    if isinstance(results.n_head, int):
        return results.n_head
    for pe in results.runs:
        path = results.run_path(pe, study_dir)
        if path is None:
            continue
        try:
            n = RunDir(path).read_config().model.n_head
        except (OSError, ValueError, KeyError, TypeError):  # a half-written or foreign run folder
            continue
        if isinstance(n, int) and n > 0:
            return n
    return DEFAULT_HEADS
