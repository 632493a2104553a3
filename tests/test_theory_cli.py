"""`extrap theory`: JSON schema, table, exit status 2 on bad input, speed of the built-ins."""

from __future__ import annotations

import json
import math
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


# ---------------------------------------------------------------------------
# formulas that once hung, crashed or gave a verdict they should not have
# ---------------------------------------------------------------------------
def _strict_json(text: str) -> dict:
    def refuse(constant):
        raise AssertionError(f"non-strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _one_error_line(capsys, *argv) -> str:
    start = time.perf_counter()
    assert main(list(argv)) == 2
    assert time.perf_counter() - start < 10  # refused at once, never folded or evaluated for minutes
    err = capsys.readouterr().err
    assert err.startswith("extrap: error:") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "formula, why",
    [
        ("2**10**10", "needs more than 2000 digits"),
        ("9**9**9", "needs more than 2000 digits"),
        ("(1/2)**10**10", "needs more than 2000 digits"),  # tiny, but exact only with 3e9 digits
        ("-10**400*t", "10**400 is out of range"),
        ("exp(1000)*t", "exp(1000) is out of range"),
        ("1/0", "1/0 divides by zero"),
        ("0/0", "0/0 divides by zero"),
        ("t/(2-2)", "divides by zero"),
        ("1/(log(8)-3*log(2))", "divides by zero"),  # zero, though sympy cannot see it without simplifying
        ("sqrt(-1)*t", "sqrt(-1) is not a real number"),
        ("sqrt(-n)", "not a real number at t = 0"),
        ("log(-n)", "not a real number at t = 0"),
        ("sqrt(10**7-t)", "not a real number at t = 100000000"),  # complex only in the far tail
        ("1/t", "not finite at t = 0 (r = inf)"),
        ("-1/t", "formula -1/t is not finite at t = 0"),
        ("log(t)", "not finite at t = 0 (r = -inf)"),
        ("exp(exp(exp(t)))", "not finite at t = 2"),
        ("1e999*t", "not a finite number"),
    ],
)
def test_bad_formulas_are_refused_in_one_line(formula, why, capsys):
    assert why in _one_error_line(capsys, "theory", "formula:" + formula, "--json")


def test_huge_formula_is_refused_by_train_too(tmp_path, capsys):
    err = _one_error_line(capsys, "train", "--pe", "2**10**10", "--out", str(tmp_path / "run"), "--preset", "smoke")
    assert "2**10**10" in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("spec", ["0", "-1", "formula:-1", "formula:log(8)-3*log(2)"])
def test_constant_formulas_are_nope_shifted(spec, capsys):
    nope = run_json(capsys, "nope", "--heads", "1")["results"][0]
    row = run_json(capsys, spec, "--heads", "1")["results"][0]
    assert (row["verdict"], row["test"]) == ("diverges", "nth-term") and row["series_sum"] is None
    assert row["dilution"] == nope["dilution"] and row["tail_term"] == 1.0  # a constant shift cancels


def test_constant_sub_expressions_on_every_backend(capsys):
    row = run_json(capsys, "log(2)*n", "--heads", "1", "--lengths", "1024")["results"][0]
    assert row["verdict"] == "diverges" and row["dilution"]["1024"] == pytest.approx(2.0**512, rel=1e-9)
    row = run_json(capsys, "formula:-log(2)*n", "--heads", "1", "--eps", "1e-3")["results"][0]
    assert row["verdict"] == "converges" and row["series_sum"] == pytest.approx(1.0)  # sum 2^-n = 1
    assert row["trf"]["0.001"] == 10  # tail 2^-j < 1e-3 from j = 10


def test_every_json_is_strict(capsys):
    """Values beyond float64 are null with a note; B keeps its digits as a string."""
    assert main(["theory", "t", "--json"]) == 0
    row = _strict_json(capsys.readouterr().out)["results"][0]
    assert row["dilution"]["1024"] == pytest.approx(math.exp(512), rel=1e-9)  # (e^1024 - 1)/(e^512 - 1)
    assert row["dilution"]["2048"] is None and "L = 2048: 1.19213e+667" in row["dilution_note"]
    assert main(["theory", "formula:1000-2*log(n)", "--json", "--eps", "1e-3"]) == 0
    row = _strict_json(capsys.readouterr().out)["results"][0]
    assert row["verdict"] == "converges" and row["series_sum"] is None and row["trf"] == {"0.001": 608}
    assert row["series_sum_digits"].startswith("3.24063708956027") and "float64" in row["series_sum_note"]
    assert main(["theory", "formula:1000", "--json"]) == 0  # weight e^1000 at every distance
    row = _strict_json(capsys.readouterr().out)["results"][0]
    assert row["dilution"]["16384"] == 32.0 and "1.97e+434" in row["growth"]


def test_head_result_to_json_is_strict_at_the_source():
    import mpmath

    from extrap.theory import HeadResult

    r = HeadResult("x", 0, "converges", "t", "e", series_sum=mpmath.mpf("1e400"), tail_term=math.nan)
    r.dilution = {"1024": math.inf, "2048": 2.0}
    d = r.to_json()
    json.dumps(d, allow_nan=False)
    assert d["series_sum"] is None and mpmath.mpf(d["series_sum_digits"]) > mpmath.mpf("1e399") and d["series_sum_note"]
    assert d["tail_term"] is None and d["tail_term_note"]
    assert d["dilution"] == {"1024": None, "2048": 2.0} and "inf" in d["dilution_note"]


def test_plots_of_weights_beyond_float64(tmp_path, capsys):
    """r(t) = t overflows S(L) past L ~ 710, r = 1000 overflows every weight: the figures still come out."""
    argv = ["theory", "t", "formula:1000", "--plot", str(tmp_path), "--json", "--heads", "1", "--lengths", "1024"]
    assert main(argv) == 0
    data = _strict_json(capsys.readouterr().out)
    assert {"partial_sums.png", "heatmap_t_h0.png", "heatmap_1000_h0.png"} <= {p.split("/")[-1] for p in data["plots"]}
