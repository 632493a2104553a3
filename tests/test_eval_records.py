"""The typed side of ``extrap eval``: settings refused up front, reports that read back what they wrote."""

import json
import math

import pytest

import extrap
import golden
import structure
from extrap.errors import ExtrapError
from extrap.evaluate import EvalReport, EvalSettings, FileScore, LengthResult, evaluate_run, score_file_run
from extrap.results import StudyResults, WindowInfo


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(protocol="strided"), "unknown protocol 'strided'"),
        (dict(lengths=[]), "no lengths to evaluate"),
        (dict(lengths=[1, 32]), "lengths must be integers >= 2"),
        (dict(lengths=[32, 64], tokens=48), "at least 64 tokens are needed"),
        (dict(lengths=[32, 64], protocol="sliding", stride=40), "the stride must be in [1, 32]"),
        (dict(protocol="last-token", targets=0), "at least 1 target"),
        (dict(split="train"), "split must be validation or test or heldout"),
        (dict(window="wide"), "window must be auto, none or an integer, got 'wide'"),
        (dict(window=0), "window must be >= 1"),
        (dict(window="auto", eps=1.5), "eps must be in (0, 1)"),
        (dict(delta=0.0), "delta must be > 0"),
        (dict(batch=0), "batch must be >= 1"),
        (dict(exact_check_max=-1), "exact-check length must be >= 0"),
        (dict(backend="cuda"), "attention backend must be one of"),
        (dict(temperature="hot"), "temperature must be"),
        (dict(temperature=[1.0, -1.0]), "positive finite number"),
        (dict(temperature="auto", align_mode="median"), "unknown alignment mode 'median'"),
        (dict(temperature="auto:per-layer", align_mode="log-length"), "need the pmax or entropy alignment mode"),
        (dict(temperature="auto", align_segments=0), "align segments must be >= 1"),
    ],
)
def test_settings_refuse_bad_values_in_one_line(bad, words):
    with pytest.raises(ExtrapError) as e:
        EvalSettings(**bad)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_settings_keep_what_is_only_checked_against_a_run():
    """Without lengths the checks against L_tr wait for the run; τ options apply only to auto."""
    s = EvalSettings(tokens=10, protocol="sliding", stride=1000, align_mode="median", window="64")
    assert s.lengths is None and s.window == "64"
    assert EvalSettings(lengths=[64, 32]).lengths == (64, 32)
    assert EvalSettings(temperature=[0.9, 0.8]).temperature == (0.9, 0.8)


@pytest.fixture(scope="module")
def report(tiny_runs):
    """A report with every part: a window (bound and measurement), aligned τ, standard errors."""
    settings = EvalSettings(lengths=[32, 48, 64], tokens=256, window="16", temperature="auto")
    return evaluate_run(extrap.load(tiny_runs["alibi"]), settings)


def test_a_report_reads_back_what_it_wrote(report):
    assert isinstance(report.window, WindowInfo) and report.window.error.measured.rows > 0
    assert report.temperature.mode == "auto" and set(report.temperature.tau) == {"32", "48", "64"}
    assert all(isinstance(r, LengthResult) and r.ok and r.exact_ppl is not None for r in report.results)
    assert EvalReport.from_json(report.to_json()) == report
    text = json.dumps(report.to_json(), allow_nan=False)
    assert EvalReport.from_json(json.loads(text)) == report
    assert EvalReport.from_json(json.loads(text)).to_json() == report.to_json()


def test_a_failed_length_reads_back_as_failed():
    failed = LengthResult(128, math.nan, 0, 0.5, 16, error="out of memory", temperature=(0.9, 0.8))
    assert failed.loss is None and failed.ppl is None and failed.temperature == [0.9, 0.8]
    d = failed.to_json()
    assert d["loss"] is d["ppl"] is d["bits_per_token"] is None and d["error"] == "out of memory"
    assert LengthResult.from_json(json.loads(json.dumps(d))) == failed
    no_exact = LengthResult(32, 4.0, 64, 0.1, 16, exact_error="exact attention failed: out of memory", stderr=0.1)
    assert no_exact.to_json()["exact_ppl"] is None and LengthResult.from_json(no_exact.to_json()) == no_exact


def test_a_file_score_reads_back_what_it_wrote(tiny_runs, tmp_path):
    text = tmp_path / "book.txt"
    text.write_text("def add(a, b):\n    return a + b\n" * 20, encoding="utf-8")
    score = score_file_run(extrap.load(tiny_runs["alibi"]), text, "8")
    assert score.window.size == 8 and score.tokens == len(text.read_bytes()) - 1
    assert FileScore.from_json(json.loads(json.dumps(score.to_json()))) == score


def _golden(name: str) -> dict:
    return json.loads(golden.GOLDEN.read_text())[name]


@pytest.mark.parametrize("name, cls", [("eval-last-token", EvalReport), ("eval-file", FileScore)])
def test_a_report_of_an_earlier_version_loads(name, cls):
    """The golden file's reports (written before the records existed, wall-clock keys dropped) read back whole."""
    old = _golden(name)
    rec = cls.from_json(old)
    assert golden.differences(old, golden.normalise(rec.to_json(), {})) == []
    assert rec.window.error.bound.where == "layer 0 head 1" and rec.provenance.seed == 0


def test_the_first_versions_reports_load():
    """The first eval JSON (window ``eps``, no standard errors) and a study's partial report (ppl only)."""
    first = {
        "run": "runs/alibi",
        "pe": "alibi",
        "protocol": "sliding",
        "window": {"mode": "auto", "size": 70, "eps": 1e-6, "reason": "TRF of the trained bias"},
        "results": [{"length": 64, "loss": 3.0, "ppl": math.exp(3.0), "bits_per_token": 3 / math.log(2)}],
        "extrapolates": None,
        "seed": 0,
    }
    rep = EvalReport.from_json(first)
    assert rep.window.trf_eps == 1e-6 and rep.results[0].ppl == math.exp(3.0) and rep.results[0].stderr is None
    assert rep.to_json()["window"]["trf_eps"] == 1e-6 and rep.provenance.seed == 0
    partial = EvalReport.from_json({"results": [{"length": 64, "ppl": 20.0}, {"length": 128, "loss": math.nan}]})
    assert partial.results[0].ppl == pytest.approx(20.0) and partial.results[1].ppl is None
    assert EvalReport.from_json("not a report") == EvalReport()


def test_a_study_holds_the_reports_themselves(report):
    study = StudyResults.from_json({"eval": {"alibi": {"nonoverlapping": report.to_json()}}})
    assert study.eval["alibi"]["nonoverlapping"] == report
    assert study.to_json()["eval"]["alibi"]["nonoverlapping"] == report.to_json()


def test_evaluate_speaks_in_records_not_dicts():
    assert structure.dict_signatures(("evaluate",)) == []
