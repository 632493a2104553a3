"""The records of ``extrap erf`` and ``extrap theory`` read back what they write, and what earlier versions wrote."""

import json
import math
from pathlib import Path

import mpmath

from extrap.erf import AttentionERF, ErfReport, ErfSpearman, GradientERF, RankCorrelation, RunErf
from extrap.study.trained import TrainedHead, TrainedTheory
from extrap.theory import (
    TRF,
    CheckpointAnalysis,
    CheckpointTheory,
    Comparison,
    HeadResult,
    LayerResults,
    TheoryReport,
    analyse,
    compare,
    receptive_field,
)
from extrap.theory.plots import CurveStyle, curve_style

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden.json").read_text())


def run_erf_record(**changes) -> RunErf:
    grad = GradientERF(12.5, 13, (10, 15), (0.5, 0.9, 1.0), 4, 2, 0.99)
    attn = AttentionERF(2.5, 3.0, ((2.0, 3.0),), ((2.25, 2.75),), 0.01, 4, 2, 2)
    fields = dict(run="runs/a", pe="alibi", length=4, train_length=2, split="validation", segments=2, step=30)
    fields.update(threshold=0.99, eps=0.01, trf=111, trf_eps=1e-3, trf_reduce="max", trf_source="init")
    fields.update(grad=grad, attn=attn, provenance={"seed": 0, "corpus_hash": "abc"})
    return RunErf(**{**fields, **changes})


def test_erf_records_round_trip():
    r = run_erf_record()
    assert RunErf.from_json(r.to_json()) == r
    assert RunErf.from_json(run_erf_record(grad=None).to_json()) == run_erf_record(grad=None)  # --kind attn
    assert GradientERF.from_json(r.grad.to_json()) == r.grad
    assert AttentionERF.from_json(r.attn.to_json()) == r.attn
    sp = ErfSpearman(RankCorrelation(0.5, 3), RankCorrelation(None, 1))
    assert ErfSpearman.from_json(sp.to_json()) == sp
    report = ErfReport((r, run_erf_record(run="runs/b", trf=None, trf_reason="diverges")), sp, "1.0", "extrap erf")
    assert ErfReport.from_json(report.to_json()) == report
    assert ErfReport.from_json(json.loads(json.dumps(report.to_json()))) == report


def test_a_run_row_keeps_its_keys_in_order_and_its_provenance_last():
    row = run_erf_record().to_json()
    assert list(row)[:7] == ["run", "pe", "length", "train_length", "split", "segments", "step"]
    assert list(row)[-2:] == ["seed", "corpus_hash"]
    strict = run_erf_record(trf=math.inf, grad=GradientERF(math.nan, 1, (1,), (math.nan,), 4, 2, 0.99)).to_json()
    assert strict["trf"] is None and strict["grad_erf"] is None and strict["grad_curve"] == [None]


def test_erf_reads_the_golden_report_and_older_rows():
    report = ErfReport.from_json(GOLDEN["erf"])
    assert report.to_json() == GOLDEN["erf"]
    (r,) = report.runs
    assert r.trf == 1769 and r.grad.erf == 36.5 and r.attn.summary == 47.25 and r.provenance["seed"] == 0
    first = {k: v for k, v in GOLDEN["erf"]["runs"][0].items() if k not in ("trf_eps", "trf_reason")}
    assert RunErf.from_json(first).trf_eps == first["eps"]  # before --trf-eps, the TRF used the attention eps
    old = ErfReport.from_json({"rows": GOLDEN["erf"]["runs"], "spearman": GOLDEN["erf"]["spearman"]})
    assert old.runs == report.runs  # compare_trf_erf's dict of earlier versions
    assert RunErf.from_json({"grad_erf": 9.0, "attn_erf": 7.0}).attn.summary == 7.0  # an early study file


def test_theory_reads_the_golden_reports():
    assert TheoryReport.from_json(GOLDEN["theory"]).to_json() == GOLDEN["theory"]
    ckpt = CheckpointTheory.from_json(GOLDEN["theory-checkpoint"])
    assert ckpt.to_json() == GOLDEN["theory-checkpoint"]
    assert [(h.layer, h.result.head, h.params["slope"]) for h in ckpt.results][:2] == [
        (0, 0, 0.0625),
        (0, 1, 0.00390625),
    ]
    assert ckpt.results[0].result.trf == {"0.001": 111, "1e-06": 222}


def test_head_result_json_round_trips_every_sum():
    for r in analyse("kerple-log", 2, eps=(1e-3, 1e-6), lengths=[1024]) + analyse("rope", 2):
        assert HeadResult.from_json(r.to_json()).to_json() == r.to_json()
    third = HeadResult("x", 0, "converges", "t", "e", series_sum=mpmath.mpf(1) / 3, series_sum_error=mpmath.mpf(1e-16))
    j = third.to_json()
    assert len(j["series_sum_digits"]) < 18 and HeadResult.from_json(j).to_json() == j  # too few digits for the float
    huge = HeadResult("x", None, "converges", "t", "e", series_sum=mpmath.mpf("1e400"), tail_term=math.nan)
    assert HeadResult.from_json(huge.to_json()).to_json() == huge.to_json()
    assert HeadResult.from_json(huge.to_json()).head is None


def test_checkpoint_analysis_trf_and_comparison_round_trip():
    heads = tuple(analyse("alibi", 2, eps=(1e-3,), lengths=()))
    a = CheckpointAnalysis("alibi", 2, (LayerResults("blocks.0.attn", heads),))
    assert CheckpointAnalysis.from_json(a.to_json()).to_json() == a.to_json()
    for t in (receptive_field("alibi", eps=1e-3, num_heads=4), receptive_field("nope", eps=1e-3, num_heads=2)):
        assert TRF.from_json(t.to_json()) == t  # a divergent head is infinite again
    c = compare("alibi", "type1", 2)
    assert Comparison.from_json(c.to_json()) == c


def test_trained_theory_round_trips_and_a_scheme_that_learns_nothing_is_empty():
    (r,) = analyse("kerple-log", 1, eps=(1e-3,), lengths=())
    t = TrainedTheory((TrainedHead("kerple-log", 0, r, {"r1": 2.0, "r2": 1.0}, {"r1": 1.5, "r2": 1.0}),), 608, None)
    assert TrainedTheory.from_json(t.to_json()).to_json() == t.to_json()
    assert list(t.to_json()["rows"][0])[-4:] == ["params", "layer", "values", "initial_values"]
    assert (
        TrainedTheory.from_json({}) == TrainedTheory(learns_bias=False)
        and TrainedTheory(learns_bias=False).to_json() == {}
    )


def test_curve_style_is_a_record():
    assert curve_style(11) == CurveStyle(color="C1", ls="--")
