"""The main PPL figure (issue 28, item 6 and "error bars at every length"): the change against L_tr with the
verdict's interval at every length, read back from the matplotlib artists, beside perplexity drawn as lines
without bands; results.json of earlier versions, with only ``worst_ratio_stderr``, still get their one bar."""

from __future__ import annotations

import math

import pytest

from extrap.experiments.extrapolation import figures
from extrap.results import StudyResults

L_TR, DELTA = 64, 0.02
PPL = {"flat": [5.0, 5.03, 4.99, 5.02], "breaks": [6.0, 6.6, 9.0, 15.0]}
# the verdict's paired standard error of |Δppl|/ppl at each PE's worst length (as results.json records it);
# each length's own loss_stderr (0.2, as wide as the cpu study's last-token ones) is ten times larger
WORST_SE = {"flat": 0.0031, "breaks": 0.04}
Z95 = 1.959964  # two-sided 95% quantile of the standard normal


def report(pe: str, tokens=(64, 64, 64, 64), worst=None) -> dict:
    ppls = PPL[pe]
    ratios = [abs(p - ppls[0]) / ppls[0] for p in ppls[1:]]
    rows = [
        {"length": L_TR * 2**k, "loss": math.log(p), "loss_stderr": 0.2, "ppl": p, "tokens": n}
        for k, (p, n) in enumerate(zip(ppls, tokens))
    ]
    return {
        "train_length": L_TR,
        "delta": DELTA,
        "extrapolates": max(ratios) < DELTA,
        "worst_ratio": max(ratios) if worst is None else worst,
        "worst_ratio_stderr": WORST_SE[pe],
        "results": rows,
    }


# the verdict's standard error of |Δppl|/ppl at each length above L_tr (ratio_stderr, as eval now records it)
RATIO_SE = {"flat": [0.0021, 0.0031, 0.0026], "breaks": [0.011, 0.02, 0.04]}


def with_ratios(rep: dict, pe: str, paired=(True, True, True)) -> dict:
    """``rep`` with each length above L_tr's ratio, its standard error and whether it is paired."""
    ref = rep["results"][0]["ppl"]
    for row, se, p in zip(rep["results"][1:], RATIO_SE[pe], paired):
        row.update(ratio=abs(row["ppl"] / ref - 1), ratio_stderr=se, ratio_paired=p)
    return rep


def results(**reports) -> StudyResults:
    pes = list(reports)
    return StudyResults.from_json(
        {"pes": pes, "train_length": L_TR, "delta": DELTA, "eval": {pe: {"last-token": reports[pe]} for pe in pes}}
    )


def bars(ax, dashed: bool = False) -> list[tuple[float, float, float]]:
    """(x, lower, upper) of every error bar drawn on ``ax`` (``dashed``: its line style too)."""
    out = []
    for container in ax.containers:
        for coll in container.lines[2]:
            style = coll.get_linestyle()[0][1] is not None  # (offset, dashes): None for a solid line
            for (x0, y0), (_, y1) in coll.get_segments():
                out.append((x0, min(y0, y1), max(y0, y1), *((style,) if dashed else ())))
    return out


def test_every_length_above_l_tr_gets_the_verdicts_interval_dashed_where_unpaired():
    reports = {"flat": with_ratios(report("flat"), "flat"), "breaks": with_ratios(report("breaks"), "breaks")}
    reports["breaks"]["results"][2]["ratio_paired"] = False  # 4 L_tr: from the two lengths' own errors
    fig = figures.ppl_figure(results(**reports), "last-token")
    change = fig.axes[0]
    assert "± 1.96 se" in change.get_title()
    drawn = sorted(bars(change, dashed=True))
    expect = sorted(
        (L_TR * 2**k, PPL[pe][k] / PPL[pe][0] - 1, RATIO_SE[pe][k - 1], (pe, k) == ("breaks", 2))
        for pe in PPL
        for k in (1, 2, 3)
    )
    assert len(drawn) == len(expect) == 6  # every length above L_tr, none at L_tr itself
    for (x, lo, hi, dashed), (at, y, se, unpaired) in zip(drawn, expect):
        assert x == at and (lo + hi) / 2 == pytest.approx(y, rel=1e-12)
        assert (hi - lo) / 2 == pytest.approx(Z95 * se, rel=1e-9)  # ± 1.96 ratio_stderr, not the worst's
        assert dashed is unpaired
    assert "± 1.96 standard errors" in figures.CAPTIONS["ppl"] and "every length above L_tr" in figures.CAPTIONS["ppl"]


def test_a_length_without_a_recorded_standard_error_has_no_bar():
    """Too few tokens to estimate it (ratio_stderr null): the other lengths keep theirs."""
    rep = with_ratios(report("breaks"), "breaks")
    rep["results"][1]["ratio_stderr"] = None
    drawn = sorted(bars(figures.ppl_figure(results(breaks=rep), "last-token").axes[0]))
    assert [x for x, _, _ in drawn] == [4 * L_TR, 8 * L_TR]


def test_the_change_panel_draws_the_verdicts_paired_interval_and_the_ppl_panel_plain_lines():
    fig = figures.ppl_figure(results(flat=report("flat"), breaks=report("breaks")), "last-token")
    change, ppl = fig.axes
    lengths = [L_TR * 2**k for k in range(4)]
    for pe in PPL:
        line = change.lines[[ln.get_label() for ln in change.lines].index(pe)]
        assert list(line.get_xdata()) == lengths
        assert list(line.get_ydata()) == pytest.approx([p / PPL[pe][0] - 1 for p in PPL[pe]], rel=1e-12)
    drawn = sorted(bars(change))  # by length: flat's worst is at 2 L_tr, breaks' at 8 L_tr
    assert len(drawn) == 2  # one bar per PE, at its worst length only
    expect = {"flat": (2 * L_TR, 5.03 / 5.0 - 1), "breaks": (8 * L_TR, 15.0 / 6.0 - 1)}
    for (x, lo, hi), pe in zip(drawn, ["flat", "breaks"]):
        at, y = expect[pe]
        assert x == at and (lo + hi) / 2 == pytest.approx(y, rel=1e-12)
        assert (hi - lo) / 2 == pytest.approx(Z95 * WORST_SE[pe], rel=1e-9)  # not 1.96 × loss_stderr
    for y in (-DELTA, DELTA):
        assert any(list(ln.get_ydata()) == [y, y] for ln in change.lines)  # ±δ, the verdict's threshold
    assert change.get_yscale() == "symlog"
    assert not ppl.collections and not ppl.containers  # perplexity as lines, no band
    labels = [ln.get_label() for ln in ppl.lines if not ln.get_label().startswith("_")]
    assert labels == list(PPL)
    for ln, pe in zip([ln for ln in ppl.lines if ln.get_label() in PPL], PPL):
        assert list(ln.get_ydata()) == pytest.approx(PPL[pe], rel=1e-12)  # ppl = exp(recorded loss)


def test_no_bar_where_the_record_does_not_say_it_is_the_paired_one():
    """Different token counts at L_tr and the worst length: the verdict could not pair them; a worst_ratio
    that no recorded length gives: the standard error belongs to no drawn point."""
    unpaired = report("breaks", tokens=(64, 64, 64, 60))
    stale = report("flat", worst=0.5)
    fig = figures.ppl_figure(results(breaks=unpaired, flat=stale), "last-token")
    assert bars(fig.axes[0]) == []
    assert len([ln for ln in fig.axes[0].lines if ln.get_label() in PPL]) == 2  # the changes are still drawn


def test_without_l_tr_only_the_perplexity_panel():
    rep = report("flat")
    rep["results"] = rep["results"][1:]
    fig = figures.ppl_figure(results(flat=rep), "last-token")
    assert len(fig.axes) == 1 and fig.axes[0].get_ylabel() == "perplexity (per token)"
