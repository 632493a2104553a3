"""--csv: every JSON report as a flat table whose cells read back as the JSON's own numbers."""

import argparse
import csv
import json

import pytest

from extrap.cli import build_parser, main
from extrap.results.tables import Table, cell, flat
from extrap.run import RunDir
from extrap.train import build_configs, train
from extrap.version import __version__


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


def test_position_frequency_csv_has_one_row_per_distance(tmp_path, capsys, tiny_text):
    report, rows = _run(
        capsys,
        ["corpus", "position-frequency", tiny_text, "--train-length", "64", "--cache", str(tmp_path / "c")],
        tmp_path,
    )
    assert [(int(r["i"]), int(r["f"]), float(r["relative"])) for r in rows] == list(
        zip(report["distances"], report["frequency"], report["relative"])
    )
    assert {int(r["f"]) for r in rows if int(r["i"]) == 0} == {64}  # packed windows: f(i) = L_tr - i
    assert {r["sequences"] for r in rows} == {"packed-windows"} and {r["train_length"] for r in rows} == {"64"}


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


def test_eval_file_csv_is_one_row_with_the_window_error(tiny_run, tmp_path, capsys):
    text = tmp_path / "book.txt"
    text.write_text("def add(a, b):\n    return a + b\n" * 20, encoding="utf-8")
    report, rows = _run(capsys, ["eval", str(tiny_run), "--file", str(text), "--window", "8"], tmp_path)
    (row,) = rows
    assert "length" not in row and row["file"] == str(text) and row["file_sha256"] == report["file_sha256"]
    for key in ("loss", "loss_stderr", "ppl", "seconds"):
        assert float(row[key]) == report[key]
    assert int(row["tokens"]) == report["tokens"] == len(text.read_bytes()) - 1
    measured = report["window"]["error"]["measured"]
    assert float(row["window.error.measured.rel_diff"]) == measured["rel_diff"]
    assert json.loads(row["window.error.measured.dropped_mass"]) == measured["dropped_mass"]
    assert int(row["window.size"]) == 8 and row["window.error.measured.note"] == ""  # null: an empty cell


def test_generate_csv_keeps_the_text_whole(tiny_run, tmp_path, capsys):
    argv = ["generate", str(tiny_run), "--prompt", 'x = "a,b"\n', "--tokens", "12", "--sample", "--seed", "3"]
    report, rows = _run(capsys, argv, tmp_path)
    (row,) = rows
    assert row["text"] == report["text"] and report["text"].startswith('x = "a,b"\n')  # comma, quote, newline
    assert float(row["seconds"]) == report["seconds"] and int(row["seed"]) == 3 and int(row["tokens"]) == 12
    assert row["pe"] == report["pe"] == "alibi" and row["cache_window"] == ""
    assert list(row)[-1] == "text" and row["extrap_version"] == __version__


def test_train_csv_is_the_final_summary_with_its_run(tmp_path, tiny_text, capsys):
    argv = ["train", "--pe", "alibi", "--preset", "smoke", "--steps", "3", "--train-length", "32", "--threads", "1"]
    argv += ["--corpus", tiny_text, "--out", str(tmp_path / "run")]
    report, rows = _run(capsys, argv, tmp_path)
    (row,) = rows
    final = RunDir(tmp_path / "run").read_final()
    assert float(row["final_loss"]) == report["final_loss"] == final.final_loss
    assert int(row["step"]) == 3 and int(row["params"]) == final.params and float(row["seconds"]) == final.seconds
    config = RunDir(tmp_path / "run").read_config()
    assert row["corpus_hash"] == report["corpus_hash"] == config.corpus_hash and int(row["seed"]) == config.seed
    assert (row["run"], row["pe"], int(row["train_length"])) == (str(tmp_path / "run"), "alibi", 32)
    argv[argv.index("--out") + 1] = str(tmp_path / "other")
    assert main([*argv, "--csv", str(tmp_path)]) == 2  # a folder: refused before any training
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "other").exists()


# Every command with --json, and the test above that checks its --csv against that JSON.
CSV_TESTS = {
    "eval": "test_eval_csv_has_one_row_per_length_with_the_json_numbers",
    "theory": "test_theory_csv_has_one_row_per_scheme_head_and_eps",
    "align": "test_run_reports_csv_match_their_json",
    "erf": "test_run_reports_csv_match_their_json",
    "task score": "test_run_reports_csv_match_their_json",
    "corpus prepare": "test_corpus_and_pe_list_csv",
    "pe list": "test_corpus_and_pe_list_csv",
    "generate": "test_generate_csv_keeps_the_text_whole",
    "train": "test_train_csv_is_the_final_summary_with_its_run",
    "corpus list": "test_corpus_list_and_task_sample_csv_match_their_json",
    "task sample": "test_corpus_list_and_task_sample_csv_match_their_json",
    "corpus position-frequency": "test_position_frequency_csv_has_one_row_per_distance",
}


def _json_commands(parser=None, prefix=()) -> dict[str, set[str]]:
    """Every command of the CLI that has --json, with all its options."""
    parser = parser or build_parser()
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_json_commands(sub, (*prefix, name)))
    options = {o for a in parser._actions for o in a.option_strings}
    if "--json" in options:
        found[" ".join(prefix)] = options
    return found


def test_every_command_with_json_has_csv_and_a_test_of_it():
    commands = _json_commands()
    assert set(commands) == set(CSV_TESTS)
    assert all("--csv" in commands[c] for c in CSV_TESTS)
    assert all(callable(globals().get(test)) for test in CSV_TESTS.values())


def test_corpus_list_and_task_sample_csv_match_their_json(capsys, tmp_path):
    assert main(["corpus", "list", "--json", "--csv", str(tmp_path / "c.csv")]) == 0
    corpora = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader((tmp_path / "c.csv").open(encoding="utf-8", newline="")))
    assert [(r["name"], r["description"]) for r in rows] == [(c["name"], c["description"]) for c in corpora]
    argv = ["task", "sample", "--task", "passkey", "--length", "80", "--json", "--csv", str(tmp_path / "t.csv")]
    assert main(argv) == 0
    example = json.loads(capsys.readouterr().out)
    (row,) = csv.DictReader((tmp_path / "t.csv").open(encoding="utf-8", newline=""))
    assert row["prompt"] == example["prompt"] and list(row)[-1] == "prompt"
    assert int(row["prompt_tokens"]) == example["prompt_tokens"]
    assert json.loads(row["candidates"]) == example["candidates"]


def test_position_frequency_help_states_the_library_default():
    from extrap.data.position_frequency import DEFAULT_FRACTION

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["corpus"]
    pf = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices["position-frequency"]
    frac = next(a for a in pf._actions if "--fraction" in a.option_strings)
    assert f"default: {DEFAULT_FRACTION}" in frac.help  # the help is not imported from the library: torch-free startup
