"""The extrapolation claims are judged only on models that learned; formula-only claims do not need training.

A model "learned" when its loss at L_tr is at most a set fraction of the unigram entropy of its
training tokens (extrap.results.LearningGate, computed by extrap.study.learning).
"""

from __future__ import annotations

import math

import pytest
import torch

from extrap import report
from extrap.results import StudyResults, load_results, save_results

L_TR = 64
PES = ["alibi", "kerple-log", "type1", "type2", "example1", "example2", "sinusoidal", "nope"]
CONVERGENT = ["alibi", "kerple-log", "type1", "type2"]
TRF = {  # widest-head TRF at ε = 1e-3 and 1e-6 of the convergent PEs (what the theory rows carry)
    "alibi": (1769, 3500),
    "kerple-log": (586123, 10**11),
    "type1": (608, 607927),
    "type2": (15, 48),
}
UNIGRAM = 3.2311
FRACTION = 0.8  # the fraction recorded with the gate: results.json carries the one its claims were judged with


def eval_report(worst: float, extrapolates: bool) -> dict:
    ppl = 40.0
    rows = [{"length": L_TR * k, "ppl": ppl * (1 + worst * (k > 1)), "loss": None} for k in (1, 2, 4)]
    return {"protocol": "last-token", "extrapolates": extrapolates, "worst_ratio": worst, "results": rows}


def results(losses: dict[str, float | None] | None, **extra) -> StudyResults:
    """A study where every PE 'extrapolates' by 000 Definition 0.1 (flat curves), with the given losses at L_tr."""
    theory = [
        {"pe": pe, "head": 0, "verdict": "converges", "test": "t", "trf": {"0.001": a, "1e-06": b}}
        for pe, (a, b) in TRF.items()
    ]
    theory += [{"pe": pe, "head": 0, "verdict": "diverges", "test": "t", "trf": {}} for pe in ("example1", "example2")]
    theory += [{"pe": pe, "head": "all", "verdict": "not-applicable", "trf": {}} for pe in ("sinusoidal", "nope")]
    d = {
        "experiment": "extrapolation",
        "pes": PES,
        "train_length": L_TR,
        "theory": theory,
        "runs": {pe: {"run_dir": f"runs/{pe}", "final_loss": 4.0} for pe in PES},
        "eval": {pe: {"last-token": eval_report(0.001, True)} for pe in PES},
        "erf": {pe: {"trf": TRF[pe][0], "grad_erf": 10.0 + k, "attn_erf": 5.0 + k} for k, pe in enumerate(CONVERGENT)},
        "spearman": {"grad": 0.8, "attn": 0.8, "n": 4, "trf_eps": 1e-3, "trf_reduce": "max"},
        **extra,
    }
    if losses is not None:
        d["learning"] = {
            "unigram_entropy": UNIGRAM,
            "unigram_tokens": 10**7,
            "max_fraction": FRACTION,
            "protocol": "nonoverlapping",
            "loss": losses,
        }
    return StudyResults.from_json(d)


def claims(res: StudyResults) -> dict:
    return {c.claim: c for c in report.compute_claims(res)}


MODEL_CLAIMS = (
    "Convergent RPEs extrapolate",
    "1/n and 1/(n ln n) do not extrapolate",
    "Sinusoidal does not extrapolate",
    "TRF and ERF trends agree",
)


def test_models_that_did_not_learn_leave_the_claims_not_tested():
    """Loss at L_tr above 0.8 of the unigram entropy: flat curves of untrained models prove nothing."""
    by = claims(results(dict.fromkeys(PES, 4.05)))
    for name in MODEL_CLAIMS:
        c = by[name]
        assert c.ok is None and c.untested, c
        assert c.evidence.startswith("not tested: the models did not learn"), c.evidence
        assert "4.05" in c.evidence and "3.23" in c.evidence and "2.58" in c.evidence, c.evidence  # the numbers
    assert report.page.status(by["Convergent RPEs extrapolate"]) == ("not tested", "na")


def test_models_that_learned_decide_the_claims():
    by = claims(results(dict.fromkeys(PES, 2.0)))  # 2.0 < 0.8 * 3.23
    assert by["Convergent RPEs extrapolate"].ok is True
    assert by["1/n and 1/(n ln n) do not extrapolate"].ok is False  # trained and flat: a real counterexample
    assert by["Sinusoidal does not extrapolate"].ok is False
    assert by["TRF and ERF trends agree"].ok is True
    assert not any(c.untested for c in by.values())


def test_formula_and_cost_claims_need_no_training():
    """TRF(Type2) < TRF(Type1) is a property of the formulas: decided whatever the models did."""
    timing = {"timing": {"pe": "alibi", "rows": [{"method": "sliding", "relative": 20.0}]}}
    for losses in (dict.fromkeys(PES, 4.05), None, dict.fromkeys(PES, 2.0)):
        by = claims(results(losses, **timing))
        c = by["TRF(Type2) < TRF(Type1)"]
        assert c.ok is True and not c.untested and "Type1 608, Type2 15" in c.evidence
        assert by["Sliding-window inference is much slower than non-overlapping"].ok is True


def test_some_models_learned_the_others_are_named():
    losses = dict.fromkeys(PES, 2.0) | {"type1": 4.1, "kerple-log": 3.9}
    by = claims(results(losses))
    conv = by["Convergent RPEs extrapolate"]
    assert conv.ok is True and "alibi: extrapolates" in conv.evidence and "type1: extrapolates" not in conv.evidence
    assert "Left out, not tested: kerple-log, type1" in conv.evidence and "4.1" in conv.evidence
    sp = by["TRF and ERF trends agree"]  # only two PEs learned: too few to rank
    assert sp.ok is None and sp.untested and "n = 2 PEs (alibi, type2)" in sp.evidence


def test_spearman_is_ranked_over_the_models_that_learned():
    from extrap.experiments.extrapolation.results import RESULTS, block

    r = results(dict.fromkeys(PES, 2.0) | {"type1": 4.1})
    own = block(r)
    own.erf["alibi"].grad_erf = 100.0  # alibi, kerple-log, type2 then rank TRF and gradient ERF in opposite orders
    own.erf["type2"].grad_erf = 200.0
    RESULTS.put(r, own)
    c = claims(r)["TRF and ERF trends agree"]
    assert c.ok is False and "ρ(TRF, grad ERF) = -1" in c.evidence and "n = 3 PEs" in c.evidence


def test_results_without_the_gate_load_and_say_why(tmp_path):
    """A results.json written before the gate: loads, and the claims about models are not tested, with the reason."""
    save_results(results(None), tmp_path)
    res = load_results(tmp_path)
    assert res.learning is None and res.learned("alibi") is None
    by = claims(res)
    for name in MODEL_CLAIMS:
        assert by[name].ok is None and by[name].untested
        assert "whether the models of" in by[name].evidence and "no unigram entropy" in by[name].evidence
    html = report.render_html(res, {}, report.compute_claims(res))
    assert "not tested" in html and "records no unigram entropy" in html


def test_the_gate_is_stored_and_shown(tmp_path):
    res = results(dict.fromkeys(PES, 4.05) | {"alibi": None})
    save_results(res, tmp_path)
    back = load_results(tmp_path)
    assert back.learning.unigram_entropy == UNIGRAM and back.learning.loss["type1"] == 4.05
    assert back.learned("type1") is False and back.learned("alibi") is None
    html = report.render_html(back, {}, report.compute_claims(back))
    assert "no: did not learn" in html and "unknown" in html and "3.231" in html and "2.585" in html


def test_unigram_entropy_is_shannons():
    from scipy.stats import entropy

    from extrap.study.learning import unigram_entropy

    stream = torch.tensor([0, 1, 1, 2, 2, 2, 2, 7])
    counts = [1, 2, 4, 1]
    assert unigram_entropy(stream) == pytest.approx(entropy(counts))  # natural log
    assert unigram_entropy(torch.arange(256)) == pytest.approx(math.log(256))
    assert unigram_entropy(torch.zeros(10, dtype=torch.long)) == 0.0


def test_gate_of_a_real_run(tmp_path, tiny_text):
    """The study's gate from a trained run: the training stream's entropy and the evaluated loss at L_tr."""
    import extrap
    from extrap.data import load_corpus, load_tokenizer, token_stream
    from extrap.evaluate import EvalSettings, evaluate_run
    from extrap.study.learning import learning_gate, loss_at
    from extrap.train import build_configs, train

    m, t = build_configs("alibi", "smoke", overrides=dict(steps=2, corpus=tiny_text, train_length=32))
    run = tmp_path / "alibi"
    train(run, m, t, progress=False)
    rep = evaluate_run(extrap.load(run), EvalSettings(lengths=[32, 64], protocol="nonoverlapping", tokens=128))
    gate = learning_gate({"alibi": {"nonoverlapping": rep}}, run, 32)
    stream = token_stream(load_corpus(tiny_text), load_tokenizer(run), "train")
    counts = torch.bincount(stream.long()).double()
    p = counts[counts > 0] / counts.sum()
    assert gate.unigram_entropy == pytest.approx(float(-(p * p.log()).sum()))
    assert gate.unigram_tokens == stream.numel() and gate.protocol == "nonoverlapping"
    assert gate.loss["alibi"] == pytest.approx(rep.results[0].loss) == pytest.approx(loss_at(rep, 32))
    assert gate.learned("alibi") is False  # two steps of training do not beat the byte frequencies
