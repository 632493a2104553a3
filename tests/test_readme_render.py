"""The README's study section is rendered from results.json (extrap.report.readme), never copied by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from extrap.report import readme
from extrap.results import StudyHost, StudyResults, StudyTraining

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "docs" / "study_cpu" / "results.json"  # the cpu study the README shows
LENGTHS = [128, 256, 512]


def last_token(ppls: list[float], targets: int = 64) -> dict:
    rows = [
        {"length": L, "loss": math.log(p), "loss_stderr": 0.01, "ppl": p, "tokens": targets, "seconds": 0.1}
        for L, p in zip(LENGTHS, ppls)
    ]
    worst = max(abs(p - ppls[0]) / ppls[0] for p in ppls)
    return {
        "protocol": "last-token",
        "train_length": 128,
        "extrapolates": worst < 0.02,
        "worst_ratio": worst,
        "results": rows,
    }


def results_dict(**extra) -> dict:
    return {
        "preset": "cpu",
        "experiment": "extrapolation",
        "pes": ["type2", "sinusoidal"],
        "train_length": 128,
        "lengths": LENGTHS,
        "settings": {"targets": 64, "eval_tokens": 16384},
        "eval": {
            "type2": {"last-token": last_token([4.0, 4.01, 4.0])},
            "sinusoidal": {"last-token": last_token([5.0, 9.0, 20.0])},
        },
        "learning": {"unigram_entropy": 3.2, "max_fraction": 0.8, "protocol": "last-token", "loss": LOSS},
        "theory": [
            {"pe": "type1", "head": 0, "verdict": "converges", "trf": {"0.001": 608}},
            {"pe": "type2", "head": 0, "verdict": "converges", "trf": {"0.001": 15}},
        ],
        **extra,
    }


LOSS = {"type2": math.log(4.0), "sinusoidal": math.log(5.0)}  # both below 0.8 x 3.2: they learned
HOST = {"cpu_count": 2, "torch_threads": 1, "jobs": 2, "device": None, "resumed": False}
TRAINING = {
    "n_layer": 4,
    "d_model": 128,
    "n_head": 4,
    "steps": 600,
    "batch_size": 16,
    "train_length": 128,
    "tokenizer": "bytes",
    "corpus": "stdlib",
}


def test_the_section_says_what_the_results_recorded():
    r = StudyResults.from_json(results_dict(seconds=544.2, host=HOST, training=TRAINING))
    text = readme.study_markdown(r)
    assert "4-layer, d=128, 4-head byte-level models, 600 steps × 16 × 128 tokens of stdlib source" in text
    assert "L_tr = 128, evaluated up to 4× = 512" in text
    assert "Wall time: 9 min 4 s on a machine with 2 CPUs (2 jobs at a time, 1 torch thread each)." in text
    assert "Bits per byte under the last-token protocol (64 fixed targets" in text
    assert f"| type2 | {math.log2(4.0):.3f} | {math.log2(4.01):.3f} | {math.log2(4.0):.3f} |" in text
    assert "| TRF(Type2) < TRF(Type1) | 000 Theorem 0.5, Fig. 6 | ✔ ε=0.001: Type1 608, Type2 15" in text
    assert "| ✔ type2: extrapolates (worst \\|Δppl\\|/ppl 0.0025, last-token)" in text  # pipes escaped
    assert "reproduces 3 of the 6 claims it checks" in text


def test_results_written_before_the_wall_time_say_not_recorded():
    text = readme.study_markdown(StudyResults.from_json(results_dict()))
    assert "Wall time: not recorded" in text and "models and training not recorded" in text
    assert "Bits per token" in text  # the tokenizer is not known either
    resumed = StudyResults.from_json(results_dict(seconds=30, host={**HOST, "resumed": True}))
    assert "Wall time: 30 s on a machine with 2 CPUs" in readme.study_markdown(resumed)
    assert "resumed" in readme.study_markdown(resumed)


def test_host_and_training_round_trip_and_old_files_load():
    r = StudyResults.from_json(results_dict(seconds=1.5, host=HOST, training=TRAINING))
    assert r.host == StudyHost(2, 1, 2, None, False) and r.training == StudyTraining(
        4, 128, 4, 600, 16, 128, "bytes", "stdlib"
    )
    d = r.to_json()
    assert d["host"] == HOST and d["training"] == TRAINING and StudyResults.from_json(json.loads(json.dumps(d))) == r
    old = StudyResults.from_json(results_dict(host={"cpu_count": "two"}))
    assert old.host.cpu_count is None and "training" not in old.to_json()


def test_the_script_rewrites_only_the_marked_region(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results_dict(seconds=3725, host=HOST, training=TRAINING)))
    md = tmp_path / "README.md"
    md.write_text(f"# x\n\nbefore\n{readme.BEGIN}\nstale 25 minutes\n{readme.END}\nafter\n")
    assert readme.main(["--check", str(path), str(md)]) == 1
    assert "stale 25 minutes" in capsys.readouterr().err
    assert readme.main([str(path), str(md)]) == 0
    text = md.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith(f"{readme.END}\nafter\n")
    assert "stale" not in text and "Wall time: 1 h 2 min" in text
    assert readme.main(["--check", str(path), str(md)]) == 0
    md.write_text("no markers\n")
    assert readme.main([str(path), str(md)]) == 2 and "study:begin" in capsys.readouterr().err


def test_a_study_records_its_wall_time_machine_and_models(tmp_path):
    from extrap.study import run_study

    res = run_study(tmp_path / "s", preset="smoke", pes=["type2"], steps=3, jobs=1, device="cpu")
    saved = json.loads((tmp_path / "s" / "results.json").read_text())
    assert saved["seconds"] > 0 and saved["host"]["cpu_count"] >= 1 and saved["host"]["jobs"] == 1
    assert saved["host"]["resumed"] is False and saved["training"]["steps"] == 3
    assert saved["settings"]["targets"] == 16 and saved["training"]["tokenizer"] == "bytes"
    text = readme.study_markdown(res)
    assert "3 steps ×" in text and "Wall time: " in text and "not recorded" not in text


def test_the_readme_is_the_rendering_of_the_committed_results():
    if not COMMITTED.is_file():
        pytest.skip(f"no committed study results at {COMMITTED.relative_to(ROOT)}")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rendered = readme.replace_region(text, readme.study_markdown(readme.load_results(COMMITTED)))
    assert text == rendered, "README.md differs from its rendering: python -m extrap.report.readme " + str(
        COMMITTED.relative_to(ROOT)
    )


def test_the_readme_marks_its_rendered_section_and_copies_no_time_by_hand():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(readme.BEGIN) == 1 and text.count(readme.END) == 1
    assert text.index(readme.BEGIN) < text.index(readme.END)
    assert readme.replace_region(text, "x\n").count("x\n") >= 1  # the markers are found
    for claim in ("25 minutes", "half an hour"):
        assert claim not in text, claim


SURVEY = ROOT / "docs" / "study_survey" / "results.json"  # the survey encodings' cpu study the README shows


def test_the_survey_section_gives_ppl_with_its_error_and_refuses_other_experiments(tmp_path, capsys):
    r = StudyResults.from_json(results_dict(seconds=61, host=HOST, training=TRAINING))
    text = readme.survey_markdown(r)
    assert "`extrap study --preset cpu --pe type2,sinusoidal`" in text
    assert "| type2 | 4.00 ± 0.04 | 4.01 ± 0.04 | 4.00 ± 0.04 |" in text  # ppl · se(loss) = 4.0 · 0.01
    assert "| sinusoidal | 5.00 ± 0.05 | 9.00 ± 0.09 | 20.00 ± 0.20 |" in text
    path, md = tmp_path / "results.json", tmp_path / "README.md"
    path.write_text(json.dumps(results_dict(seconds=61, host=HOST, training=TRAINING)))
    md.write_text(f"{readme.BEGIN}\nmain\n{readme.END}\n{readme.SURVEY_BEGIN}\nold\n{readme.SURVEY_END}\n")
    assert readme.main([str(path), str(md), "--section", "survey"]) == 0
    out = md.read_text()
    assert "main" in out and "old" not in out and "| type2 | 4.00 ± 0.04" in out
    path.write_text(json.dumps(results_dict(experiment="rope-base")))
    assert readme.main([str(path), str(md), "--section", "survey"]) == 2
    assert "extrapolation study" in capsys.readouterr().err


def test_the_readme_survey_table_is_the_rendering_of_the_committed_results():
    if not SURVEY.is_file():
        pytest.skip(f"no committed survey results at {SURVEY.relative_to(ROOT)}")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text == readme.render(text, readme.load_results(SURVEY), "survey"), (
        "README.md differs from its rendering: python -m extrap.report.readme docs/study_survey/results.json "
        "README.md --section survey"
    )


# each experiment's committed cpu study, rendered into its README block
BLOCKS = ["study_rope_base", "study_effective_length", "study_extension", "study_finetune_extension"]


@pytest.mark.parametrize("folder", BLOCKS)
def test_the_readme_block_is_the_rendering_of_the_committed_results(folder):
    path = ROOT / "docs" / folder / "results.json"
    if not path.is_file():
        pytest.skip(f"no committed results at {path.relative_to(ROOT)}")
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text == readme.render(text, readme.load_results(path)), (
        f"README.md differs from its rendering: python -m extrap.report.readme {path.relative_to(ROOT)}"
    )
