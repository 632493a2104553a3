"""Streaming windowed evaluation: equal to the whole windowed forward, memory set by W, the error stated."""

import json
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import extrap
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.evaluate import EvalSettings, LengthResult, evaluate, evaluate_run, verdict
from extrap.evaluate.streaming import cone, stream_nll
from extrap.evaluate.window_error import measure, theory_bound
from extrap.model import GPT, ModelConfig
from extrap.theory import receptive_field


def _windowed_nll(model, x, y, W):
    """The reference: one whole forward pass with the window, then per-token cross-entropy."""
    with torch.no_grad():
        logits = model(x, window=W).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)


@pytest.mark.parametrize("pe", ["alibi", "kerple-log", "type1", "fire", "rope", "nope", "sinusoidal", "t5"])
def test_streaming_equals_the_whole_windowed_forward(pe):
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=3, d_model=32, n_head=4, vocab_size=64)).eval()
    seq = torch.randint(0, 64, (2, 701))
    x, y = seq[:, :-1], seq[:, 1:]
    W = 20
    ref = _windowed_nll(model, x, y, W)
    exact = _windowed_nll(model, x, y, None)
    assert (ref - exact).abs().max() > 5e-5  # the window matters at this length
    for chunk in (1, 64, 128, 1000):
        torch.testing.assert_close(stream_nll(model, x, y, W, chunk=chunk), ref, rtol=1e-6, atol=2e-6)
    # the last scored positions only: the cone of n_layer (W - 1) tokens before them suffices
    got = stream_nll(model, x, y, W, score_last=5, chunk=32)
    torch.testing.assert_close(got, ref[:, -5:], rtol=1e-6, atol=2e-6)


def test_the_cone_is_exactly_what_the_last_token_needs():
    """A context of n_layer (W - 1) tokens before the scored one reproduces it; one token fewer does not."""
    torch.manual_seed(1)
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=32, n_head=4, vocab_size=64)).eval()
    with torch.no_grad():  # larger attention weights than at initialisation, so that far tokens are felt
        for blk in model.blocks:
            blk.attn.qkv.weight.mul_(8)
            blk.attn.proj.weight.mul_(30)
    seq = torch.randint(0, 64, (1, 400))
    x, y, W = seq[:, :-1], seq[:, 1:], 20
    ref = _windowed_nll(model, x, y, W)[:, -1]
    reach = cone(2, W)
    assert reach == 38
    # the whole windowed forward on a suffix, at the same absolute positions
    with torch.no_grad():
        pos = torch.arange(x.shape[1])
        full = model(x[:, -reach - 1 :], positions=pos[-reach - 1 :], window=W).logits[:, -1]
        short = model(x[:, -reach:], positions=pos[-reach:], window=W).logits[:, -1]
    assert float(F.cross_entropy(full, y[:, -1])) == pytest.approx(float(ref[0]), rel=1e-5)
    assert abs(float(F.cross_entropy(short, y[:, -1])) - float(ref[0])) > 1e-4


def test_the_rolling_cache_never_holds_more_than_w_keys():
    """Memory is set by W and the chunk: every cached tensor and every logits tensor is bounded, whatever L."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=32, n_head=4, vocab_size=64)).eval()
    seen = []
    step = model.step

    def watched(idx, start, cache):
        out = step(idx, start, cache)
        seen.append((out.numel(), max(c.keys.shape[2] for c in cache.layers)))
        return out

    model.step = watched
    for L in (1000, 4000):
        seq = torch.randint(0, 64, (1, L + 1))
        stream_nll(model, seq[:, :-1], seq[:, 1:], 30, chunk=50)
    assert max(k for _, k in seen) == 30 and max(n for n, _ in seen) == 50 * 64


_RSS = """
import resource, sys, torch
torch.set_num_threads(1)
from extrap.model import GPT, ModelConfig
from extrap.evaluate.streaming import stream_nll
torch.manual_seed(0)
m = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=32, n_head=4, vocab_size=64)).eval()
L = int(sys.argv[1])
seq = torch.randint(0, 64, (1, L + 1))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
stream_nll(m, seq[:, :-1], seq[:, 1:], 64, chunk=256)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def test_peak_memory_does_not_grow_with_the_length():
    """Peak RSS while streaming 2^12 and 2^15 tokens (8x longer) differs by less than 8 MB."""
    grown = []
    for L in (2**12, 2**15):
        out = subprocess.run([sys.executable, "-c", _RSS, str(L)], capture_output=True, text=True, check=True)
        grown.append(int(out.stdout.strip()) / 1024)  # ru_maxrss is in KiB on Linux
    assert grown[1] - grown[0] < 8, grown


def test_evaluate_streams_windowed_lengths_with_the_same_numbers(tiny_runs):
    model = extrap.load(tiny_runs["alibi"]).model
    stream = torch.randint(0, 256, (3000,), generator=torch.Generator().manual_seed(2))
    W = 10
    for protocol in ("nonoverlapping", "last-token"):
        (r,) = evaluate(model, stream, [256], protocol, tokens=512, targets=8, window_for=lambda L: W)
        if protocol == "nonoverlapping":
            seg = stream[:513].long().view(1, -1)
            chunks = seg[:, :512].view(2, 256), seg[:, 1:].view(2, 256)
            ref = _windowed_nll(model, *chunks, W).mean()
        else:
            from extrap.evaluate import last_token_targets

            ps = last_token_targets(3000, 256, 8)
            ref = torch.stack(
                [
                    _windowed_nll(model, stream[None, p - 255 : p].long(), stream[None, p - 254 : p + 1].long(), W)[
                        0, -1
                    ]
                    for p in ps
                ]
            ).mean()
        assert r.loss == pytest.approx(float(ref), rel=1e-5), protocol


def test_theory_bound_of_the_auto_window_is_eps_and_tight():
    """W = TRF(eps) keeps every head's tail within eps of B; one key fewer leaves the widest head above it."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=32, n_head=4, vocab_size=64)).eval()
    eps = 1e-3
    trf = receptive_field(model.scheme, model.bias_values(), eps=eps, reduce="max", num_heads=4)
    W = int(trf.value)
    bound = theory_bound(model, W, eps, "max")
    assert 0 < bound.worst_tail <= eps
    # closed form for ALiBi: the tail beyond W of sum_t e^{-m t} is a fraction e^{-m W} of it (smallest slope m)
    m = min(float(s) for s in model.bias_values()[0]["slope"].flatten())
    assert bound.worst_tail == pytest.approx(math.exp(-m * W), rel=1e-9)
    assert theory_bound(model, W - 1, eps, "max").worst_tail > eps


def test_dropped_mass_matches_the_dense_probabilities():
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="kerple-log", n_layer=2, d_model=32, n_head=4, vocab_size=64)).eval()
    seq = torch.randint(0, 64, (1, 301))
    W, rows = 40, [40, 150, 299]
    dense = [p for _, p in model.attention_probs(seq[:, :-1])]
    from extrap.model.attention import dense_probs

    for (_layer, probs), blocks in zip(model.attention_rows(seq[:, :-1], rows), dense):
        full = dense_probs(blocks, 300)
        torch.testing.assert_close(probs, full[:, :, rows], rtol=1e-5, atol=1e-6)
    m = measure(model, seq[0], W, 300, rows=3)
    assert m.rows == 3 and len(m.dropped_mass) == 2 and 0 < m.dropped_mass_max < 1
    assert m.rel_diff is not None and m.rel_diff > 0
    covered = measure(model, seq[0], 300, 300)
    assert covered.rel_diff == 0.0 and "covers" in covered.note


def test_eval_reports_the_window_bound_and_measurement(tiny_runs, capsys):
    run = str(tiny_runs["alibi"])
    argv = ["eval", run, "--lengths", "1024", "--tokens", "1024", "--window", "auto", "--eps", "0.3", "--json"]
    assert main(argv) == 0
    rep = json.loads(capsys.readouterr().out)
    err = rep["window"]["error"]
    assert rep["window"]["size"] < 1024 and err["bound"]["window"] == rep["window"]["size"]
    assert err["bound"]["eps"] == 0.3 and err["bound"]["worst_tail"] <= 0.3 and err["bound"]["where"]
    assert err["measured"]["length"] == 1024 and err["measured"]["exact_ppl"] > 1
    assert main(["eval", run, "--lengths", "256", "--window", "16"]) == 0
    out = capsys.readouterr().out
    assert (
        "window bound (000 Eq. 22): beyond W=16" in out
        and "window measured on one sequence of the first 256 tokens" in out
    )


def test_heldout_split_is_validation_then_test(tiny_runs):
    from extrap.run import eval_stream

    run = extrap.load(tiny_runs["alibi"])
    val, test = eval_stream(run, "validation", 2), eval_stream(run, "test", 2)
    joined = eval_stream(run, "heldout", 2)
    assert torch.equal(joined, torch.cat([val, test]))
    with pytest.raises(ExtrapError, match="use the split heldout"):
        eval_stream(run, "validation", val.numel() + 1)


def test_a_text_file_is_scored_as_one_streamed_sequence(tiny_runs, tmp_path, capsys):
    run = extrap.load(tiny_runs["alibi"])
    text = "def f(x):\n    return x * 2\n" * 40
    path = tmp_path / "f.py"
    path.write_text(text)
    assert main(["eval", str(tiny_runs["alibi"]), "--file", str(path), "--window", "8", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    ids = torch.tensor(run.tokenizer.encode(text))
    ref = _windowed_nll(run.model, ids[None, :-1], ids[None, 1:], 8).mean()
    assert rep["tokens"] == ids.numel() - 1 and rep["loss"] == pytest.approx(float(ref), rel=1e-5)
    assert rep["file_sha256"] and rep["window"]["error"]["bound"]["window"] == 8


def _result(length, nll):
    return LengthResult(length, float(nll.double().mean()), nll.numel(), 0.0, stderr=None, nll=nll)


def test_the_verdict_says_when_a_difference_is_within_noise():
    g = torch.Generator().manual_seed(0)
    base = torch.rand(4096, generator=g) * 4
    noise = torch.randn(4096, generator=g)
    ref = _result(64, base)
    close = _result(128, base + 0.02 + 0.5 * noise)  # |Δppl|/ppl ≈ 0.02 = δ, with a large spread
    far = _result(128, base + 0.2 + 0.01 * noise)  # clearly above δ
    v = verdict([ref, close], 64, delta=0.02)
    assert v.within_noise is True and "within noise" in v.noise and v.comparisons[0].paired
    v = verdict([ref, far], 64, delta=0.02)
    assert v.extrapolates is False and v.within_noise is False and v.noise is None
    tiny = verdict([_result(64, base[:4]), _result(128, base[:4] + 0.5)], 64)
    assert tiny.within_noise is None and "too few" in tiny.noise


def test_eval_reports_standard_errors_and_scores_a_large_default_sample(tiny_runs):
    rep = evaluate_run(extrap.load(tiny_runs["alibi"]), EvalSettings(lengths=[32, 64])).to_json()
    assert all(r["tokens"] >= 2**14 for r in rep["results"])  # not just max(lengths) tokens
    for r in rep["results"]:
        lo, hi = r["ppl_ci95"]
        assert r["loss_stderr"] > 0 and lo < r["ppl"] < hi
    assert rep["within_noise"] in (True, False) and rep["worst_ratio_stderr"] > 0


def test_progress_is_silent_under_json_without_a_terminal(tiny_runs, capfd):
    run = str(tiny_runs["alibi"])
    argv = ["eval", run, "--lengths", "64", "--window", "8", "--tokens", "128"]
    assert main([*argv, "--json"]) == 0
    assert capfd.readouterr().err.strip() == ""
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert "L_ex=64" in err and "tok" in err


def test_a_tiny_hf_llama_streams_64k_tokens_like_its_windowed_forward():
    transformers = pytest.importorskip("transformers")
    from extrap.hf.model import HFModel

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        vocab_size=300,
    )
    model = HFModel(transformers.AutoModelForCausalLM.from_config(cfg).eval(), "llama", "hf:llama/rope")
    seq = torch.randint(0, 300, (1, 2**16 + 1))
    x, y, W = seq[:, :-1], seq[:, 1:], 32
    ref = _windowed_nll(model, x, y, W)
    got = stream_nll(model, x, y, W, chunk=512)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    # the last tokens alone, from their cone at absolute positions (RoPE positions stay absolute)
    torch.testing.assert_close(stream_nll(model, x, y, W, score_last=3, chunk=16), ref[:, -3:], rtol=1e-5, atol=1e-5)
    cache = model.new_cache(W)
    for s in range(0, 200, 50):
        model.step(x[:, s : s + 50], s, cache)
        assert all(layer.keys.shape[2] <= W for layer in cache.past.layers)


def test_a_windowed_length_is_judged_by_what_streaming_holds_not_by_L(tiny_runs, monkeypatch):
    """The memory check counts a chunk and W cached keys for a windowed length: last-token at a long L fits."""
    import extrap.memory

    monkeypatch.setattr(extrap.memory, "available_bytes", lambda: 40 * 2**20)  # 40 MiB
    run = tiny_runs["alibi"]
    with pytest.raises(ExtrapError, match="needs at least"):
        evaluate_run(extrap.load(run), EvalSettings(lengths=[20000], protocol="last-token", targets=8)).to_json()
    rep = evaluate_run(
        extrap.load(run), EvalSettings(lengths=[20000], protocol="last-token", targets=8, window="16")
    ).to_json()
    assert [r["window"] for r in rep["results"]] == [16, 16] and all(r["loss"] is not None for r in rep["results"])
