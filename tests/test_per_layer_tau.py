"""One softmax temperature per layer (004 §8): eval and task score take a τ list and auto:per-layer."""

import json

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.commands.args import temperature_spec
from extrap.data import ByteTokenizer
from extrap.errors import ExtrapError
from extrap.evaluate import EvalSettings, evaluate_run
from extrap.model import GPT, ModelConfig
from extrap.run import eval_stream
from extrap.tasks import TaskSettings, score_task

TAUS = [0.9, 0.6]  # the smoke preset's two layers


@pytest.fixture(scope="module")
def alibi_run(tiny_runs):
    return tiny_runs["alibi"]


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("extrap: error:"), err
    return err[0]


def test_the_temperature_argument():
    assert temperature_spec("1.1,1.2,1.0,1.3") == [1.1, 1.2, 1.0, 1.3]
    assert temperature_spec("0.8") == 0.8 and temperature_spec("none") is None
    assert temperature_spec("auto") == "auto" and temperature_spec("Auto:Per-Layer") == "auto:per-layer"
    assert temperature_spec("auto:entropy:per-layer") == "auto:entropy:per-layer"
    for bad in ("1.1,0", "1.1,,1", "1,nan", "hot", "auto:prop2:per-layer", "auto:median", "auto:per-layer:per-layer"):
        with pytest.raises(Exception) as e:
            temperature_spec(bad)
        assert type(e.value).__name__ == "ArgumentTypeError", bad


def test_eval_with_a_tau_list_equals_setting_it_by_hand(alibi_run, capsys):
    rep = evaluate_run(extrap.load(alibi_run), EvalSettings(lengths=[32, 64], tokens=256, temperature=TAUS)).to_json()
    assert [r["temperature"] for r in rep["results"]] == [TAUS, TAUS]
    assert rep["temperature"] == {"mode": "fixed", "per_layer": True, "tau": TAUS}
    run = extrap.load(alibi_run)
    stream = eval_stream(run, "validation", 257)
    run.model.set_temperature(TAUS)
    for r in rep["results"]:  # nonoverlapping by hand: 256 // L chunks of L tokens, each predicting the next
        L = r["length"]
        seg = stream[: 256 + 1 - (256 % L)].long()
        x, y = seg[:-1].reshape(-1, L), seg[1:].reshape(-1, L)
        with torch.no_grad():
            logits = run.model(x).logits
        loss = float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)))
        assert r["loss"] == pytest.approx(loss, abs=1e-5) and r["tokens"] == y.numel()
    one = evaluate_run(
        extrap.load(alibi_run), EvalSettings(lengths=[32, 64], tokens=256, temperature=0.9)
    ).to_json()  # a τ list is not one τ
    assert abs(one["results"][1]["loss"] - rep["results"][1]["loss"]) > 1e-4
    argv = ["eval", str(alibi_run), "--lengths", "32,64", "--tokens", "256", "--json"]
    cli = _json(capsys, [*argv, "--temperature", "0.9,0.6"])
    assert [r["loss"] for r in cli["results"]] == [r["loss"] for r in rep["results"]]
    assert main([*argv, "--temperature", "0.9,0.6,1.0"]) == 2
    assert "3 values given for a model with 2 layers" in _one_error_line(capsys)
    with pytest.raises(ExtrapError, match="1 values given for a model with 2 layers"):
        evaluate_run(extrap.load(alibi_run), EvalSettings(lengths=[32], tokens=64, temperature=[0.9])).to_json()


def test_eval_auto_per_layer_records_a_list_per_length(alibi_run):
    from extrap.align import aligned_temperature

    rep = evaluate_run(
        extrap.load(alibi_run), EvalSettings(lengths=[32, 48], tokens=256, temperature="auto:per-layer")
    ).to_json()
    taus = {r["length"]: r["temperature"] for r in rep["results"]}
    assert taus[32] == [1.0, 1.0]
    assert len(taus[48]) == 2 and all(0.5 <= t <= 1.0 for t in taus[48]) and taus[48] != [1.0, 1.0]
    assert rep["temperature"]["per_layer"] is True and rep["temperature"]["tau"]["48"] == taus[48]
    run = extrap.load(alibi_run)
    stream = eval_stream(run, "validation", 257)
    assert taus[48] == aligned_temperature(run.model, stream, 32, 48, "pmax", per_layer=True, segments=4)
    one = evaluate_run(
        extrap.load(alibi_run), EvalSettings(lengths=[48], tokens=256, temperature="auto")
    ).to_json()  # auto stays one τ
    assert isinstance(one["results"][1]["temperature"], float)


def test_task_score_takes_a_tau_list_and_auto_per_layer(alibi_run, capsys, monkeypatch, tmp_path):
    tok = ByteTokenizer()
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=16, n_head=2)).eval()
    seen = []
    real = model.forward

    def spy(*a, **k):
        seen.append([float(b.attn.temperature) for b in model.blocks])
        return real(*a, **k)

    monkeypatch.setattr(model, "forward", spy)
    rep = score_task(model, tok, TaskSettings("passkey", [100], n=2, temperature="0.7,0.9"))
    assert rep.temperature == (0.7, 0.9) and rep.results[0].temperature == (0.7, 0.9)
    assert seen and all(t == pytest.approx([0.7, 0.9]) for t in seen)
    assert model.temperatures() == [1.0, 1.0]  # restored
    with pytest.raises(ExtrapError, match="3 values given for a model with 2 layers"):
        score_task(model, tok, TaskSettings("passkey", [100], n=2, temperature=[0.7, 0.9, 1.0]))
    rep = score_task(
        model, tok, TaskSettings("passkey", [100, 200], n=2, temperature="auto:per-layer", train_length=100)
    )
    taus = [r.temperature for r in rep.results]
    assert rep.temperature == "auto:per-layer" and taus[0] == (1.0, 1.0) and len(taus[1]) == 2
    argv = ["task", "score", str(alibi_run), "--task", "passkey", "--lengths", "100", "--n", "2", "--json"]
    out = _json(capsys, [*argv, "--temperature", "0.9,0.6"])
    assert out["temperature"] == TAUS and out["results"][0]["temperature"] == TAUS
    assert main([*argv, "--temperature", "0.9"]) == 0 and capsys.readouterr()
    assert main([*argv, "--temperature", "0.9,0.6,1"]) == 2
    assert "3 values given" in _one_error_line(capsys)
    assert main([*argv, "--temperature", "auto:prop1:per-layer"]) == 2
    assert "per-layer" in _one_error_line(capsys)
