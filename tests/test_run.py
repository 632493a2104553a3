"""The run contract: config.json's format version, RunDir's files, and the Run protocol."""

import json
import math
import shutil

import pytest

import extrap
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.run import RUN_FORMAT, Run, RunConfig, RunDir, RunFormatError, read_bias_parameters
from extrap.run.records import MetricsRecord, TrainingSummary


@pytest.fixture
def run_copy(tiny_runs, tmp_path):
    """A private copy of a trained tiny run, free to be altered."""
    dst = tmp_path / "run"
    shutil.copytree(tiny_runs["alibi"], dst)
    return dst


def test_config_round_trips_through_json(run_copy):
    cfg = RunDir(run_copy).read_config()
    assert cfg.format == RUN_FORMAT and cfg.pe == "alibi" and cfg.train_length == 32
    again = RunConfig.from_json(json.loads(json.dumps(cfg.to_json())))
    assert again == cfg


def test_a_run_without_format_key_loads_as_format_1(run_copy):
    path = run_copy / "config.json"
    d = json.loads(path.read_text())
    del d["format"]
    path.write_text(json.dumps(d))
    run = extrap.load(run_copy)
    assert run.config.format == 1 and run.pe == "alibi"


def test_an_unknown_format_is_one_line_naming_it(run_copy, capsys):
    path = run_copy / "config.json"
    d = json.loads(path.read_text())
    d["format"] = 99
    path.write_text(json.dumps(d))
    with pytest.raises(RunFormatError, match="run format 99"):
        extrap.load(run_copy)
    assert main(["eval", str(run_copy), "--lengths", "32"]) == 2
    err = capsys.readouterr().err
    assert "run format 99" in err and err.count("\n") == 1


def test_trained_run_follows_the_protocol(run_copy):
    run = extrap.load(run_copy)
    assert isinstance(run, Run)
    assert run.step == 30 and run.train_length == 32 and run.task is None and run.seed == 0
    prov = run.provenance()
    assert prov.corpus_hash == run.corpus_hash and prov.seed == 0 and prov.extrap_version
    run.use_corpus(run.corpus)  # its own corpus is fine
    with pytest.raises(ExtrapError, match="only for hf: models"):
        run.use_corpus("stdlib")
    with pytest.raises(ExtrapError, match="only for hf: models"):
        extrap.load(run_copy, train_length=64)
    with pytest.raises(ExtrapError, match="dtype must be one of bfloat16, float16, float32"):
        extrap.load(run_copy, dtype="float64")


def test_results_are_recorded_and_read_back(run_copy):
    d = RunDir(run_copy)
    assert not d.has_result("eval-last-token")
    summary = TrainingSummary(3, 1.5, 0.25, 96, 10, "0.1.0")
    d.write_result("eval-last-token", summary)  # any typed record with to_json / from_json
    assert d.read_result("eval-last-token", TrainingSummary) == summary and d.has_result("eval-last-token")
    for bad in ("config", "final", "../x", "a/b"):
        with pytest.raises(ExtrapError):
            d.result_path(bad)


def test_bias_parameters_of_a_run_and_of_a_foreign_export(run_copy, tmp_path):
    spec, heads, stored = read_bias_parameters(run_copy)
    import torch

    assert spec == "alibi" and heads == 2 and list(stored) == ["blocks.0.attn", "blocks.1.attn"]
    assert torch.allclose(stored["blocks.0.attn"]["slope"], torch.tensor([2.0**-4, 2.0**-8]))  # Press et al.
    from safetensors.torch import save_file

    foreign = tmp_path / "export"
    foreign.mkdir()
    (foreign / "config.json").write_text(json.dumps({"positional": "kerple-log", "num_heads": 2}))
    r1 = torch.tensor([1.0, 2.0])
    save_file({f"layers.{i}.{n}": r1.clone() for i in (0, 1) for n in ("r1", "r2")}, foreign / "weights.safetensors")
    spec, heads, stored = read_bias_parameters(foreign)
    assert spec == "kerple-log" and heads == 2 and list(stored) == ["layers.0", "layers.1"]
    assert torch.equal(stored["layers.1"]["r1"], r1)


def test_run_records_read_what_earlier_versions_wrote_and_round_trip(run_copy):
    d = RunDir(run_copy)
    final = json.loads((d.path / "final.json").read_text())  # as train wrote it
    assert d.read_final().to_json() == final
    lines = [json.loads(ln) for ln in d.metrics_path.read_text().splitlines()]
    assert [r.to_json() for r in d.read_metrics()] == lines
    old = {"step": 7, "loss": 2.5}  # an older line without lr or throughput
    rec = MetricsRecord.from_json(old)
    assert rec.step == 7 and rec.loss == 2.5 and math.isnan(rec.lr)
    with pytest.raises(ExtrapError, match="'step' must be a number"):
        TrainingSummary.from_json({"step": "x"})
    with pytest.raises(ExtrapError, match="no 'step'"):
        TrainingSummary.from_json({})
