"""--csv: every JSON report as a flat table whose cells read back as the JSON's own numbers."""

import csv
import json

import pytest

from extrap.cli import main
from extrap.tabular import Table, cell, flat
from extrap.train import build_configs, train


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from conftest import _tiny_corpus_dir

    root = tmp_path_factory.mktemp("csv")
    m, t = build_configs(
        "alibi", "smoke", overrides=dict(steps=8, train_length=32, corpus=f"text:{_tiny_corpus_dir(root)}")
    )
    train(root / "run", m, t, progress=False)
    return root / "run"


def _read(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _run(capsys, argv, tmp_path) -> tuple[dict, list[dict]]:
    """The command's --json report and its --csv rows, from one invocation."""
    assert main([*argv, "--json", "--csv", str(tmp_path / "out.csv")]) == 0
    return json.loads(capsys.readouterr().out), _read(tmp_path / "out.csv")


def test_eval_csv_has_one_row_per_length_with_the_json_numbers(tiny_run, tmp_path, capsys):
    report, rows = _run(capsys, ["eval", str(tiny_run), "--lengths", "16,32,64", "--tokens", "128"], tmp_path)
    assert [int(r["length"]) for r in rows] == [16, 32, 64]
    for row, res in zip(rows, report["results"]):
        for key in ("loss", "loss_stderr", "ppl", "bits_per_token"):
            assert float(row[key]) == res[key]  # exactly: the shortest round-trip form
        assert [float(row["ppl_ci95_low"]), float(row["ppl_ci95_high"])] == res["ppl_ci95"]
        assert int(row["seed"]) == report["seed"] and row["corpus_hash"] == report["corpus_hash"]
        assert row["extrap_version"] == report["extrap_version"] and row["protocol"] == "nonoverlapping"
        assert row["extrapolates"] == {True: "true", False: "false", None: ""}[report["extrapolates"]]
    assert list(rows[0])[:3] == ["extrap_version", "seed", "corpus_hash"]  # provenance leads


def test_theory_csv_has_one_row_per_scheme_head_and_eps(tmp_path, capsys):
    argv = ["theory", "alibi", "example1", "--heads", "2", "--eps", "1e-3,1e-6", "--lengths", "1024,2048"]
    report, rows = _run(capsys, argv, tmp_path)
    expected = [(r["pe"], str(r["head"]), eps, n) for r in report["results"] for eps, n in r["trf"].items()]
    assert [(r["pe"], r["head"], r["eps"], int(r["trf"]) if r["trf"] else None) for r in rows] == expected
    alibi = next(r for r in report["results"] if r["pe"] == "alibi" and r["head"] == 1)
    row = next(r for r in rows if r["pe"] == "alibi" and r["head"] == "1")
    assert float(row["series_sum"]) == alibi["series_sum"]
    assert float(row["dilution.2048"]) == alibi["dilution"]["2048"]
    assert list(rows[0])[-1] == "command" and list(rows[0])[-2] == "explanation"


def test_checkpoint_theory_csv_flattens_the_learned_parameters(tiny_run, tmp_path, capsys):
    report, rows = _run(capsys, ["theory", "--checkpoint", str(tiny_run), "--eps", "1e-3"], tmp_path)
    assert len(rows) == len(report["results"])
    for row, res in zip(rows, report["results"]):
        assert int(row["layer"]) == res["layer"] and float(row["params.slope"]) == res["params"]["slope"]


@pytest.mark.parametrize(
    "argv, records, key",
    [
        (["align", "{run}", "--lengths", "48,64", "--segments", "2"], "lengths", "tau"),
        (["erf", "{run}", "--length", "48", "--segments", "2"], "runs", "grad_erf"),
        (["task", "score", "{run}", "--task", "passkey", "--lengths", "80,96", "--n", "2"], "results", "accuracy"),
    ],
)
def test_run_reports_csv_match_their_json(tiny_run, tmp_path, capsys, argv, records, key):
    report, rows = _run(capsys, [a.format(run=tiny_run) for a in argv], tmp_path)
    assert len(rows) == len(report[records]) > 0
    for row, rec in zip(rows, report[records]):
        assert float(row[key]) == rec[key]
        assert all("\n" not in name for name in row)


def test_corpus_and_pe_list_csv(tmp_path, capsys, tiny_text):
    summary, rows = _run(capsys, ["corpus", "prepare", tiny_text, "--cache", str(tmp_path / "c")], tmp_path)
    assert [(r["split"], int(r["tokens"])) for r in rows] == list(summary["tokens"].items())
    assert {r["corpus_hash"] for r in rows} == {summary["hash"]}
    listed, rows = _run(capsys, ["pe", "list"], tmp_path)
    assert [r["name"] for r in rows] == [s["name"] for s in listed["schemes"]]
    alibi = next(r for r in rows if r["name"] == "alibi")
    assert alibi["options"] == "; ".join(f"{k}={o['default']}" for k, o in listed["schemes"][0]["options"].items())


def test_cells_and_columns():
    assert [cell(v) for v in (None, True, 0.1, 3, [1.5, None], "a,b")] == ["", "true", "0.1", "3", "[1.5,null]", "a,b"]
    assert flat({"a": {"b": 1, "c": {}}, "curve": [[1, 2]], "layers": [{"x": 1}], "tau": [0.5, 0.25]}) == {
        "a.b": 1,
        "a.c": None,
        "tau": [0.5, 0.25],
    }
    table = Table([{"command": "x", "a": 1}, {"b": 2, "explanation": "why"}])
    assert table.columns == ["a", "b", "explanation", "command"]
    assert list(csv.reader(table.to_csv().splitlines())) == [table.columns, ["1", "", "", "x"], ["", "2", "why", ""]]


def test_a_csv_path_that_is_a_folder_is_one_line_and_a_missing_folder_is_made(tmp_path, capsys):
    assert main(["pe", "list", "--csv", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["pe", "list", "--csv", str(tmp_path / "new" / "pe.csv")]) == 0
    assert len(_read(tmp_path / "new" / "pe.csv")) > 10
