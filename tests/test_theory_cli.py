"""`extrap theory`: JSON schema, table, exit status 2 on bad input, speed of the built-ins."""

from __future__ import annotations

import json
import time

import pytest

from extrap import positional as P
from extrap.cli import main
from extrap.positional.base import BiasRPE


def run_json(capsys, *argv):
    assert main(["theory", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object on one line
    return json.loads(out)


def test_json_schema(capsys):
    data = run_json(capsys, "alibi", "type1", "sandwich", "--heads", "2", "--eps", "1e-3,1e-6,1e-12")
    assert set(data) == {"results"}
    rows = data["results"]
    assert [(r["pe"], r["head"]) for r in rows] == [
        ("alibi", 0),
        ("alibi", 1),
        ("type1", "all"),
        ("sandwich", 0),
        ("sandwich", 1),
    ]
    for r in rows:
        assert {"pe", "head", "verdict", "test", "series_sum", "trf", "explanation"} <= set(r)
    t1 = rows[2]
    assert t1["verdict"] == "converges" and t1["trf"] == {"0.001": 608, "1e-06": 607927, "1e-12": 607927101854}
    assert abs(t1["series_sum"] - 1.6449340668482264) < 1e-15
    sw = rows[4]
    assert sw["verdict"] == "diverges" and sw["series_sum"] is None
    assert sw["trf"] == {"0.001": None, "1e-06": None, "1e-12": None}
    assert abs(sw["tail_term"] - 3.3546262790251185e-04) < 1e-12  # exp(-8): dbar = 128, h = 8
    assert set(sw["dilution"]) == {"1024", "2048", "4096", "8192", "16384"} and sw["train_length"] == 512


def test_json_all_includes_not_applicable_rows(capsys):
    data = run_json(capsys, "all", "--eps", "1e-3", "--lengths", "1024")
    kinds = {r["pe"]: r["verdict"] for r in data["results"]}
    assert set(P.REGISTRY) <= set(kinds)
    for name in ("sinusoidal", "rope", "fire"):
        if name in P.REGISTRY:
            assert kinds[name] == "not-applicable"
    assert kinds["window"] == "converges" and kinds["nope"] == "diverges"


def test_table_output(capsys):
    assert main(["theory", "type1", "window:64", "example1", "--eps", "1e-3", "--lengths", "2048"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["PE", "HEAD", "VERDICT", "TEST", "B"] and "TRF@0.001" in lines[0]
    assert set(lines[1]) <= {"-", " "}
    type1 = next(line for line in lines if line.startswith("type1"))
    assert type1.split()[1:3] == ["all", "converges"] and "608" in type1.split()
    assert "S(j) ~ ln j" in next(line for line in lines if line.startswith("example1"))


def test_formula_and_compare(capsys):
    assert main(["theory", "type2", "formula:-2*log(n)", "--compare", "--eps", "1e-6", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "Theorem 0.5" in out and "type2 has the smaller TRF" in out
    assert "p = 2 > 1" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["nonsense-pe"],
        ["__import__('os').system('ls')"],
        ["t.__class__"],
        ["formula:exec('1')"],
        ["alibi", "--eps", "0"],
        ["alibi", "--eps", "1"],
        ["alibi", "--eps=-1e-3"],
        ["alibi", "--eps", "abc"],
        ["alibi", "--eps", "nan"],
        ["alibi", "--heads", "0"],
        ["alibi", "--heads", "-3"],
        ["alibi", "--lengths", "0"],
        ["alibi", "--train-length", "0"],
        ["window:x"],
    ],
)
def test_bad_input_exits_2(argv, capsys):
    assert main(["theory", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("extrap: error:") and err.count("\n") == 1


def test_argparse_errors_exit_2(capsys):
    assert main(["theory", "alibi", "--heads", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("extrap: error:") and err.count("\n") == 1


def test_plot_option(tmp_path, capsys):
    assert (
        main(["theory", "type1", "example1", "--heads", "1", "--plot", str(tmp_path), "--json", "--lengths", "1024"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    files = {p.split("/")[-1] for p in data["plots"]}
    assert {"heatmap_type1_h0.png", "heatmap_type1_h0.svg", "trf_curves.png", "partial_sums.svg"} <= files
    assert all((tmp_path / f).is_file() for f in files)


def test_all_builtins_fast_at_1e12():
    """Every built-in bias RPE, 8 heads, eps = 1e-12: well under a second of CPU time (bench/theory_speed.py).

    CPU time, not wall time, so a busy machine cannot fail it."""
    from extrap.theory import analyse, clear_cache

    clear_cache()
    start = time.process_time()
    for name, cls in P.REGISTRY.items():
        if issubclass(cls, BiasRPE):
            analyse(name, 8, eps=(1e-12,))
    assert time.process_time() - start < 3.0


def test_checkpoint_of_a_trained_run_gives_verdicts_per_layer_and_head(tmp_path, tiny_text, capsys):
    """`extrap theory --checkpoint RUN_DIR` reads the learned KERPLE r1, r2 of every layer."""
    import json as _json

    import torch
    from safetensors.torch import load_file, save_file

    from extrap.cli import main as cli_main
    from extrap.positional.base import inverse_softplus
    from extrap.train import build_configs, train

    m, t = build_configs("kerple-log", "smoke", overrides=dict(steps=2, corpus=tiny_text, train_length=32))
    run = tmp_path / "run"
    train(run, m, t, progress=False)
    ckpt = next((run / "checkpoints").iterdir()) / "model.safetensors"
    state = load_file(str(ckpt))
    state["blocks.1.attn.bias_params.r1"][0] = inverse_softplus(torch.tensor(0.9))  # r1 <= 1: this head diverges
    save_file(state, str(ckpt))
    assert cli_main(["theory", "--checkpoint", str(run), "--json"]) == 0
    rows = _json.loads(capsys.readouterr().out)["results"]
    assert sorted({r["layer"] for r in rows}) == list(range(m.n_layer))
    verdicts = {(r["layer"], r["head"]): r["verdict"] for r in rows}
    assert verdicts[(1, 0)] == "diverges" and verdicts[(0, 0)] == "converges"
