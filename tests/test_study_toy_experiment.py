"""Adding an experiment is one new package and one registry entry: a toy experiment, declared through the
public protocol in a temporary package (no shared file edited), runs through the orchestrator two jobs at a
time, resumes, and renders its page section, its claims and its README block."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from extrap.experiments import registry
from extrap.results import load_results

TOY = Path(__file__).parent / "data" / "toy_experiment"


@pytest.fixture
def toy(tmp_path, monkeypatch):
    shutil.copytree(TOY, tmp_path / "pkgs" / "toy_experiment_tmp")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'pkgs'}:{':'.join(sys.path)}")  # spawned workers import it too
    spec = importlib.import_module("toy_experiment_tmp").SPEC
    registry.register(spec)
    yield spec
    registry.unregister(spec.name)
    sys.modules.pop("toy_experiment_tmp", None)


def test_a_toy_experiment_runs_through_the_orchestrator_and_renders(toy, tmp_path):
    from extrap.report import readme
    from extrap.study import run_study

    out = tmp_path / "study"
    results = run_study(out, preset="smoke", experiment="toy", jobs=2)
    assert results.settings["squares"] == {"2": 4, "3": 9}
    assert len(results.settings["pids"]) >= 1 and (out / "x2.txt").read_text() == "4"
    assert [(c.claim, c.ok) for c in results.claims] == [("Squares are squares", True)]
    saved = json.loads((out / "results.json").read_text())
    assert saved["experiment"] == "toy" and json.loads((out / "study.json").read_text())["pes"] == ["x2", "x3"]
    assert saved["toy_block"] == {"largest": 9} and "block" not in saved  # its own block, under its own key
    assert list(saved).index("failures") < list(saved).index("toy_block") < list(saved).index("claims")
    assert toy.results.of(load_results(out)) == toy.results.record(9)  # read back as the spec's record type
    html = (out / "report.html").read_text()
    assert '<section id="toy"><h2>Toy squares</h2>' in html and '<a href="#toy">Toy squares</a>' in html
    assert "<td>3</td><td>9</td>" in html and 'id="fig-toy_squares"' in html
    assert (out / "figures" / "toy_squares.png").is_file()
    text = "intro\n<!-- toy:begin -->\nold\n<!-- toy:end -->\nrest\n"
    block = readme.render(text, results)
    assert "`extrap study --experiment toy --preset smoke`" in block and "| 3 | 9 |" in block
    assert "| Squares are squares | toy Eq. 1 | ✔ 2 measured |" in block and "old" not in block
    assert block.startswith("intro\n<!-- toy:begin -->\n") and block.endswith("<!-- toy:end -->\nrest\n")

    (out / "x3.txt").unlink()  # resumed: the same settings pass the orchestrator's check, and the jobs run again
    again = run_study(out, preset="smoke", experiment="toy", jobs=1, resume=True)
    assert again.settings["squares"] == results.settings["squares"] and (out / "x3.txt").is_file()


def test_the_cli_offers_a_registered_experiment_and_refuses_its_missing_options(toy, tmp_path, capsys):
    import extrap.cli as cli

    argv = ["study", "--experiment", "toy", "--preset", "smoke", "--jobs", "1", "--out", str(tmp_path / "s")]
    assert cli.main(argv) == 0
    assert "✔ Squares are squares" in capsys.readouterr().out
    assert cli.main(["study", "--experiment", "toy", "--tasks", "passkey", "--out", str(tmp_path / "t")]) == 2
    assert "--tasks is only for --experiment" in capsys.readouterr().err
    registry.unregister("toy")
    assert cli.main(["study", "--experiment", "toy", "--out", str(tmp_path / "u")]) == 2  # argparse: not a choice


def test_the_study_help_names_a_registered_experiment_with_its_summary(toy, capsys):
    from extrap.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["study", "--help"])
    assert ["toy", toy.about.summary] in [line.split(None, 1) for line in capsys.readouterr().out.splitlines()]
