"""--rope KIND --factor F on runs trained by extrap with a rotary PE: the registry's scaled scheme, recorded."""

import json
from dataclasses import replace

import pytest
import torch

import extrap
from extrap import positional as P
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.model import GPT
from extrap.run import RunDir, TrainedRun, load_model_weights

L_TR = 32
LINEAR2 = f"rope:scaling=linear,factor=2,original_max_position={L_TR}"


@pytest.fixture(scope="module")
def runs(tiny_runs, tmp_path_factory):
    """rope and xpos runs trained 30 steps on the corpus of the shared tiny runs, and their alibi run."""
    from extrap.train import build_configs, train

    corpus = RunDir(tiny_runs["alibi"]).read_config().train.corpus
    root = tmp_path_factory.mktemp("rope_runs")
    out = {"alibi": tiny_runs["alibi"]}
    for pe in ("rope", "xpos"):
        m, t = build_configs(pe, "smoke", overrides=dict(steps=30, corpus=corpus, train_length=L_TR))
        train(root / pe, m, t, progress=False)
        out[pe] = root / pe
    return out


def _direct(path, pe: str) -> TrainedRun:
    """The run's weights in a GPT built directly from the scheme spec ``pe``."""
    rd = RunDir(path)
    cfg, ckpt = rd.read_config(), rd.latest()
    model = GPT(replace(cfg.model, pe=pe))
    load_model_weights(model, rd, ckpt)
    return TrainedRun(model=model.eval(), tokenizer=extrap.load(path).tokenizer, config=cfg, path=rd.path, step=1)


IDS = torch.randint(0, 256, (2, 80), generator=torch.Generator().manual_seed(0))


def _logits(model, **kw):
    with torch.no_grad():
        return model(IDS, **kw).logits


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("extrap: error:"), err
    return err


def test_linear_equals_the_model_built_with_the_scaled_scheme(runs):
    run = extrap.load(runs["rope"], rope="linear", factor=2)
    plain = extrap.load(runs["rope"])
    direct = _direct(runs["rope"], LINEAR2)
    scaled = _logits(run.model)
    assert torch.equal(scaled, _logits(direct.model))
    assert not torch.allclose(scaled, _logits(plain.model), atol=1e-4)
    # position interpolation (Chen et al. 2023, Eq. 4): the trained model at positions m / 2
    torch.testing.assert_close(scaled, _logits(plain.model, positions=torch.arange(80) / 2), rtol=1e-5, atol=1e-5)
    assert run.pe == LINEAR2 and run.config.pe == "rope" and run.model.shape.pe == LINEAR2
    rec = run.provenance().source["rope"]
    assert (rec["rope"], rec["factor"], rec["original_max_position"]) == ("linear", 2.0, L_TR)
    assert rec["trained_pe"] == "rope" and rec["pe"] == LINEAR2


def test_eval_cli_records_the_scaling_and_scores_the_scaled_model(runs, capsys):
    from extrap.evaluate import EvalSettings, evaluate_run

    args = ["eval", str(runs["rope"]), "--lengths", "32,64", "--json"]
    assert main([*args, "--rope", "linear", "--factor", "2"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"] == LINEAR2 and rep["rope"]["pe"] == LINEAR2 and rep["rope"]["factor"] == 2.0
    want = evaluate_run(_direct(runs["rope"], LINEAR2), EvalSettings(lengths=[32, 64])).to_json()
    assert [r["ppl"] for r in rep["results"]] == [r["ppl"] for r in want["results"]]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "rope" not in plain and plain["pe"] == "rope" and plain["results"][1]["ppl"] != rep["results"][1]["ppl"]


@pytest.mark.parametrize(
    "rope,factor,spec",
    [
        ("llama3", 4, f"rope:scaling=llama3,factor=4,original_max_position={L_TR}"),
        ("yarn:beta_fast=8", 4, f"rope:scaling=yarn,factor=4,original_max_position={L_TR},beta_fast=8"),
        ("ntk-by-parts:original_max_position=16", 2, "rope:scaling=ntk-by-parts,factor=2,original_max_position=16"),
        ("dynamic", 2, f"rope:scaling=dynamic,factor=2,original_max_position={L_TR}"),
    ],
)
def test_other_scalings_and_options_equal_the_direct_model(runs, rope, factor, spec):
    run = extrap.load(runs["rope"], rope=rope, factor=factor)
    assert run.pe == spec
    assert torch.equal(_logits(run.model), _logits(_direct(runs["rope"], spec).model))


def test_xpos_keeps_its_decay_and_takes_the_scaling(runs, capsys):
    assert main(["eval", str(runs["xpos"]), "--lengths", "32,64", "--json", "--rope", "llama3", "--factor", "4"]) == 0
    rep = json.loads(capsys.readouterr().out)
    spec = f"xpos:scaling=llama3,factor=4,original_max_position={L_TR}"
    assert rep["pe"] == spec and rep["rope"]["trained_pe"] == "xpos"
    run = extrap.load(runs["xpos"], rope="llama3", factor=4)
    assert torch.equal(_logits(run.model), _logits(_direct(runs["xpos"], spec).model))


def test_generate_task_and_align_take_the_flags(runs, capsys):
    rope = ["--rope", "linear", "--factor", "2"]
    assert main(["generate", str(runs["rope"]), "--tokens", "3", "--json", *rope]) == 0
    assert json.loads(capsys.readouterr().out)["pe"] == LINEAR2
    score = ["task", "score", str(runs["rope"]), "--task", "passkey", "--lengths", "200", "--n", "2", "--json"]
    assert main([*score, *rope]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"] == LINEAR2 and rep["rope"]["factor"] == 2.0
    assert main(["align", str(runs["rope"]), "--lengths", "64", "--segments", "1", "--json", *rope]) == 0
    assert json.loads(capsys.readouterr().out)["pe"] == LINEAR2


@pytest.mark.parametrize(
    "run,extra,words",
    [
        ("alibi", ["--rope", "linear", "--factor", "2"], "needs a run trained with a rotary PE (rope, xpos)"),
        ("rope", ["--rope", "hf:linear", "--factor", "2"], "transformers' implementation, for hf: models"),
        ("rope", ["--rope", "linear", "--train-length", "16"], "train_length: only for hf: models"),
        ("rope", ["--factor", "2"], "a RoPE factor needs a RoPE scaling"),
        ("rope", ["--rope", "yarn:alpha=2"], "alpha is not one of its options"),
        ("rope", ["--rope", "none"], "must be one of linear"),
    ],
)
def test_refusals_are_one_line(runs, run, extra, words, capsys):
    assert main(["eval", str(runs[run]), "--lengths", "32", *extra]) == 2
    assert words in _error_line(capsys)


def test_a_scaled_scheme_is_not_rescaled_twice():
    with pytest.raises(ExtrapError, match="already interpolates"):
        P.get("rope:scaling=linear,factor=2").rescaled("yarn", 2.0, 32)
    s = P.get("rope:base=500").rescaled("linear", 2.0, 32)
    assert s.spec == "rope:base=500,scaling=linear,factor=2,original_max_position=32"
