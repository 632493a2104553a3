"""hf:PATH checkpoints: tiny random-weight HF models saved locally (no network)."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from extrap.cli import main  # noqa: E402
from extrap.errors import ExtrapError  # noqa: E402
from extrap.run import Run  # noqa: E402

VOCAB = 300


@pytest.fixture(scope="module")
def tokenizer_obj(hf_tokenizer):
    return hf_tokenizer


def _config(kind):
    common = dict(vocab_size=VOCAB)
    if kind == "llama":
        return transformers.LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32,
            **common,
        )
    if kind == "neox":
        return transformers.GPTNeoXConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=32,
            **common,
        )
    if kind == "gpt2":
        return transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=128, **common)
    if kind == "bloom":
        return transformers.BloomConfig(hidden_size=32, n_layer=2, n_head=4, **common)
    if kind == "bloom1":  # one layer: a windowed query equals the model on its last W tokens
        return transformers.BloomConfig(hidden_size=32, n_layer=1, n_head=4, initializer_range=0.2, **common)
    if kind == "mpt":
        return transformers.MptConfig(d_model=32, n_layers=2, n_heads=4, max_seq_len=128, **common)
    if kind == "qwen3":
        return transformers.Qwen3Config(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            **common,
        )
    if kind == "mistral":  # its own sliding window (6) still applies under --window
        return transformers.MistralConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            sliding_window=6,
            **common,
        )
    if kind == "t5":
        return transformers.T5Config(
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=16,
            **common,
        )
    if kind == "bert":
        return transformers.BertConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, **common
        )
    raise ValueError(kind)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, tokenizer_obj):
    cache = {}

    def make(kind):
        if kind in cache:
            return cache[kind]
        torch.manual_seed(0)
        cfg = _config(kind)
        if kind == "t5":
            model = transformers.T5ForConditionalGeneration(cfg)
            with torch.no_grad():  # a table with a clearly non-zero tail
                for m in model.modules():
                    if hasattr(m, "relative_attention_bias"):
                        m.relative_attention_bias.weight.normal_(0, 1)
        elif kind == "bert":
            model = transformers.BertModel(cfg)
        else:
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        folder = tmp_path_factory.mktemp(kind)
        model.save_pretrained(folder)
        tokenizer_obj.save_pretrained(folder)
        cache[kind] = folder
        return folder

    return make


def _direct_nll(folder, ids):
    m = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = m(input_ids=ids).logits
    return float(F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)))


@pytest.mark.parametrize("kind", ["llama", "neox", "gpt2", "bloom", "mpt"])
def test_nll_matches_transformers(saved, kind):
    import extrap
    from extrap.evaluate import eval_nonoverlapping

    folder = saved(kind)
    run = extrap.load(f"hf:{folder}", device="cpu")
    assert run.config.dtype == "float32" and run.config.config_hash and run.step is None
    assert run.model.shape.n_layer == 2 and run.pe.startswith(f"hf:{run.config.model_type}")
    assert isinstance(run, Run) and run.provenance().source["config_hash"] == run.config.config_hash
    ids = torch.tensor(run.tokenizer.encode("def f(x):\n    return x + 1\n" * 8)[:33])
    nll = eval_nonoverlapping(run.model, ids, 32, 32)
    assert nll.numel() == 32
    assert float(nll.double().mean()) == pytest.approx(_direct_nll(folder, ids[None]), abs=1e-5)
    # last= slices the same logits
    out_all = run.model(ids[None, :16]).logits
    out_last = run.model(ids[None, :16], last=3).logits
    torch.testing.assert_close(out_last, out_all[:, -3:], rtol=1e-5, atol=1e-5)


def test_eval_cli_json(saved, tiny_text, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAP_CACHE", str(tmp_path / "cache"))
    folder = saved("llama")
    rc = main(
        [
            "eval",
            f"hf:{folder}",
            "--json",
            "--corpus",
            tiny_text,
            "--lengths",
            "16,32",
            "--tokens",
            "64",
            "--train-length",
            "16",
            "--dtype",
            "float32",
        ]
    )
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["hf_path"] == str(folder) and rep["dtype"] == "float32" and len(rep["config_hash"]) == 64
    assert rep["corpus_hash"] and rep["train_length"] == 16 and rep["corpus"] == tiny_text
    assert all(math.isfinite(r["ppl"]) for r in rep["results"])
    rc = main(
        [
            "eval",
            f"hf:{folder}",
            "--json",
            "--corpus",
            tiny_text,
            "--lengths",
            "16,32",
            "--tokens",
            "64",
            "--train-length",
            "16",
            "--window",
            "8",
        ]
    )
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["window"]["size"] == 8 and [r["window"] for r in rep["results"]] == [8, 8]
    assert all(math.isfinite(r["ppl"]) and r["window_rel_diff"] > 0 for r in rep["results"])
    assert main(["eval", f"hf:{folder}", "--window", "auto", "--corpus", tiny_text]) == 2
    assert "automatic window" in capsys.readouterr().err


@pytest.mark.parametrize("kind,factor", [("linear", 4.0), ("yarn", 4.0), ("dynamic", 2.0)])
def test_rope_ours_matches_hf(saved, kind, factor):
    import extrap

    folder = saved("llama")
    ids = torch.randint(0, VOCAB, (1, 96), generator=torch.Generator().manual_seed(1))
    ours = extrap.load(f"hf:{folder}", device="cpu", rope=kind, factor=factor)
    theirs = extrap.load(f"hf:{folder}", device="cpu", rope=f"hf:{kind}", factor=factor)
    base = extrap.load(f"hf:{folder}", device="cpu")
    with torch.no_grad():
        a, b, c = (r.model(ids).logits for r in (ours, theirs, base))
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(a, c, atol=1e-4)


def test_rope_rejected_for_non_rope(saved):
    import extrap

    with pytest.raises(ExtrapError, match="RoPE"):
        extrap.load(f"hf:{saved('gpt2')}", device="cpu", rope="linear", factor=2.0)


@pytest.mark.parametrize("kind", ["llama", "neox", "gpt2", "bloom", "mpt"])
def test_temperature(saved, kind):
    import extrap
    from extrap.align.probe import attention_stats

    run = extrap.load(f"hf:{saved(kind)}", device="cpu")
    ids = torch.randint(0, VOCAB, (2, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = run.model(ids).logits
        run.model.set_temperature(1.0)
        torch.testing.assert_close(run.model(ids).logits, ref, rtol=0, atol=0)
    s1 = attention_stats(run.model, ids, 1.0)
    s_lo = attention_stats(run.model, ids, 0.5)
    s_hi = attention_stats(run.model, ids, 2.0)
    assert s_lo.pmax > s1.pmax > s_hi.pmax
    assert run.model.temperatures() == [1.0, 1.0]  # restored


def test_gradient_and_attention_erf(saved):
    import extrap
    from extrap.erf import attention_erf, gradient_erf

    run = extrap.load(f"hf:{saved('llama')}", device="cpu")
    stream = torch.randint(0, VOCAB, (200,), generator=torch.Generator().manual_seed(3))
    g = gradient_erf(run.model, stream, 24, segments=2)
    assert 1 <= g.erf <= 24
    a = attention_erf(run.model, stream, 16, segments=2)
    assert len(a.per_layer_head) == 2 and len(a.per_layer_head[0]) == 4


def test_theory_t5_and_bloom(saved, capsys, tmp_path):
    from extrap.hf import hf_theory

    rows = hf_theory(f"hf:{saved('t5')}", eps=[1e-3], lengths=[64])
    assert {r.part for r in rows} == {"encoder", "decoder"}
    assert len([r for r in rows if r.part == "encoder"]) == 4
    assert all(r.result.verdict == "diverges" and r.result.tail_term is not None for r in rows)
    rows = hf_theory(f"hf:{saved('bloom')}", eps=[1e-3], lengths=[64])
    assert len(rows) == 4 and all(r.result.verdict == "converges" for r in rows)
    assert all(r.slope == pytest.approx(r.press_slope) for r in rows)
    assert (
        main(
            [
                "theory",
                "--checkpoint",
                f"hf:{saved('t5')}",
                "--json",
                "--eps",
                "1e-3",
                "--lengths",
                "64",
                "--plot",
                str(tmp_path / "figs"),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["results"] and out["plots"]
    assert main(["theory", "--checkpoint", f"hf:{saved('bloom')}", "--eps", "1e-3", "--lengths", "64"]) == 0
    assert "converges" in capsys.readouterr().out


def test_errors(saved, tmp_path, capsys):
    assert main(["eval", f"hf:{saved('bert')}", "--json"]) == 2
    assert "not supported: BertModel" in capsys.readouterr().err
    assert main(["eval", f"hf:{tmp_path / 'nope'}", "--json"]) == 2
    assert "does not exist (extrap does not download)" in capsys.readouterr().err
    assert main(["theory", "--checkpoint", f"hf:{tmp_path / 'nope'}"]) == 2
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    assert main(["eval", f"hf:{tmp_path / 'empty'}", "--json"]) == 2
    assert "holds no config.json" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# temperature and pre-softmax logits
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["llama", "neox", "gpt2", "qwen3", "bloom", "mpt"])
def test_temperature_divides_the_whole_logit(saved, kind):
    """Layer-0 attention at τ is softmax(logits / τ): the scale and the ALiBi bias are both divided."""
    import extrap

    run = extrap.load(f"hf:{saved(kind)}", device="cpu")
    ids = torch.randint(0, VOCAB, (2, 20), generator=torch.Generator().manual_seed(4))
    (logits,) = run.model.layer_logits(ids)
    assert logits.shape == (2, run.model.cfg.n_head, 20, 20)
    low = torch.ones(20, 20, dtype=torch.bool).tril()
    assert torch.isinf(logits[..., ~low]).all() and torch.isfinite(logits[..., low]).all()
    for tau in (0.5, 2.0):
        run.model.set_temperature(tau)
        with torch.no_grad():
            probs = run.model(ids, return_probs=True).probs[0][0][1]
        torch.testing.assert_close(probs, torch.softmax(logits / tau, -1), rtol=1e-5, atol=1e-6)
    run.model.set_temperature(1.0)


def _rope(x, pos, theta):
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = pos[:, None].float() * inv[None]  # (L, d/2)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    rot = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + rot * sin


def test_layer_logits_match_manual_llama(saved):
    import extrap

    run = extrap.load(f"hf:{saved('llama')}", device="cpu")
    hf, c = run.model.hf, run.model.hf.config
    ids = torch.randint(0, VOCAB, (2, 24), generator=torch.Generator().manual_seed(5))
    B, L = ids.shape
    H, Hkv, hd = c.num_attention_heads, c.num_key_value_heads, c.hidden_size // c.num_attention_heads
    with torch.no_grad():
        layer = hf.model.layers[0]
        h = layer.input_layernorm(hf.model.embed_tokens(ids))
        q = layer.self_attn.q_proj(h).view(B, L, H, hd).transpose(1, 2)
        k = layer.self_attn.k_proj(h).view(B, L, Hkv, hd).transpose(1, 2)
        pos = torch.arange(L)
        theta = (getattr(c, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
        q, k = _rope(q, pos, theta), _rope(k, pos, theta).repeat_interleave(H // Hkv, 1)
        manual = q @ k.transpose(-1, -2) / math.sqrt(hd)
    (got,) = run.model.layer_logits(ids)
    low = torch.ones(L, L, dtype=torch.bool).tril()
    torch.testing.assert_close(got[..., low], manual[..., low], rtol=0, atol=1e-5)
    assert torch.isinf(got[..., ~low]).all()
    with pytest.raises(ExtrapError, match="only up to"):
        run.model.layer_logits(torch.zeros(1, 4096, dtype=torch.long))


# ---------------------------------------------------------------------------
# --window W
# ---------------------------------------------------------------------------
def _band(L, W):
    t = torch.arange(L)[:, None] - torch.arange(L)[None]
    return (t >= 0) & (t < W)  # True: query i sees key j


@pytest.mark.parametrize("kind", ["llama", "neox", "gpt2", "mistral", "qwen3", "mpt"])
def test_window_matches_explicit_banded_mask(saved, kind):
    import extrap

    folder = saved(kind)
    run = extrap.load(f"hf:{folder}", device="cpu")
    ids = torch.randint(0, VOCAB, (2, 40), generator=torch.Generator().manual_seed(6))
    direct = transformers.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    band = _band(40, 4)[None, None].expand(2, 1, 40, 40)
    with torch.no_grad():
        full = run.model(ids).logits
        torch.testing.assert_close(run.model(ids, window=40).logits, full, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(run.model(ids, window=99).logits, full, rtol=1e-5, atol=1e-5)
        got = run.model(ids, window=4).logits
        # MPT's 4-D boolean mask marks the masked keys; sdpa's marks the visible ones
        ref = direct(input_ids=ids, attention_mask=~band if kind == "mpt" else band).logits
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, full, atol=1e-3)
    if kind == "mistral":  # the config's sliding window (6) is the narrower one
        torch.testing.assert_close(run.model(ids, window=8).logits, full, rtol=1e-5, atol=1e-5)
    # the window is gone afterwards
    assert all(m._extrap_window is None for m in run.model.attn_modules)
    assert direct.config._attn_implementation == run.model.hf.config._attn_implementation


def test_window_bloom_equals_last_w_tokens(saved):
    """One BLOOM layer: with a window of W, query i sees exactly what the model sees on tokens i-W+1..i."""
    import extrap

    run = extrap.load(f"hf:{saved('bloom1')}", device="cpu")
    ids = torch.randint(0, VOCAB, (1, 24), generator=torch.Generator().manual_seed(7))
    W = 5
    with torch.no_grad():
        full = run.model(ids).logits
        torch.testing.assert_close(run.model(ids, window=24).logits, full, rtol=1e-5, atol=1e-5)
        got = run.model(ids, window=W).logits
        ref = torch.stack([run.model(ids[:, max(0, i - W + 1) : i + 1]).logits[0, -1] for i in range(24)])
    torch.testing.assert_close(got[0], ref, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, full, atol=1e-4)


def test_window_gradient_and_errors(saved):
    import extrap

    run = extrap.load(f"hf:{saved('llama')}", device="cpu")
    ids = torch.randint(0, VOCAB, (1, 16), generator=torch.Generator().manual_seed(8))
    emb = run.model.embed(ids).detach().requires_grad_(True)
    run.model(ids, embeds=emb, window=4, last=1).logits.sum().backward()
    g = emb.grad[0].norm(dim=-1)
    assert (g[-1] > 0) and (g[: 16 - 2 * 4 + 1] == 0).all()  # two layers of W=4 reach back 2 (W - 1) tokens
    with pytest.raises(ExtrapError, match="window"):
        run.model(ids, window=0)
    with pytest.raises(ExtrapError, match="window"):
        run.model(ids, window=4, return_probs=True)


# ---------------------------------------------------------------------------
# extrap erf / align / task score on hf: models (Python API and CLI)
# ---------------------------------------------------------------------------
@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXTRAP_CACHE", str(tmp_path / "cache"))


def test_erf_api_and_cli(saved, tiny_text, hf_cache, capsys):
    from extrap.erf import ErfSettings, run_erf

    folder = saved("mpt")
    row = run_erf(f"hf:{folder}", ErfSettings(length=24, segments=2, corpus=tiny_text))
    assert row.provenance["hf_path"] == str(folder) and row.trf is None and 1 <= row.grad.erf <= 23
    assert len(row.attn.per_layer_head) == 2
    rc = main(["erf", f"hf:{saved('llama')}", "--length", "24", "--segments", "2", "--corpus", tiny_text, "--json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    (r,) = rep["runs"]
    assert r["pe"] == "hf:llama/rope" and 1 <= r["grad_erf"] <= 23 and r["attn_erf"]["summary"] >= 1
    assert main(["erf", f"hf:{folder}", "--length", "24", "--corpus", tiny_text, "--threshold", "2"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("kind", ["llama", "bloom"])
def test_align_api_closed_forms(saved, tiny_text, hf_cache, kind):
    import extrap
    from extrap.align import AlignSettings, align_report, aligned_temperature
    from extrap.run import eval_stream

    run = extrap.load(f"hf:{saved(kind)}", device="cpu", corpus=tiny_text)
    stream = eval_stream(run, "validation", 200)
    rep = align_report(run.model, stream, AlignSettings(16, [32], "prop2", segments=2))
    cf = rep.lengths[0].closed_form
    assert 0 < cf.sigma_tr < 10 and 0 < cf.sigma_ex < 10 and cf.prop2 > 0
    assert rep.lengths[0].tau == cf.prop2 and rep.lengths[0].after.pmax > 0
    rep1 = align_report(run.model, stream, AlignSettings(16, [32], "prop1", segments=2)).lengths[0]
    assert rep1.closed_form.sigma_tr == cf.sigma_tr  # same layer-0 logits
    if rep1.tau is not None:  # Prop. 1 may have no valid root (ALiBi); then it says why
        assert aligned_temperature(run.model, stream, 16, 32, "prop1", segments=2) == pytest.approx(rep1.tau)
    else:
        with pytest.raises(ExtrapError, match="Prop. 1"):
            aligned_temperature(run.model, stream, 16, 32, "prop1", segments=2)
    assert run.model.temperatures() == [1.0, 1.0]


def test_align_cli(saved, tiny_text, hf_cache, capsys):
    folder = saved("llama")
    base = [
        "align",
        f"hf:{folder}",
        "--corpus",
        tiny_text,
        "--train-length",
        "16",
        "--lengths",
        "32",
        "--segments",
        "2",
        "--json",
    ]
    assert main(base + ["--mode", "pmax", "--grid", "1.0,0.8,0.6", "--no-refine"]) == 0
    rep = json.loads(capsys.readouterr().out)
    row = rep["lengths"][0]
    assert rep["mode"] == "pmax" and row["tau"] in (1.0, 0.8, 0.6) and len(row["algorithm1"]["curve"]) == 3
    assert math.isfinite(row["closed_form"]["sigma_tr"]) and row["before"]["pmax"] < rep["reference"]["pmax"]
    for mode in ("prop1", "prop2"):
        assert main(base + ["--mode", mode]) == 0
        row = json.loads(capsys.readouterr().out)["lengths"][0]
        cf = row["closed_form"]
        assert math.isfinite(cf["sigma_tr"]) and math.isfinite(cf["sigma_ex"]) and cf["prop2"] > 0
        assert row["tau"] == cf[mode] and (row["tau"] is None or row["after"]["pmax"] > 0)
    assert main(base + ["--mode", "prop3"]) == 2
    assert "argument --mode: invalid choice" in capsys.readouterr().err


def test_task_score_api_and_cli(saved, tiny_text, hf_cache, capsys):
    import extrap
    from extrap.tasks import TaskSettings, min_length, score_task

    folder = saved("llama")
    run = extrap.load(f"hf:{folder}", device="cpu")
    L = min_length("passkey", run.tokenizer) + 8
    settings = TaskSettings(
        "passkey", [L], n=2, method="rank", temperature="auto", train_length=L // 2, filler=tiny_text, buckets=2
    )
    rep = score_task(run.model, run.tokenizer, settings)
    res = rep.results[0]
    assert res.n == 2 and 0 <= res.accuracy <= 1 and 0.5 <= res.temperature <= 1.0
    assert run.model.temperatures() == [1.0, 1.0]  # restored
    rc = main(
        [
            "task",
            "score",
            f"hf:{folder}",
            "--task",
            "passkey",
            "--lengths",
            str(L),
            "--n",
            "2",
            "--corpus",
            tiny_text,
            "--temperature",
            "0.9",
            "--json",
        ]
    )
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["hf_path"] == str(folder) and rep["temperature"] == 0.9 and 0 <= rep["accuracy"] <= 1
    assert main(["task", "score", f"hf:{folder}", "--lengths", str(L), "--corpus", tiny_text]) == 2
    assert "pass --task" in capsys.readouterr().err


def test_mpt_theory(saved, capsys):
    from extrap.hf import hf_theory

    rows = hf_theory(f"hf:{saved('mpt')}", eps=[1e-3], lengths=[64])
    assert len(rows) == 4 and all(r.result.verdict == "converges" for r in rows)
    assert main(["theory", "--checkpoint", f"hf:{saved('mpt')}", "--eps", "1e-3", "--lengths", "64"]) == 0
    assert "converges" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["llama", "neox", "gpt2", "bloom", "mpt"])
def test_every_tool_on_every_causal_family(saved, tiny_text, hf_cache, kind):
    """erf, align (Algorithm 1 and Prop. 2) and task scoring each run on every causal family."""
    import extrap
    from extrap.align import AlignSettings, align_report
    from extrap.erf import ErfSettings, run_erf
    from extrap.run import eval_stream
    from extrap.tasks import TaskSettings, min_length, score_task

    path = f"hf:{saved(kind)}"
    row = run_erf(path, ErfSettings(length=24, segments=2, corpus=tiny_text))
    assert 1 <= row.grad.erf <= 23 and len(row.attn.per_layer_head) == 2
    run = extrap.load(path, device="cpu", corpus=tiny_text)
    stream = eval_stream(run, "validation", 200)
    for mode in ("pmax", "prop2"):
        settings = AlignSettings(16, [32], mode, segments=2, grid=[1.0, 0.8, 0.6], refine=False)
        tau = align_report(run.model, stream, settings).lengths[0].tau
        assert 0 < tau <= 1.0 + 1e-9 or mode == "prop2" and tau > 0
    L = min_length("passkey", run.tokenizer) + 8
    settings = TaskSettings("passkey", [L], n=2, method="rank", filler=tiny_text, buckets=2)
    res = score_task(run.model, run.tokenizer, settings).results[0]
    assert res.n == 2 and 0 <= res.accuracy <= 1
    assert run.model.temperatures() == [1.0, 1.0]  # nothing left applied


# ---------------------------------------------------------------------------
# the ExtrapLM protocol
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["llama", "gpt2", "bloom"])
def test_hf_model_implements_the_protocol(kind):
    from extrap.hf import HFModel
    from extrap.model.protocol import ExtrapLM, ModelShape, temperature

    torch.manual_seed(0)
    model = HFModel(transformers.AutoModelForCausalLM.from_config(_config(kind)).eval(), kind, f"hf:{kind}")
    assert isinstance(model, ExtrapLM) and model.scheme is None and model.bias_values() is None
    assert model.shape == ModelShape(n_layer=2, n_head=model.cfg.n_head, d_model=32, vocab_size=VOCAB, pe=f"hf:{kind}")
    ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        full = model(ids).logits
    cache = model.new_cache()  # the KV-cache step equals the full forward pass
    steps = [model.step(ids[:, :7], 0, cache)] + [model.step(ids[:, p : p + 1], p, cache) for p in range(7, 16)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-4, atol=1e-5)
    if kind == "bloom":  # hand-written attention: no rolling cache
        with pytest.raises(ExtrapError, match="rolling"):
            model.new_cache(4)
    else:  # a rolling cache of 4 tokens equals the forward pass with a window of 4 keys
        with torch.no_grad():
            windowed = model(ids, window=4).logits
        cache = model.new_cache(4)
        steps = [model.step(ids[:, :7], 0, cache)] + [model.step(ids[:, p : p + 1], p, cache) for p in range(7, 16)]
        torch.testing.assert_close(torch.cat(steps, dim=1), windowed, rtol=1e-4, atol=1e-5)
    model.set_temperature([0.9, 0.8])
    with pytest.raises(RuntimeError):
        with temperature(model, 0.5):
            assert model.temperatures() == [0.5, 0.5]
            raise RuntimeError
    assert model.temperatures() == [0.9, 0.8]
    layers = [layer for layer, _ in model.attention_probs(ids, upto_layer=0)]
    assert layers == [0]


def test_evaluate_at_a_temperature_restores_it(saved, tiny_text, hf_cache):
    """evaluate() sets τ per length through the model protocol and puts the previous τ back."""
    import extrap
    from extrap.evaluate import evaluate
    from extrap.run import eval_stream

    run = extrap.load(f"hf:{saved('llama')}", device="cpu", corpus=tiny_text)
    stream = eval_stream(run, "validation", 200)
    run.model.set_temperature(0.9)
    plain = evaluate(run.model, stream, [16, 32], "nonoverlapping", tokens=64)
    sharp = evaluate(run.model, stream, [16, 32], "nonoverlapping", tokens=64, temperature_for=lambda L: 0.5)
    assert run.model.temperatures() == [0.9] * run.model.shape.n_layer
    assert [r.temperature for r in sharp] == [0.5, 0.5]
    assert all(a.loss != b.loss for a, b in zip(plain, sharp))
