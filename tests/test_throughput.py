"""Training throughput: the FLOPs of a trained token (PaLM Appendix B), MFU, fused AdamW's device, --compile."""

import json

import pytest
import torch

from extrap import throughput as tp
from extrap.cli import main
from extrap.model import GPT, ModelConfig
from extrap.run.records import MetricsRecord, TrainingSummary


@pytest.mark.parametrize("tied", [False, True])
def test_the_flops_of_a_trained_token_against_a_hand_count(tied):
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=32, n_head=2, vocab_size=256, tie_embeddings=tied))
    # per layer: qkv 3 d^2, proj d^2, MLP d x 4d + 4d and 4d x d + d (biases); the head V d, once even when tied
    per_layer = 3 * 32 * 32 + 32 * 32 + (32 * 128 + 128) + (128 * 32 + 32)
    N = 2 * per_layer + 256 * 32
    assert N == 33088 and tp.matmul_params(model) == N
    # 6 N + 12 R d L at L = 64
    assert tp.training_flops_per_token(N, 2, 32, 64) == 6 * 33088 + 12 * 2 * 32 * 64 == 247680


def test_mfu_is_tokens_times_flops_over_the_peak_and_none_without_one():
    assert tp.mfu(1000.0, 1e9, 1e12) == pytest.approx(1.0)
    assert tp.mfu(440e3, 2e8, 989.4e12) == pytest.approx(440e3 * 2e8 / 989.4e12)
    assert tp.mfu(1000.0, 1e9, None) is None


@pytest.mark.parametrize(
    "name, peak",
    [("NVIDIA H100 80GB HBM3", 989.4e12), ("NVIDIA H200", 989.4e12), ("NVIDIA GeForce RTX 4090", None)],
)
def test_the_peak_of_known_cards_and_none_for_others(monkeypatch, name, peak):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    assert tp.peak_flops("cuda") == peak
    assert tp.peak_flops("cpu") is None


def test_fused_adamw_is_chosen_on_cuda_only():
    assert tp.fused_adamw("cuda") and tp.fused_adamw(torch.device("cuda:1"))
    assert not tp.fused_adamw("cpu")


def test_a_cpu_run_logs_tokens_per_second_and_a_null_mfu(tmp_path, stdlib_corpus):
    from extrap.train import build_configs, train

    m, t = build_configs("alibi", "smoke", overrides=dict(steps=4, log_every=2, corpus=stdlib_corpus, device="cpu"))
    summary = train(tmp_path / "run", m, t, progress=False)
    assert summary.tokens_per_s > 0 and summary.mfu is None
    final = json.loads((tmp_path / "run" / "final.json").read_text())
    assert final["tokens_per_s"] == summary.tokens_per_s and final["mfu"] is None
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [2, 4] and all(x["mfu"] is None and x["tokens_per_s"] > 0 for x in lines)


def test_records_written_before_mfu_still_read():
    old = {"step": 3, "final_loss": 1.0, "seconds": 2.0, "tokens": 10, "params": 5, "extrap_version": "0.1.0"}
    s = TrainingSummary.from_json(old)
    assert s.tokens_per_s is None and s.mfu is None
    assert MetricsRecord.from_json({"step": 1, "loss": 1.0, "lr": 0.1, "tokens_per_s": 5.0}).mfu is None
    assert TrainingSummary.from_json({**old, "mfu": 0.25}).mfu == 0.25


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_compile_on_the_cpu_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--pe", "alibi", "--preset", "smoke", "--out", str(out), "--compile"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "extrap: error: --compile: CUDA only (this run trains on cpu); train without it"
    assert not out.exists()
