"""`extrap study --experiment rope-base`: the smoke study end to end, its records, its claims and bad input."""

import json
import math

import pytest
import torch

from extrap.cli import main
from extrap.experiments.rope_base import claims as rb
from extrap.experiments.rope_base import measure as rm
from extrap.experiments.rope_base import readme as rope_readme
from extrap.experiments.rope_base.about import DEFAULT_PES
from extrap.experiments.rope_base.presets import PRESETS
from extrap.experiments.rope_base.results import (
    RESULTS,
    DistanceBin,
    PasskeyLength,
    PplLength,
    RopeBaseBlock,
    RopeBaseModel,
    RopePrediction,
)
from extrap.report import compute_claims, readme
from extrap.results import EvalReport, LengthResult, StudyResults, load_results
from extrap.study.models import ModelJob, ModelOutput

PES = "rope:base=100,nope"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("rope") / "s"
    argv = ["study", "--experiment", "rope-base", "--preset", "smoke", "--pe", PES, "--jobs", "1", "--out", str(out)]
    assert main(argv + ["--device", "cpu", "--steps", "6"]) == 0  # a few steps: the models need not learn here
    return out


def test_smoke_study_end_to_end(smoke):
    res = load_results(smoke)
    s = PRESETS["smoke"]
    L_tr = s.train_length
    assert res.experiment == "rope-base" and res.pes == ["rope:base=100", "nope"]
    b = RESULTS.of(res)
    assert b.train_length == L_tr and list(b.lengths) == [L_tr * k for k in s.multiples]
    rope, nope = b.models["rope:base=100"], b.models["nope"]
    assert [r.length for r in rope.ppl] == list(b.lengths) and all(r.ppl > 1 for r in rope.ppl)
    assert rope.ppl[0].ratio is None and all(r.ratio is not None for r in rope.ppl[1:])
    # the ratio is |ppl_L - ppl_Ltr| / ppl_Ltr of the study's own last-token report
    rep = res.eval["rope:base=100"]["last-token"]
    ppl = {r.length: r.ppl for r in rep.results}
    assert rope.ppl[1].ratio == pytest.approx(abs(ppl[2 * L_tr] - ppl[L_tr]) / ppl[L_tr])
    assert [p.length for p in rope.passkey] == list(b.lengths) and all(p.n == s.passkey_n for p in rope.passkey)
    assert sum(x.n for x in rope.by_distance) == s.passkey_n * len(b.lengths)
    # d = 32 / 2 = 16 per head; Liu's from-scratch bound by hand: 96 · 100^(1/8)
    assert rope.prediction.head_dim == 16 and rope.prediction.plain is True
    assert rope.prediction.scratch_bound == pytest.approx(96 * 10**0.25)
    assert rope.prediction.first_negative == 16  # B(m) = Σ_i cos(m·100^(-i/8)), i < 8: first < 0 at m = 16
    assert nope.prediction.error and nope.prediction.scratch_bound is None
    assert res.learning is not None and set(res.learning.loss) == {"rope:base=100", "nope"}
    names = [c.claim for c in res.claims]
    assert names == [rb.LIU, rb.MEN]
    assert all(c.ok is None and c.untested for c in res.claims)  # 6 steps learn nothing: not tested
    html = (smoke / "report.html").read_text()
    assert 'id="rope-base"' in html and "L_tr·β^(2/d)" in html and "figures/rope_base.png" in html
    assert (smoke / "figures" / "rope_base.png").is_file()


def test_men_first_negative_by_hand():
    """B(m) = Σ_i cos(m θ_i) with θ_i = 100^(-2i/16): evaluated directly, its first negative m is 16."""
    theta = [100 ** (-2 * i / 16) for i in range(8)]
    first = next(m for m in range(1, 100) if sum(math.cos(m * t) for t in theta) < 0)
    assert first == 16


def test_smoke_study_resumes_without_training_again(smoke, monkeypatch):
    from extrap import train as training

    def refuse(*a, **k):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(training, "train", refuse)
    before = RESULTS.of(load_results(smoke))
    argv = ["study", "--experiment", "rope-base", "--preset", "smoke", "--pe", PES, "--jobs", "1", "--steps", "6"]
    assert main(argv + ["--out", str(smoke), "--resume", "--device", "cpu"]) == 0
    assert RESULTS.of(load_results(smoke)) == before


def test_the_readme_renders_the_rope_base_section(smoke, tmp_path):
    md = tmp_path / "README.md"
    md.write_text(f"{readme.BEGIN}\nkept\n{readme.END}\n{rope_readme.BEGIN}\nold\n{rope_readme.END}\n")
    assert readme.main([str(smoke / "results.json"), str(md)]) == 0
    text = md.read_text()
    assert "kept" in text and "old" not in text
    assert "`extrap study --experiment rope-base --preset smoke`" in text
    assert "| rope:base=100 (did not learn) | 96 | 170.7 |" in text
    assert readme.main(["--check", str(smoke / "results.json"), str(md)]) == 0


def test_records_round_trip():
    m = model("rope:base=1000", break_at=256, bins=[(64, 128, 10, 9), (128, 256, 10, 2)], first=52)
    assert RopeBaseModel.from_json(json.loads(json.dumps(m.to_json()))) == m
    block = RopeBaseBlock(128, (128, 256), 0.02, 0.5, 10, 32, {m.pe: m})
    assert RopeBaseBlock.from_json(json.loads(json.dumps(block.to_json()))) == block
    res = StudyResults(experiment="rope-base", extra=RESULTS.entry(block))
    assert "block" not in res.to_json() and res.to_json()["rope_base"] == block.to_json()  # under its spec's key
    assert RESULTS.of(StudyResults.from_json(json.loads(json.dumps(res.to_json())))) == block
    assert "rope_base" not in StudyResults(experiment="extrapolation").to_json()  # other experiments unchanged
    job = ModelJob("rope", "/x", PRESETS["smoke"], 0.02, 1)
    assert job.lengths == (96, 192, 384)
    rep = EvalReport(pe="rope", protocol="last-token", results=(LengthResult(128, 2.0, 32, 0.1, stderr=0.1),))
    out = ModelOutput("rope", "/x", None, rep, m)
    assert ModelOutput.from_json(json.loads(json.dumps(out.to_json())), RopeBaseModel) == out


# ---------------------------------------------------------------------------
# measurements
# ---------------------------------------------------------------------------
def test_ratios_and_the_break_use_the_verdicts_noise_test():
    g = torch.Generator().manual_seed(0)
    base = torch.rand(64, generator=g, dtype=torch.float64) + 1.0
    wild = base + 0.05 + 2.0 * torch.randn(64, generator=g, dtype=torch.float64)  # a 5% rise buried in noise
    shifts = {256: base + 0.001, 512: wild, 1024: base + 0.5}
    results = (LengthResult(128, float(base.mean()), 64, 0.0, stderr=0.05, nll=base),) + tuple(
        LengthResult(L, float(x.mean()), 64, 0.0, stderr=0.05, nll=x) for L, x in shifts.items()
    )
    rows = rm.ppl_rows(EvalReport(results=results), 128, 0.02)
    assert rows[0].ratio is None
    assert rows[1].ratio == pytest.approx(math.expm1(0.001)) and rows[1].above_delta is False
    d = float((wild - base).mean())
    se = math.exp(d) * float((wild - base).std()) / 8  # paired: the per-target differences, independent targets
    assert rows[2].ratio == pytest.approx(abs(math.expm1(d))) and rows[2].ratio_stderr == pytest.approx(se)
    assert rows[2].ratio > 0.02 and rows[2].above_delta is False  # above δ, but δ is inside its 95% interval
    assert rows[3].ratio == pytest.approx(math.expm1(0.5)) and rows[3].above_delta is True
    assert rm.measured_break(rows) == 1024
    noisy = (PplLength(128, 5.0, 0.1), PplLength(256, 6.0, 0.1, 0.2, 0.5, False))
    assert rm.measured_break(noisy) is None


def test_distance_bins_and_falloff():
    assert rm.distance_edges(128, 2048) == [0, 64, 128, 256, 512, 1024, 2048]
    hits = [(70, True), (100, True), (130, True), (300, False), (600, False)]
    bins = rm.distance_bins(hits, [0, 64, 128, 256, 512, 1024])
    assert [(b.n, b.correct) for b in bins] == [(0, 0), (2, 2), (1, 1), (1, 0), (1, 0)]
    assert rm.falloff_distance(bins, 0.5) == 256  # nearest filled bin: 1.0; first below 0.5: (256, 512]
    flat = (DistanceBin(64, 128, 4, 2), DistanceBin(128, 256, 4, 1))
    assert rm.falloff_distance(flat, 0.5) is None  # 0.25 is not below 0.5 × 0.5
    assert rm.falloff_distance((DistanceBin(64, 128, 4, 0), DistanceBin(128, 256, 4, 0)), 0.5) is None
    longer = PasskeyLength(256, 1, 0, (DistanceBin(0, 64, 0, 0), DistanceBin(64, 128, 1, 0)))
    lengths = (PasskeyLength(128, 2, 2, bins[:2]), longer)
    assert [(b.n, b.correct) for b in rm.pooled(lengths)] == [(0, 0), (3, 2)]


def test_prediction_is_extrap_theory_ropes():
    from extrap.theory.rope import analyse_rope

    p = rm.prediction("rope:base=10000", 16, 128, 2048)
    r = analyse_rope("rope:base=10000", 16, 128, 2048)
    assert (p.in_distribution_length, p.critical_dim, p.extrapolation_bound) == (
        r.in_distribution_length,
        r.liu.critical_dim,
        r.liu.extrapolation_bound,
    )
    assert p.first_negative == r.men.aggregation_first_negative and p.decided_by == r.decided_by
    assert p.scratch_bound == pytest.approx(128 * 10000**0.125) and p.plain is True
    assert rm.prediction("nope", 16, 128, 2048).error  # not rotary: no prediction, says why
    assert rm.prediction("rope:scaling=linear,factor=2", 16, 128, 2048).plain is False
    assert (
        rm.prediction("xpos", 16, 128, 2048).plain is False
        and rm.prediction("rope:p=0.75", 16, 128, 2048).plain is False
    )
    half = rm.prediction("rope:partial=0.5", 16, 128, 2048)  # 8 of 16 dimensions rotate: Liu's d is 8
    assert half.plain is False and half.rotary_dim == 8 and half.scratch_bound == pytest.approx(128 * 10000**0.25)


# ---------------------------------------------------------------------------
# claims on constructed records
# ---------------------------------------------------------------------------
LENGTHS = (128, 256, 512, 1024, 2048)


def model(pe, break_at=None, bins=(), first=None, bound=None, plain=True):
    ppl = tuple(PplLength(L, 5.0, 0.01, None if L == 128 else 0.1, 0.01, L >= (break_at or 10**9)) for L in LENGTHS)
    pred = RopePrediction(16, 16, plain, 1000.0, 128, "rotation-angles", 8, 199.0, bound, first, 4096)
    dist = tuple(DistanceBin(*b) for b in bins)
    return RopeBaseModel(pe, ppl, (), dist, break_at, rm.falloff_distance(dist, 0.5), pred)


def study(models, losses=None):
    block = RopeBaseBlock(128, LENGTHS, 0.02, 0.5, 10, 32, {m.pe: m for m in models})
    loss = losses or {m.pe: 1.5 for m in models}
    gate = {"unigram_entropy": 3.2, "max_fraction": 0.8, "protocol": "last-token", "loss": loss}
    res = StudyResults.from_json({"experiment": "rope-base", "pes": list(loss), "learning": gate})
    res.extra.update(RESULTS.entry(block))
    return res


def judged(models, losses=None):
    c = compute_claims(study(models, losses))
    return {x.claim: x for x in c}


def test_liu_claim_reproduced_and_refuted():
    early = model("rope:base=100", break_at=256, bound=227.6)
    ok = judged([early, model("rope:base=1e5", break_at=512, bound=539.8)])
    assert ok[rb.LIU].ok is True and "first length at or past it: 256" in ok[rb.LIU].evidence
    bad = judged([early, model("rope:base=1e4", break_at=None, bound=404.8)])
    assert bad[rb.LIU].ok is False and "rope:base=1e4: break none, bound 405 (first length at or past it: 512) ✘" in (
        bad[rb.LIU].evidence
    )
    late = judged([model("rope:base=1e3", break_at=1024, bound=303.5)])
    assert late[rb.LIU].ok is False  # broke only at 1024, after the first length past its bound (512)
    past = judged([model("rope:base=1e30", break_at=None, bound=1e5)])
    assert past[rb.LIU].ok is None and "past the longest length" in past[rb.LIU].evidence
    not_plain = judged([model("rope:p=0.75", break_at=None, bound=404.8, plain=False)])
    assert not_plain[rb.LIU].ok is None and "no plain RoPE" in not_plain[rb.LIU].evidence


def test_liu_claim_not_tested_when_models_did_not_learn():
    c = judged([model("rope:base=100", break_at=None, bound=227.6)], losses={"rope:base=100": 3.1})
    assert c[rb.LIU].ok is None and c[rb.LIU].untested and "did not learn" in c[rb.LIU].evidence


def test_men_claim_reproduced_and_refuted():
    falls = [(64, 128, 10, 9), (128, 256, 10, 1), (256, 512, 10, 0)]
    ok = judged([model("rope:base=1e3", bins=falls, first=100)])
    assert ok[rb.MEN].ok is True and "(128, 256] 0.10, (256, 512] 0.00 against 0.5 × 0.90" in ok[rb.MEN].evidence
    holds = [(64, 128, 10, 9), (128, 256, 10, 8), (256, 512, 10, 1)]
    bad = judged([model("rope:base=1e3", bins=falls, first=100), model("rope:base=100", bins=holds, first=16)])
    assert bad[rb.MEN].ok is False and "rope:base=100: B(m) < 0 first at m = 16" in bad[rb.MEN].evidence
    far = judged([model("rope:base=1e6", bins=holds, first=1467)])
    assert far[rb.MEN].ok is None and "not checked" in far[rb.MEN].evidence
    blind = judged([model("rope:base=1e3", bins=[(64, 128, 10, 1), (128, 256, 10, 0)], first=100)])
    assert blind[rb.MEN].ok is None and blind[rb.MEN].untested and "do not retrieve" in blind[rb.MEN].evidence
    assert judged([model("nope", bins=holds, first=None)])[rb.MEN].ok is None


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        ["--tasks", "x"],
        ["--tasks", "passkey"],
        ["--pe", "rope:base=100,bogus"],
        ["--pe", "rope:base=0.5"],
        ["--pe", "rope:colour=red"],
        ["--preset", "giant"],
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, extra):
    out = tmp_path / "s"
    argv = ["study", "--experiment", "rope-base", "--preset", "smoke", "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_the_default_models_are_all_built_or_refused_by_name(tmp_path):
    """p-RoPE and partial rotary are in the default list: a registry without them stops the study, naming them."""
    from extrap.errors import ExtrapError
    from extrap.experiments.rope_base.plan import build
    from extrap.study import StudyRequest

    try:
        exp = build(StudyRequest(tmp_path / "s", preset="smoke", experiment="rope-base"))
    except ExtrapError as e:
        assert "rope:p=0.75" in str(e) or "rope:partial=0.5" in str(e)
        assert not (tmp_path / "s").exists()
        return
    assert [j.name for j in exp.jobs] == list(DEFAULT_PES) and len(exp.jobs) == 8


def test_the_readme_has_one_rope_base_block_after_the_study_block():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert text.count(rope_readme.BEGIN) == 1 and text.count(rope_readme.END) == 1
    assert text.index(readme.END) < text.index(rope_readme.BEGIN) < text.index(rope_readme.END)
