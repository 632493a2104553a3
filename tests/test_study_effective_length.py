"""`extrap study --experiment effective-length`: the smoke study end to end, its records, its claims, bad input,
and the task mix it trains on."""

import json
import math

import pytest

from extrap.cli import main
from extrap.experiments.effective_length import claims as el
from extrap.experiments.effective_length import readme as efflen_readme
from extrap.experiments.effective_length.about import DEFAULT_PES
from extrap.experiments.effective_length.presets import PRESETS
from extrap.experiments.effective_length.results import (
    RESULTS,
    EffectiveLengthBlock,
    EffectiveLengthModel,
    TrfValue,
    task_gate,
)
from extrap.experiments.effective_length.tables import ranking_rows
from extrap.experiments.rope_base import readme as rope_readme
from extrap.report import readme
from extrap.results import EvalReport, LengthResult, StudyResults, load_results
from extrap.results.longppl import LongPPL, LongPPLResult
from extrap.study.models import ModelJob, ModelOutput
from extrap.tasks.ruler import (
    LengthMean,
    RulerLength,
    RulerReport,
    RulerTaskReport,
    effective_length,
)

PES = "alibi,rope"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("efflen") / "s"
    argv = [
        "study",
        "--experiment",
        "effective-length",
        "--preset",
        "smoke",
        "--pe",
        PES,
        "--out",
        str(out),
    ]
    assert main(argv + ["--device", "cpu"]) == 0
    return out


def test_smoke_study_end_to_end(smoke):
    res = load_results(smoke)
    s = PRESETS["smoke"]
    L_tr = s.train_length
    assert res.experiment == "effective-length" and res.pes == ["alibi", "rope"] and res.tasks == list(s.tasks)
    b = RESULTS.of(res)
    assert b.train_length == L_tr and list(b.lengths) == [L_tr * k for k in s.multiples]
    alibi, rope = b.models["alibi"], b.models["rope"]
    # TRF: the theory engine's n(1e-3) for ALiBi's 2 heads (smoke: 2 heads, slopes 1/2 and 1/4) ...
    from extrap.theory import receptive_field

    assert alibi.trf.finite and alibi.trf.value == receptive_field("alibi", eps=1e-3, num_heads=2).value
    assert rope.trf.status == "not-applicable" and rope.trf.value is None and "Toeplitz" in rope.trf.reason
    for m in (alibi, rope):
        task = m.ruler.tasks[0]
        scores = [r.score for r in task.results]
        e = task.effective_length
        # the relative form, recorded: cutoff = 0.85 × the score at L_tr, recomputed by hand
        assert e.form == "relative" and e.ratio == 0.85 and e.reference_length == L_tr
        if scores[0] > 0:
            assert e.cutoff == pytest.approx(0.85 * scores[0])
            held = [L for L, x in zip(b.lengths, scores) if x >= e.cutoff]
            assert e.length == (b.lengths[1] if len(held) == 2 else b.lengths[0])
        g = m.gate(task.task)  # rank scoring over 4 candidates; n = 4 examples
        assert g.chance == 0.25 and g.n == s.n and g.score == scores[0]
        assert g.learned == (scores[0] > 0.25 + 2 * math.sqrt(0.25 * 0.75 / s.n))
        # LongPPL beside the plain perplexity, which is the study's own nonoverlapping report
        ppl = {r.length: r.ppl for r in res.eval[m.pe]["nonoverlapping"].results}
        for r in m.longppl.results:
            assert r.ppl == pytest.approx(ppl[r.length]) and r.tokens == s.eval_tokens
        assert len(task.results[0].by_depth) == 2 and sum(c.n for c in task.results[0].by_depth) == s.n
    assert [c.claim for c in res.claims] == [el.KEEP, el.OUTLAST]
    for name in ("heatmap_alibi_niah_single", "heatmap_rope_niah_single", "efflen_ppl"):
        assert (smoke / "figures" / f"{name}.png").is_file() and (smoke / "figures" / f"{name}.svg").is_file()
    html = (smoke / "report.html").read_text()
    assert 'id="effective-length"' in html and "figures/heatmap_alibi_niah_single.png" in html
    assert "not-applicable" in html and "PPL / LongPPL" in html


def test_smoke_study_resumes_without_training_again(smoke, monkeypatch):
    from extrap import train as training

    def refuse(*a, **k):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(training, "train", refuse)
    before = RESULTS.of(load_results(smoke))
    argv = ["study", "--experiment", "effective-length", "--preset", "smoke", "--pe", PES, "--jobs", "1", "--resume"]
    assert main(argv + ["--out", str(smoke), "--device", "cpu"]) == 0
    assert RESULTS.of(load_results(smoke)) == before


def test_the_readme_renders_the_effective_length_section(smoke, tmp_path):
    md = tmp_path / "README.md"
    md.write_text(
        f"{readme.BEGIN}\nkept\n{readme.END}\n{rope_readme.BEGIN}\nrope\n{rope_readme.END}\n"
        f"{efflen_readme.BEGIN}\nold\n{efflen_readme.END}\n"
    )
    assert readme.main([str(smoke / "results.json"), str(md)]) == 0
    text = md.read_text()
    assert "kept" in text and "rope" in text and "old" not in text
    assert "`extrap study --experiment effective-length --preset smoke`" in text
    assert "| PE | TRF (ε = 0.001) | niah_single: effective length |" in text
    assert "| rope | not-applicable |" in text
    assert readme.main(["--check", str(smoke / "results.json"), str(md)]) == 0


def test_the_readme_has_one_effective_length_block_after_the_rope_base_block():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert text.count(efflen_readme.BEGIN) == 1 and text.count(efflen_readme.END) == 1
    assert text.index(rope_readme.END) < text.index(efflen_readme.BEGIN) < text.index(efflen_readme.END)


# ---------------------------------------------------------------------------
# records and claims on constructed models
# ---------------------------------------------------------------------------
L_TR, LENGTHS = 100, (100, 200, 400)


def ruler(scores: dict[str, list[float]], n: int = 20) -> RulerReport:
    tasks = []
    for task, s in scores.items():
        rows = tuple(RulerLength(L, n, x) for L, x in zip(LENGTHS, s))
        tasks.append(RulerTaskReport(task, "all", rows, effective_length(LENGTHS, s, "rel:0.85", L_TR)))
    mean = [sum(v[i] for v in scores.values()) / len(scores) for i in range(len(LENGTHS))]
    eff = effective_length(LENGTHS, mean, "rel:0.85", L_TR)
    means = tuple(LengthMean(L, x) for L, x in zip(LENGTHS, mean))
    return RulerReport("ruler", "rank", n, 0, 5, "bytes", "stdlib", LENGTHS, "rel:0.85", tuple(tasks), means, eff)


def model(pe: str, trf: int | None, scores: dict[str, list[float]], n: int = 20) -> EffectiveLengthModel:
    status = "finite" if trf is not None else "not-applicable"
    gates = tuple(task_gate(t, 4, n, s[0]) for t, s in scores.items())
    lp = LongPPL(2.0, -2.0, L_TR, 25, 0.25, "self", (LongPPLResult(100, 1.5, 7, 400, 1.2, 0.1),))
    return EffectiveLengthModel(pe, TrfValue(status, trf, 1e-3, "max", "initial"), ruler(scores, n), gates, lp)


def results_of(*models: EffectiveLengthModel, tasks=("niah_single",)) -> StudyResults:
    b = EffectiveLengthBlock(L_TR, LENGTHS, tasks, "rel:0.85", "rank", 20, 5, 800, "nonoverlapping")
    b = EffectiveLengthBlock(**{**b.__dict__, "models": {m.pe: m for m in models}})
    return StudyResults(experiment="effective-length", pes=[m.pe for m in models], extra=RESULTS.entry(b))


def test_task_gate_by_hand():
    """Chance 1/4, n = 20: the bar is 0.25 + 2 sqrt(0.25 · 0.75 / 20) = 0.4436..."""
    g = task_gate("vt", 4, 20, 0.45)
    assert g.chance == 0.25 and g.bar == pytest.approx(0.443649, abs=1e-6) and g.learned is True
    assert task_gate("vt", 4, 20, 0.44).learned is False and task_gate("vt", 4, 20, None).learned is None


def test_records_round_trip():
    m = model("alibi", 1769, {"niah_single": [0.9, 0.8, 0.5], "vt": [0.3, 0.2, 0.1]})
    assert EffectiveLengthModel.from_json(json.loads(json.dumps(m.to_json()))) == m
    res = results_of(m, tasks=("niah_single", "vt"))
    b = RESULTS.of(res)
    assert EffectiveLengthBlock.from_json(json.loads(json.dumps(b.to_json()))) == b
    assert RESULTS.of(StudyResults.from_json(json.loads(json.dumps(res.to_json())))) == b
    assert "effective_length" not in StudyResults(experiment="extrapolation").to_json()  # others unchanged
    assert m.effective("niah_single").to_json()["form"] == "relative"  # the JSON records the form
    job = ModelJob("alibi", "/x", PRESETS["smoke"], 0.02, 1)
    assert job.lengths == (136, 272)
    rep = EvalReport(pe="alibi", protocol="nonoverlapping", results=(LengthResult(100, 2.0, 32, 0.1),))
    out = ModelOutput("alibi", "/x", None, rep, m)
    assert ModelOutput.from_json(json.loads(json.dumps(out.to_json())), EffectiveLengthModel) == out


def test_the_page_says_which_models_are_missing():
    from extrap.experiments.effective_length.page import missing

    assert missing(StudyResults(experiment="effective-length", pes=["alibi"])) == ["no effective-length results"]
    res = results_of(model("alibi", 1769, {"niah_single": [0.9, 0.8, 0.5]}))
    assert missing(res) == []
    res.pes = ["alibi", "rope", "nope"]
    assert missing(res) == ["no effective-length result for rope, nope"]


def test_claims_reproduced():
    alibi = model("alibi", 1769, {"niah_single": [0.9, 0.85, 0.6]})  # holds 0.85 × 0.9 = 0.765 up to 200
    rope = model("rope", None, {"niah_single": [0.9, 0.5, 0.3]})  # effective length 100 = L_tr
    keep, outlast = el.claims(results_of(alibi, rope))
    assert keep.ok is True and "alibi/niah_single (TRF 1769): 200" in keep.evidence
    assert outlast.ok is True and "shortest finite-TRF alibi 200, longest other rope 100" in outlast.evidence
    headers, rows = ranking_rows(results_of(rope, alibi))
    assert [r[0] for r in rows] == ["alibi", "rope"] and rows[0][2].text == "200 (2×) #1"
    assert rows[1][1].text == "not-applicable" and rows[1][2].text == "100 (1×) #2"


def test_claims_refuted():
    alibi = model("alibi", 1769, {"niah_single": [0.9, 0.7, 0.6]})  # 0.7 < 0.765: stops at L_tr
    rope = model("rope", None, {"niah_single": [0.9, 0.9, 0.9]})  # holds to 400
    keep, outlast = el.claims(results_of(alibi, rope))
    assert keep.ok is False and "alibi/niah_single (TRF 1769): 100 ✘" in keep.evidence
    assert outlast.ok is False and "longest other rope 400 ✘" in outlast.evidence
    _, rows = ranking_rows(results_of(alibi, rope))
    assert rows[0][0] == "rope" and rows[0][2].text == "≥ 400 (4×) #1"  # held at every length: a lower bound


def test_claims_not_tested_when_no_model_learned():
    alibi = model("alibi", 1769, {"niah_single": [0.4, 0.4, 0.4]})  # 0.4 < 0.4436: not above chance
    rope = model("rope", None, {"niah_single": [0.9, 0.9, 0.9]})
    keep, outlast = el.claims(results_of(alibi, rope))
    assert keep.ok is None and keep.untested and "alibi/niah_single" in keep.evidence
    assert outlast.ok is None and outlast.untested
    _, rows = ranking_rows(results_of(alibi, rope))
    assert [r[0] for r in rows] == ["rope", "alibi"]  # not learned: listed last, not ranked
    assert rows[1][2].text == "not learned" and "#" not in rows[1][2].text


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--tasks", "nia_single"], "unknown task 'nia_single'"),
        (["--tasks", "niah_single,cwe"], "task cwe needs L_tr >= 1059 tokens"),
        (["--tasks", "passkey"], "unknown task 'passkey'"),
        (["--tasks", ""], "task"),
        (["--pe", "alibi,bogus"], "bogus"),
        (["--preset", "giant"], "unknown preset"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, extra, said):
    out = tmp_path / "s"
    argv = ["study", "--experiment", "effective-length", "--preset", "smoke", "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and said in err
    assert not out.exists()


@pytest.mark.parametrize("experiment", ["rope-base", "extrapolation"])
def test_tasks_with_another_experiment_exit_2(tmp_path, capsys, experiment):
    out = tmp_path / "s"
    argv = ["study", "--experiment", experiment, "--preset", "smoke", "--tasks", "niah_single", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--tasks is only for" in err and not out.exists()


# ---------------------------------------------------------------------------
# the task mix it trains on
# ---------------------------------------------------------------------------
def test_task_sampler_mixes_tasks_example_by_example():
    from extrap.data.tokenizers import ByteTokenizer
    from extrap.tasks import TaskSampler

    tok = ByteTokenizer()
    mixed = TaskSampler("niah_single,vt", tok, 4, 256, seed=1)
    assert mixed.tasks == ("niah_single", "vt") and mixed.state_dict()["task"] == "niah_single,vt"
    assert [mixed.example(i).task for i in range(4)] == ["niah_single", "vt", "niah_single", "vt"]
    one = TaskSampler("niah_single", tok, 4, 256, seed=1)
    assert one.example(1).prompt == TaskSampler("niah_single", tok, 4, 256, seed=1).example(1).prompt
    assert [one.example(i).task for i in range(3)] == ["niah_single"] * 3  # one task: as before
    x, y = mixed.batch(0)
    assert x.shape == (4, 256) and (y != -100).sum(1).gt(0).all()  # every row scores its answer
    from extrap.errors import ExtrapError

    with pytest.raises(ExtrapError, match="task vt needs a training length of at least 200"):
        TaskSampler("niah_single,vt", tok, 4, 150)


def test_train_config_checks_every_task_of_a_mix():
    from extrap.config import TrainConfig
    from extrap.errors import ExtrapError

    assert TrainConfig(task="niah_single,vt").task == "niah_single,vt"
    with pytest.raises(ExtrapError, match="unknown task 'bogus'"):
        TrainConfig(task="niah_single,bogus")


@pytest.mark.parametrize("preset", ["smoke", "cpu", "paper"])
def test_every_preset_builds_with_tasks_that_fit_its_training_length(tmp_path, preset):
    """build() checks every task against L_tr before anything is trained; the presets' own tasks all fit."""
    from extrap.experiments.effective_length.plan import build
    from extrap.study import StudyRequest

    exp = build(StudyRequest(tmp_path / "s", preset=preset, experiment="effective-length"))
    s = PRESETS[preset]
    assert [j.name for j in exp.jobs] == list(DEFAULT_PES)
    assert all(j.args.settings.tasks == s.tasks and j.args.lengths[0] == s.train_length for j in exp.jobs)
    assert exp.record.tasks == s.tasks and not (tmp_path / "s").exists()


def test_the_python_api_refuses_tasks_for_other_experiments(tmp_path):
    from extrap.errors import ExtrapError
    from extrap.study import run_study

    with pytest.raises(ExtrapError, match="only for the alignment and effective-length experiments"):
        run_study(tmp_path / "s", preset="smoke", experiment="rope-base", tasks=["niah_single"])
    with pytest.raises(ExtrapError, match="task qa1 needs L_tr >= 282"):
        run_study(tmp_path / "s", preset="smoke", experiment="effective-length", tasks=["qa1"])
    assert not (tmp_path / "s").exists()
