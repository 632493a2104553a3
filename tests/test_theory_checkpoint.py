"""`extrap theory --checkpoint`: the run's own training length and learned parameters; MPT's real slopes."""

from __future__ import annotations

import json
import math

import pytest
import torch

from extrap.cli import main


def _json(capsys, *argv) -> dict:
    assert main(["theory", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------
# a run directory
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kerple_run(tmp_path_factory):
    """A 2-step KERPLE-log run trained at length 64, with r1, r2 set apart per layer and head."""
    import sysconfig
    from pathlib import Path

    from safetensors.torch import load_file, save_file

    from extrap.positional.base import inverse_softplus
    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("kerple")
    corpus = root / "corpus"
    corpus.mkdir()
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]:
        (corpus / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    m, t = build_configs("kerple-log", "smoke", overrides=dict(steps=2, corpus=f"text:{corpus}", train_length=64))
    run = root / "run"
    train(run, m, t, progress=False)
    ckpt = next((run / "checkpoints").iterdir()) / "model.safetensors"
    state = load_file(str(ckpt))
    values = {}
    for layer in range(m.n_layer):
        r1 = torch.tensor([1.2 + 0.5 * h + 0.1 * layer for h in range(m.n_head)], dtype=torch.float64)
        r2 = torch.tensor([0.25 + 0.3 * h + 0.05 * layer for h in range(m.n_head)], dtype=torch.float64)
        for name, v in (("r1", r1), ("r2", r2)):
            key = f"blocks.{layer}.attn.bias_params.{name}"
            state[key] = inverse_softplus(v).to(state[key].dtype)
        values[layer] = {n: torch.nn.functional.softplus(state[f"blocks.{layer}.attn.bias_params.{n}"].double())
                         for n in ("r1", "r2")}  # fmt: skip
    save_file(state, str(ckpt))
    return run, values


def _kerple_sum(r1: float, r2: float, length: int) -> float:
    """S(L) = sum_{t<L} exp(r(t)) for KERPLE-log, r(t) = -r1 log(1 + r2 t)."""
    t = torch.arange(length, dtype=torch.float64)
    return float(torch.exp(-r1 * torch.log1p(r2 * t)).sum())


def test_run_checkpoint_dilution_is_relative_to_the_runs_train_length(kerple_run, capsys):
    run, values = kerple_run
    rows = _json(capsys, "--checkpoint", str(run), "--lengths", "128,256", "--eps", "1e-3")["results"]
    assert len(rows) == sum(len(v["r1"]) for v in values.values())
    for r in rows:
        assert r["train_length"] == 64
        r1, r2 = (float(values[r["layer"]][n][r["head"]]) for n in ("r1", "r2"))
        for L in (128, 256):
            want = _kerple_sum(r1, r2, L) / _kerple_sum(r1, r2, 64)
            assert r["dilution"][str(L)] == pytest.approx(want, rel=1e-9)
    # an explicit --train-length still wins
    rows = _json(capsys, "--checkpoint", str(run), "--lengths", "128", "--train-length", "32")["results"]
    assert {r["train_length"] for r in rows} == {32}


def test_run_checkpoint_reports_every_learned_parameter(kerple_run, capsys):
    run, values = kerple_run
    rows = _json(capsys, "--checkpoint", str(run), "--lengths", "128", "--eps", "1e-3")["results"]
    for r in rows:
        want = {n: float(values[r["layer"]][n][r["head"]]) for n in ("r1", "r2")}
        assert set(r["params"]) == {"r1", "r2"}
        assert r["params"] == pytest.approx(want, rel=1e-12)
    assert main(["theory", "--checkpoint", str(run), "--lengths", "128", "--eps", "1e-3"]) == 0
    table = capsys.readouterr().out
    assert "PARAMS" in table.splitlines()[0]
    for layer, v in values.items():
        for h in range(len(v["r1"])):
            line = next(x for x in table.splitlines() if x.startswith(f"kerple-log [decoder L{layer}]  {h} "))
            assert f"r1={float(v['r1'][h]):.4g} r2={float(v['r2'][h]):.4g}" in line


# ---------------------------------------------------------------------------
# MPT: the slopes the model computes, whatever config.json says
# ---------------------------------------------------------------------------
def _mpt(tmp_path, n_heads: int, alibi_bias_max: float):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.MptConfig(
        vocab_size=64,
        d_model=4 * n_heads,
        n_layers=2,
        n_heads=n_heads,
        max_seq_len=96,
        attn_config={"alibi_bias_max": alibi_bias_max},
    )
    torch.manual_seed(0)
    folder = tmp_path / f"mpt{n_heads}_{alibi_bias_max}"
    transformers.MptForCausalLM(cfg).save_pretrained(folder)
    return folder


def _slopes_in_attention(folder) -> list[float]:
    """The slope of each head read off the loaded model's attention probabilities: with q = k = 0
    the logits are the ALiBi bias alone, so log(p[i, j+1] / p[i, j]) is the head's slope."""
    import transformers

    model = transformers.MptForCausalLM.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        model.transformer.blocks[0].attn.Wqkv.weight.zero_()
        out = model(input_ids=torch.zeros(1, 8, dtype=torch.long), output_attentions=True)
    p = out.attentions[0][0].double()  # (H, L, L)
    return [float(torch.log(p[h, -1, -1] / p[h, -1, -2])) for h in range(p.shape[0])]


@pytest.mark.parametrize("n_heads", [4, 6])
def test_mpt_slopes_are_those_the_model_computes(tmp_path, capsys, n_heads):
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    from extrap.hf import hf_theory

    folder = _mpt(tmp_path, n_heads, 16)
    actual = _slopes_in_attention(folder)
    rows = hf_theory(f"hf:{folder}", eps=[1e-3], lengths=[64])
    assert [r.slope for r in rows] == pytest.approx(actual, rel=1e-5)
    assert [r.params["slope"] for r in rows] == [r.slope for r in rows]
    asked = [-float(x) for x in build_mpt_alibi_tensor(n_heads, 2, 16).reshape(n_heads, 2)[:, 0]]
    assert [r.slope for r in rows] != pytest.approx(asked, rel=1e-3)  # not the config's 16
    assert all("alibi_bias_max = 16" in r.slope_note and "= 8" in r.slope_note for r in rows)
    assert {r.result.train_length for r in rows} == {96}  # the model's max_seq_len
    out = _json(capsys, "--checkpoint", f"hf:{folder}", "--eps", "1e-3", "--lengths", "64")
    assert all(r["slope_note"] == rows[0].slope_note for r in out["results"])
    assert main(["theory", "--checkpoint", f"hf:{folder}", "--eps", "1e-3", "--lengths", "64"]) == 0
    notes = [x for x in capsys.readouterr().out.splitlines() if x.startswith("note:")]
    assert notes == [f"note: {rows[0].slope_note}"]


def test_mpt_config_that_matches_the_model_has_no_note(tmp_path, capsys):
    from extrap.hf import hf_theory

    folder = _mpt(tmp_path, 4, 8)
    rows = hf_theory(f"hf:{folder}", eps=[1e-3], lengths=[64])
    assert [r.slope for r in rows] == pytest.approx(_slopes_in_attention(folder), rel=1e-5)
    assert [r.slope for r in rows] == pytest.approx([2.0 ** -(2 * k) for k in range(1, 5)], rel=1e-12)
    assert not any("slope_note" in r.to_json() for r in rows)
    assert main(["theory", "--checkpoint", f"hf:{folder}", "--eps", "1e-3", "--lengths", "64"]) == 0
    assert "note:" not in capsys.readouterr().out
    assert math.isfinite(rows[0].to_json()["series_sum"])


def test_the_python_api_measures_dilution_from_the_runs_own_training_length(kerple_run):
    from extrap.theory import analyse_checkpoint

    run, _ = kerple_run
    res = analyse_checkpoint(run, lengths=[128, 256])
    heads = [r for layer in res.layers for r in layer.heads]
    assert heads and all(r.train_length == 64 for r in heads)  # the run's L_tr, not the default 512
    given = analyse_checkpoint(run, lengths=[128], train_length=100).layers
    assert all(r.train_length == 100 for layer in given for r in layer.heads)
