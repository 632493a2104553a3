"""A length that cannot be evaluated is recorded with its reason, and the other lengths are kept, for every model."""

import json
import math

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.evaluate import EvalSettings, evaluate_run
from extrap.train import build_configs, train


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory):
    """A learned APE whose table has 64 rows, trained at L_tr = 32."""
    from conftest import _tiny_corpus_dir

    root = tmp_path_factory.mktemp("learned")
    over = dict(steps=6, train_length=32, corpus=f"text:{_tiny_corpus_dir(root)}")
    m, t = build_configs("learned:max_positions=64", "smoke", overrides=over)
    train(root / "run", m, t, progress=False)
    return root / "run"


def _check_kept(report: dict, good: list[int], bad: int, *needles: str) -> None:
    """``good`` lengths have finite numbers; ``bad`` has null numbers and an error holding every needle."""
    by_length = {r["length"]: r for r in report["results"]}
    assert sorted(by_length) == sorted([*good, bad])
    for L in good:
        r = by_length[L]
        assert "error" not in r and math.isfinite(r["ppl"]) and r["tokens"] > 0, r
    failed = by_length[bad]
    assert failed["loss"] is failed["ppl"] is failed["bits_per_token"] is None
    assert all(n in failed["error"] for n in needles), failed["error"]
    json.dumps(report, allow_nan=False)  # still strict JSON


# ---------------------------------------------------------------------------
# extrap runs: a learned APE past its table
# ---------------------------------------------------------------------------
def test_aligned_temperature_past_a_learned_table_fails_that_length_only(learned_run, capsys):
    argv = ["eval", str(learned_run), "--lengths", "48,128", "--tokens", "256", "--temperature", "auto"]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    _check_kept(report, [32, 48], 128, "choosing τ", "max_positions=64")
    assert set(report["temperature"]["tau"]) == {"32", "48"}  # the τ of every length that had one
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:1] == ["48"] and len(line.split()) >= 6 for line in lines)  # 48 has its numbers
    assert any(line.split()[:2] == ["128", "failed:"] and "max_positions=64" in line for line in lines)


def test_the_api_keeps_the_lengths_before_a_failed_one(learned_run):
    report = evaluate_run(
        extrap.load(learned_run), EvalSettings(lengths=[48, 128], tokens=256, temperature="auto")
    ).to_json()
    _check_kept(report, [32, 48], 128, "max_positions=64")
    assert report["extrapolates"] is not None  # 48 > L_tr was evaluated: the verdict stands on it


def test_the_window_is_measured_at_the_longest_length_that_did_not_fail(learned_run, capsys):
    argv = ["eval", str(learned_run), "--lengths", "48,128", "--tokens", "256", "--window", "8", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    _check_kept(report, [32, 48], 128, "max_positions=64")
    measured = report["window"]["error"]["measured"]
    assert measured["length"] == 48 and measured["exact_ppl"] > 1 and measured["note"] is None


# ---------------------------------------------------------------------------
# hf: models whose positions have a fixed range
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hf_models(tmp_path_factory, hf_tokenizer):
    """GPT-2 (a learned table of n_positions = 128 rows) and MPT (ALiBi built for max_seq_len = 128), random."""
    transformers = pytest.importorskip("transformers")
    configs = {
        "gpt2": transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=128, vocab_size=300),
        "mpt": transformers.MptConfig(d_model=32, n_layers=2, n_heads=4, max_seq_len=128, vocab_size=300),
    }
    folders = {}
    for kind, cfg in configs.items():
        torch.manual_seed(0)
        folder = tmp_path_factory.mktemp(kind)
        transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
        hf_tokenizer.save_pretrained(folder)
        folders[kind] = folder
    return folders


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAP_CACHE", str(tmp_path / "cache"))


LIMITS = [("gpt2", "n_positions=128"), ("mpt", "max_seq_len=128")]


@pytest.mark.parametrize("kind, field", LIMITS)
def test_hf_past_its_positions_fails_that_length_only(hf_models, tiny_text, hf_cache, capsys, kind, field):
    argv = ["eval", f"hf:{hf_models[kind]}", "--lengths", "64,256", "--tokens", "512", "--corpus", tiny_text]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    _check_kept(report, [64, 128], 256, f"{kind}: position 255 is beyond {field}")
    assert report["extrapolates"] is None and "without error" in report["verdict_reason"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"    256  failed: {kind}: position 255 is beyond {field}" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("window", [None, 16])
def test_hf_api_records_the_failure_exact_and_streamed(hf_models, tiny_text, hf_cache, window):
    """Exact attention fails in forward, a windowed length in the rolling cache's step: both are recorded."""
    source = f"hf:{hf_models['gpt2']}"
    settings = EvalSettings(
        lengths=[64, 256], tokens=512, window="none" if window is None else window, corpus=tiny_text
    )
    report = evaluate_run(extrap.load(source), settings).to_json()
    _check_kept(report, [64, 128], 256, "n_positions=128")
    assert [r["window"] for r in report["results"]] == [window] * 3


def test_hf_positions_are_checked_before_the_model_runs(hf_models, hf_cache, capsys):
    import extrap

    model = extrap.load(f"hf:{hf_models['gpt2']}", device="cpu").model
    ids = torch.zeros(1, 8, dtype=torch.long)
    assert model(ids, torch.arange(120, 128)).logits.shape == (1, 8, 300)  # the last row of the table
    with pytest.raises(ExtrapError, match="position 128 is beyond n_positions=128"):
        model(ids, torch.arange(121, 129))
    with pytest.raises(ExtrapError, match="position 129 is beyond n_positions=128"):
        model.step(ids[:, :2], 128, model.new_cache())
    assert main(["generate", f"hf:{hf_models['gpt2']}", "--tokens", "200"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("extrap: error: gpt2: position 128 is beyond n_positions=128"), err


def test_align_past_its_positions_fails_that_length_only(hf_models, tiny_text, hf_cache, capsys):
    argv = ["align", f"hf:{hf_models['gpt2']}", "--lengths", "64,256", "--train-length", "32"]
    argv += ["--segments", "1", "--corpus", tiny_text]
    assert main([*argv, "--json"]) == 0
    rows = {r["length"]: r for r in json.loads(capsys.readouterr().out)["lengths"]}
    assert rows[64]["tau"] is not None and "error" not in rows[64]
    assert rows[256]["tau"] is None and "position 255 is beyond n_positions=128" in rows[256]["error"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "   256  failed: gpt2: position 255 is beyond n_positions=128" in out and "Traceback" not in out
