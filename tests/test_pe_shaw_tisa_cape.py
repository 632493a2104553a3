"""The survey's added bias RPEs: Shaw et al. 2018 (shaw), TISA (tisa), CAPE 2024 (cape-ctx).

Hand-worked values, the content path against loop references written from the papers' equations,
training and evaluation, checkpoints, theory rows and hostile options.
"""

import json
import math

import pytest
import torch

import extrap
from extrap import positional
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.model import GPT, ModelConfig
from extrap.model.attention import BiasContext
from extrap.model.content import content_block
from extrap.study.trained import trained_theory
from extrap.theory import analyse, analyse_checkpoint, receptive_field
from extrap.train import build_configs, train

NEW = ("shaw:k=4", "tisa:kernels=3", "cape-ctx:base=kerple-log,hidden=8")


# ---------------------------------------------------------------------------
# TISA: r(t) = Σ_k a_k exp(-|b_k| (t - c_k)^2)
# ---------------------------------------------------------------------------
def _tisa_values():
    # one head, two kernels: a = (0.5, -0.2), b = (0.1, -2) (|b| = 2), c = (1, 3)
    f64 = torch.float64
    return {
        "a": torch.tensor([[0.5, -0.2]], dtype=f64),
        "b": torch.tensor([[0.1, -2.0]], dtype=f64),
        "c": torch.tensor([[1.0, 3.0]], dtype=f64),
    }


def test_tisa_bias_matches_the_closed_form_on_every_backend():
    pe = positional.get("tisa:kernels=2")
    vals = _tisa_values()
    t = torch.tensor([0.0, 1.0, 3.0, 10.0], dtype=torch.float64)
    # by hand: t=0: 0.5 e^-0.1 - 0.2 e^-18; t=1: 0.5 - 0.2 e^-8; t=3: 0.5 e^-0.4 - 0.2; t=10: 0.5 e^-8.1 - 0.2 e^-98
    want = [
        0.5 * math.exp(-0.1) - 0.2 * math.exp(-18),
        0.5 - 0.2 * math.exp(-8),
        0.5 * math.exp(-0.4) - 0.2,
        0.5 * math.exp(-8.1) - 0.2 * math.exp(-98),
    ]
    assert pe.bias(t, vals)[0].tolist() == pytest.approx(want, rel=1e-12)
    for x, w in zip(t.tolist(), want):
        assert float(pe.scalar(x, 0, vals)) == pytest.approx(w, rel=1e-12)
        assert float(pe.symbolic(0, vals).subs(positional.T, x)) == pytest.approx(w, rel=1e-12)
    assert pe.is_toeplitz and pe.learned and positional.get("tisa").params(4)[0].init(4).shape == (4, 5)


def test_tisa_diverges_by_the_nth_term_test_with_linear_dilution():
    (row,) = analyse("tisa:kernels=2", 1, _tisa_values())
    assert row.verdict == "diverges" and row.test == "nth-term"
    assert "r(t) -> 0" in row.explanation and "do not vanish" in row.explanation
    assert row.growth == "S(j) ~ 1*j"
    # S(L) ~ L + const: the dilution S(16384)/S(512) is about 32
    assert row.dilution["16384"] == pytest.approx(16384 / 512, rel=0.01)


# ---------------------------------------------------------------------------
# Shaw et al.: logits q_i·(k_j + a^K_r)ᵀ/√Dh, outputs Σ_j α_ij (v_j + a^V_r), r = clip(j - i, -K, K)
# ---------------------------------------------------------------------------
def _ctx(pe, values, L):
    return BiasContext(positional.get(pe), values, torch.arange(L))


def test_shaw_clips_at_k_logits_by_hand():
    # B = H = 1, Dh = 2, L = 4, K = 1: embedding 0 for t = 0, embedding 1 for every t >= 1
    q = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]]])
    k = torch.tensor([[[[1.0, 1.0], [0.0, 2.0], [1.0, 0.0], [3.0, 1.0]]]])
    aK = torch.tensor([[[0.5, 0.0], [0.0, -1.0]]])  # (1, K + 1, Dh)
    _, s = content_block(
        q, k, None, _ctx("shaw:k=1,values=0", {"aK": aK}, 4), 1.0, torch.arange(4), torch.arange(4), "logits"
    )
    r2 = math.sqrt(2)
    # row 3 (q = (2, 0)): t = 3, 2, 1 use a_1 = (0, -1): q·a_1 = 0; t = 0 uses a_0: q·a_0 = 1
    assert s[0, 0, 3].tolist() == pytest.approx([2 / r2, 0 / r2, 2 / r2, (6 + 1) / r2])
    # row 2 (q = (1, 1)): t = 2, 1 -> q·a_1 = -1; t = 0 -> q·a_0 = 0.5
    assert s[0, 0, 2, :3].tolist() == pytest.approx([(2 - 1) / r2, (2 - 1) / r2, (1 + 0.5) / r2])
    assert s[0, 0, 0, 1:].max() < -1e29  # future keys masked


def _shaw_reference(q, k, v, aK, aV, K):
    """Shaw et al. Eqs. 3-4 with loops over i, j (causal)."""
    B, H, L, D = q.shape
    out = torch.zeros_like(q)
    for i in range(L):
        idx = [min(i - j, K) for j in range(i + 1)]
        e = torch.stack([(q[:, :, i] * (k[:, :, j] + aK[idx[j]])).sum(-1) for j in range(i + 1)], -1) / math.sqrt(D)
        a = torch.softmax(e, -1)
        out[:, :, i] = sum(a[..., j : j + 1] * (v[:, :, j] + aV[idx[j]]) for j in range(i + 1))
    return out


@pytest.mark.parametrize("K,block", [(2, 4), (12, 4), (1, 9)])
def test_shaw_blocks_match_the_loop_reference_with_values(K, block):
    """Consecutive positions (the diagonal path) and per-sequence ones (the gathered path) against loops."""
    torch.manual_seed(0)
    B, H, L, D = 2, 3, 9, 4
    q, k, v = (torch.randn(B, H, L, D, dtype=torch.float64) for _ in range(3))
    pe = positional.get(f"shaw:k={K}")
    vals = pe.init_values(H, D)
    assert vals["aK"].shape == (1, K + 1, D)  # shared by heads, K + 1 embeddings (causal)
    from extrap.model.content import content_attention

    want = _shaw_reference(q, k, v, vals["aK"][0], vals["aV"][0], K)
    for positions in (torch.arange(L), torch.arange(L).expand(B, L)):
        out, _ = content_attention(q, k, v, BiasContext(pe, vals, positions), 1.0, block=block)
        assert torch.allclose(out, want, atol=1e-12)


# ---------------------------------------------------------------------------
# CAPE: s + b + f(s, b), f: 2H -> hidden -> H over all heads at once
# ---------------------------------------------------------------------------
def _copy(dst: GPT, src: GPT):
    own = {k: v for k, v in src.state_dict().items() if "bias_params" not in k}
    dst.load_state_dict(own, strict=False)


@pytest.mark.parametrize("base", ["alibi", "kerple-log", "fire"])
def test_cape_with_f_zero_is_its_base_rpe(base):
    torch.manual_seed(0)
    ref = GPT(ModelConfig(pe=base, n_layer=2, d_model=32, n_head=4, attn_block=8))
    cape = GPT(ModelConfig(pe=f"cape-ctx:base={base},hidden=6", n_layer=2, d_model=32, n_head=4, attn_block=8))
    _copy(cape, ref)
    with torch.no_grad():
        for blk, rblk in zip(cape.blocks, ref.blocks):
            for name, p in rblk.attn.bias_params.items():
                blk.attn.bias_params[name].copy_(p)
            blk.attn.bias_params["f_w2"].zero_()
            blk.attn.bias_params["f_b2"].zero_()
    x = torch.randint(0, 256, (2, 21))
    assert torch.allclose(cape(x).logits, ref(x).logits, atol=1e-5)


def test_cape_keeps_the_keys_a_window_base_hides():
    pe = positional.get("cape-ctx:base=window,hidden=3")  # window W = 512: r = -inf from t = 512 on
    vals = {k: v.float() for k, v in pe.init_values(2).items()}
    torch.manual_seed(2)
    q, k = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 600, 4)
    ctx = BiasContext(pe, vals, torch.arange(600))
    _, p = content_block(q, k, None, ctx, 1.0, torch.tensor([599]), torch.arange(600), "probs")
    assert bool(torch.isfinite(p).all()) and float(p[..., :88].abs().max()) == 0.0  # t = 599 - j >= 512
    assert p[..., 88:].sum(-1).sub(1).abs().max() < 1e-5 and float(p[..., 88:].min()) > 0


def test_cape_f_sees_every_head_of_the_scaled_logits():
    torch.manual_seed(1)
    H, D, L = 2, 4, 5
    pe = positional.get("cape-ctx:base=alibi,hidden=3")
    vals = {k: v.float() for k, v in pe.init_values(H).items()}
    q, k = torch.randn(1, H, L, D), torch.randn(1, H, L, D)
    _, s = content_block(
        q, k, None, BiasContext(pe, vals, torch.arange(L)), 1.0, torch.arange(L), torch.arange(L), "logits"
    )
    i, j = 4, 1
    raw = [float(q[0, h, i] @ k[0, h, j]) / math.sqrt(D) for h in range(H)]
    b = [-float(vals["slope"][h]) * (i - j) for h in range(H)]
    x = torch.tensor(raw + b)  # [s_1..s_H, b_1..b_H], as the authors concatenate them
    hid = torch.nn.functional.leaky_relu(vals["f_w1"] @ x + vals["f_b1"], 0.01)
    f = vals["f_w2"] @ hid + vals["f_b2"]
    want = [raw[h] + b[h] + float(f[h]) for h in range(H)]
    assert s[0, :, i, j].tolist() == pytest.approx(want, abs=1e-5)


# ---------------------------------------------------------------------------
# the model: gradients, blocks, KV cache, probes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("pe", NEW)
def test_gradients_reach_every_new_parameter_and_blocks_agree(pe):
    torch.manual_seed(0)
    m = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, attn_block=5))
    x = torch.randint(0, 256, (2, 17))
    out = m(x).logits
    out.square().mean().backward()
    for name, p in m.named_parameters():
        if "bias_params" in name:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    with torch.no_grad():
        m.cfg.attn_block = 256
        assert torch.allclose(m(x).logits, out, atol=1e-5)
        cache = m.new_cache()
        steps = torch.cat([m.step(x[:, :9], 0, cache), m.step(x[:, 9:], 9, cache)], dim=1)
        assert torch.allclose(steps, out, atol=1e-5)
        (_, rows), *_ = list(m.attention_rows(x[:1], [3, 16]))
        (_, blocks), *_ = list(m.attention_probs(x[:1], upto_layer=0))
        assert torch.allclose(rows[0, :, 1], blocks[-1][1][0, :, -1], atol=1e-6)
        assert torch.allclose(rows.sum(-1), torch.ones(1, 4, 2), atol=1e-5)


@pytest.mark.parametrize("pe", [*NEW, "cape-ctx:base=fire,hidden=4"])
def test_per_sequence_positions_and_a_rolling_window_cache(pe):
    torch.manual_seed(0)
    m = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, positions="randomized:max=64")).eval()
    pos = m.train_positions(3, 16, torch.Generator().manual_seed(0), "cpu")  # (3, 16), sorted, with gaps
    x = torch.randint(0, 256, (3, 16))
    with torch.no_grad():
        each = torch.cat([m(x[b : b + 1], pos[b]).logits for b in range(3)])
        assert torch.allclose(m(x, pos).logits, each, atol=1e-5)
        full, cache = m(x, window=5).logits, m.new_cache(window=5)
        steps = torch.cat([m.step(x[:, i : i + 1], i, cache) for i in range(16)], dim=1)
        assert torch.allclose(steps, full, atol=1e-5)


@pytest.mark.parametrize("pe", NEW)
def test_trains_evaluates_and_round_trips_its_checkpoint(pe, tmp_path, tiny_text, capsys):
    m, t = build_configs(pe, "smoke", overrides=dict(steps=3, corpus=tiny_text, train_length=32, save_every=3))
    run = tmp_path / "run"
    train(run, m, t, progress=False)
    model, _, cfg = extrap.load(run)
    assert cfg.model.pe == pe
    init = GPT(ModelConfig(**{**cfg.model.to_dict()}))
    moved = [not torch.equal(p, init.state_dict()[n]) for n, p in model.state_dict().items() if "bias_params" in n]
    assert moved and any(moved)  # trained, and loaded from the checkpoint rather than initialised
    again, _, _ = extrap.load(run)
    x = torch.randint(0, cfg.model.vocab_size, (1, 40))
    assert torch.equal(model(x).logits, again(x).logits)
    for protocol in ("nonoverlapping", "sliding", "last-token"):
        argv = ["eval", str(run), "--lengths", "32,64", "--protocol", protocol, "--tokens", "128", "--json"]
        if protocol == "last-token":
            argv = [a for a in argv if a not in ("--tokens", "128")] + ["--targets", "4"]
        assert main(argv) == 0
        out = json.loads(capsys.readouterr().out)
        assert [r["length"] for r in out["results"]] == [32, 64]
        assert all(math.isfinite(r["loss"]) for r in out["results"])


# ---------------------------------------------------------------------------
# theory
# ---------------------------------------------------------------------------
def test_theory_rows_of_shaw_and_cape():
    (row,) = analyse("shaw", 4)
    assert row.verdict == "not-applicable" and "q_i·a_r" in row.explanation
    cape, base = analyse("cape-ctx:base=kerple-log", 4), analyse("kerple-log", 4)
    assert [r.verdict for r in cape] == [r.verdict for r in base] == ["converges"] * 4
    assert [r.series_sum for r in cape] == [r.series_sum for r in base] and [r.trf for r in cape] == [
        r.trf for r in base
    ]
    assert all(r.pe == "cape-ctx:base=kerple-log" and "depends on the content" in r.explanation for r in cape)
    (fire,) = analyse("cape-ctx:base=fire", 4)
    assert fire.verdict == "not-applicable" and "query position" in fire.explanation


def test_theory_reads_trained_tisa_kernels_per_layer(tmp_path, tiny_text, capsys):
    m, t = build_configs("tisa", "smoke", overrides=dict(steps=2, corpus=tiny_text, train_length=32))
    train(tmp_path / "r", m, t, progress=False)
    res = analyse_checkpoint(tmp_path / "r", lengths=(1024,))
    assert len(res.layers) == m.n_layer
    for layer in res.layers:
        assert len(layer.heads) == m.n_head and {r.verdict for r in layer.heads} == {"diverges"}
        assert {r.test for r in layer.heads} == {"nth-term"}
    assert main(["theory", "--checkpoint", str(tmp_path / "r"), "--json"]) == 0
    assert "nth-term" in capsys.readouterr().out


def test_theory_of_trained_cape_reads_its_base_parameters(tmp_path, tiny_text):
    pe = "cape-ctx:base=kerple-log,hidden=4"
    m, t = build_configs(pe, "smoke", overrides=dict(steps=2, corpus=tiny_text, train_length=32))
    train(tmp_path / "r", m, t, progress=False)
    res = analyse_checkpoint(tmp_path / "r", lengths=())
    model, _, _ = extrap.load(tmp_path / "r")
    for layer, blk in zip(res.layers, model.blocks):
        raw = {k: blk.attn.bias_params[k].detach().double() for k in ("r1", "r2")}  # stored, softplus in float64
        want = analyse("kerple-log", m.n_head, positional.get("kerple-log").values(raw, m.n_head), lengths=())
        assert [r.series_sum for r in layer.heads] == [r.series_sum for r in want]
        assert all(r.pe == pe and "depends on the content" in r.explanation for r in layer.heads)
    # the study's trained theory (as for KERPLE): the TRF of b over every layer and head
    study = trained_theory(tmp_path / "r", pe, (1e-3,), [1024], 32)
    base = [
        positional.get("kerple-log").values({k: b.attn.bias_params[k].detach().double() for k in ("r1", "r2")}, 4)
        for b in model.blocks
    ]
    assert study.trf == receptive_field("kerple-log", base, num_heads=m.n_head).value is not None
    assert receptive_field(pe, base, num_heads=m.n_head).pe == pe


def test_theory_plots_draw_tisa_and_cape_and_skip_shaw(tmp_path):
    assert main(["theory", "shaw", "cape-ctx", "tisa", "--heads", "2", "--plot", str(tmp_path)]) == 0
    names = {p.name for p in tmp_path.iterdir()}
    assert {"heatmap_tisa_h0.png", "heatmap_cape-ctx_h1.png", "trf_curves.png"} <= names
    assert not any("shaw" in n for n in names)


# ---------------------------------------------------------------------------
# hostile options
# ---------------------------------------------------------------------------
BAD = [
    ("shaw:k=0", "must be >= 1"),
    ("shaw:k=-3", "must be >= 1"),
    ("shaw:values=maybe", "not a valid bool"),
    ("tisa:kernels=0", "must be >= 1"),
    ("tisa:kernels=1.5", "not a valid int"),
    ("cape-ctx:hidden=-4", "must be >= 1"),
    ("cape-ctx:hidden=0", "must be >= 1"),
    ("cape-ctx:base=bogus", "unknown base"),
    ("cape-ctx:base=shaw", "unknown base"),
    ("cape-ctx:base=cape-ctx", "unknown base"),
    ("cape-ctx:base=formula", "unknown base"),
]


@pytest.mark.parametrize("spec,needle", BAD)
def test_bad_options_are_one_line_and_status_2(spec, needle, tmp_path, capsys):
    with pytest.raises(ExtrapError, match=needle):
        positional.get(spec)
    assert main(["theory", spec]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert main(["train", "--pe", spec, "--preset", "smoke", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()
