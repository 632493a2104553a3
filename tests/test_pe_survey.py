"""The survey's added encodings (002): complex word order, FLOATER, BiPE and CoPE.

Hand values for each formula, then every scheme through training, the three evaluation protocols,
gradients, checkpoints and the KV cache, and the one-line refusals.
"""

import math
import sys

import pytest
import torch
from safetensors.torch import load_file

import extrap
from extrap import positional
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.evaluate import evaluate
from extrap.model import GPT, ModelConfig
from extrap.model.attention import BiasContext, bias_block
from extrap.model.pe_layers import CopeAttention, FloaterFlow
from extrap.positional.bipe import bilevel_ids
from extrap.positional.complex_order import complex_order_embedding
from extrap.positional.cope import cope_logits, cope_positions
from extrap.positional.floater import floater_solve
from extrap.theory import not_applicable_reason
from extrap.train import build_configs, train

SURVEY = ("complex", "floater", "bipe", "bipe:base=rope", "cope:npos=16")
PE_PARAMS = {"complex": "pe_module.omega", "floater": "pe_module.p0", "bipe": "pe_module.table.weight"}


def _tiny(pe, **kw):
    torch.manual_seed(0)
    return GPT(ModelConfig(pe=pe, n_layer=2, d_model=16, n_head=2, attn_block=8, **kw)).eval()


# ---- the formulas, by hand --------------------------------------------------------------------
def test_complex_embedding_real_and_imaginary_parts_at_two_positions():
    r, w, th = torch.tensor([[2.0, -1.0]]), torch.tensor([[0.5, 0.1]]), torch.tensor([[0.25, 0.0]])
    for pos in (1.0, 3.0):
        out = complex_order_embedding(r, w, th, torch.tensor([pos]))[0]
        re = [2 * math.cos(0.5 * pos + 0.25), -math.cos(0.1 * pos)]  # r cos(ω pos + θ)
        im = [2 * math.sin(0.5 * pos + 0.25), -math.sin(0.1 * pos)]  # r sin(ω pos + θ)
        assert out.tolist() == pytest.approx(re + im, abs=1e-6)
    # in the model: amplitude = token row (d/2 wide), positions from 1 as the authors' code
    m = _tiny("complex")
    assert m.tok.weight.shape == (256, 8)
    idx = torch.tensor([[7, 7]])
    x = m.embed(idx)
    r, w = m.tok.weight[7], m.pe_module.omega[7]
    assert torch.allclose(x[0, 1], torch.cat([r * torch.cos(2 * w), r * torch.sin(2 * w)]), atol=1e-6)
    assert not torch.allclose(x[0, 0], x[0, 1])  # the same word at two positions differs in phase only
    assert torch.allclose(x[0, 0, :8] ** 2 + x[0, 0, 8:] ** 2, x[0, 1, :8] ** 2 + x[0, 1, 8:] ** 2, atol=1e-6)


def test_floater_linear_dynamics_match_the_matrix_exponential():
    torch.manual_seed(1)
    A = 0.5 * torch.randn(4, 4, dtype=torch.float64)
    h = torch.nn.Linear(4, 4, bias=False).double()
    h.weight.data = A.clone()
    p_s = torch.randn(2, 4, dtype=torch.float64)
    t = torch.arange(3, 12, dtype=torch.float64) * 0.1  # s = 0.3
    p = floater_solve(lambda tau, x: h(x), p_s, t, 0.1 / 5)
    for k, tk in enumerate(t):
        exact = p_s @ torch.linalg.matrix_exp(A * (tk - t[0])).T  # p(t) = expm(A (t - s)) p(s)
        assert torch.allclose(p[k], exact, atol=1e-8)


def test_floater_cache_extends_the_solution_and_training_solves_afresh():
    flow = FloaterFlow(positional.get("floater"), n_layer=2, d_model=8)
    with torch.no_grad():
        short, long = flow.table(5).clone(), flow.table(12)
        fresh = flow.solve(flow.p0, 0, 12)
    assert torch.allclose(long, fresh, atol=1e-5) and torch.equal(long[:5], short)
    assert torch.equal(long[0], flow.p0)  # p(0) is the learned initial value
    grads = torch.autograd.grad(flow.table(6).sum(), [flow.p0, flow.h.w1])
    assert all(g.abs().sum() > 0 for g in grads)
    assert not any("cached" in k for k in flow.state_dict())


def test_bipe_segment_ids_and_intra_positions_of_a_byte_string():
    idx = torch.tensor([list(b"ab\ncd\n\nx.y")])
    intra, seg = bilevel_ids(idx, b"\n")
    assert seg.tolist() == [[0, 0, 0, 1, 1, 1, 2, 3, 3, 3]]  # a newline closes its own segment
    assert intra.tolist() == [[0, 1, 2, 0, 1, 2, 0, 0, 1, 2]]
    intra, seg = bilevel_ids(idx, b".\n")
    assert seg.tolist() == [[0, 0, 0, 1, 1, 1, 2, 3, 3, 4]] and intra.tolist()[0][-2:] == [1, 0]


def test_bipe_alibi_is_the_registry_alibi_at_segment_distances_times_96():
    inter = positional.get("bipe").inter
    assert inter.name == "alibi"
    vals = inter.init_values(2)
    assert vals["slope"].tolist() == pytest.approx([96 * s for s in positional.alibi_slopes(2)])
    seg = torch.tensor([[0, 0, 1, 1, 3]])
    ctx = BiasContext(inter, vals, torch.arange(5), segments=seg)
    b = bias_block(ctx, 0, 5, 0, 5, torch.float64)  # (B, H, 5, 5)
    for i in range(5):
        for j in range(5):
            want = -vals["slope"] * (seg[0, i] - seg[0, j]) if j <= i else torch.full((2,), -1e30)
            assert b[0, :, i, j].tolist() == pytest.approx(want.tolist()), (i, j)  # j > i: masked


def test_cope_positions_count_open_gates_and_interpolate():
    L = 6
    gates = torch.ones(L, L).tril()  # every gate open, masked keys 0
    p = cope_positions(gates)
    for i in range(L):
        for j in range(i + 1):
            assert p[i, j] == i - j + 1
    q, emb = torch.ones(1, 1), torch.tensor([[0.0, 1.0, 4.0, 9.0]])  # q·e[k] = k²
    got = cope_logits(q, emb, torch.tensor([[0.0, 1.5, 2.25, 7.0]]))
    assert got[0].tolist() == pytest.approx([0.0, 2.5, 4 + 0.25 * 5, 9.0])  # clamped at npos - 1 = 3


def test_cope_attention_blockwise_matches_the_papers_dense_listing():
    torch.manual_seed(2)
    B, H, L, D, npos = 2, 2, 11, 4, 5
    q, k, v = (torch.randn(B, H, L, D) for _ in range(3))
    layer = CopeAttention(positional.get(f"cope:{npos}"), D)
    layer.emb.data = torch.randn(D, npos)
    for window in (None, 4):
        # the paper's listing, with an L x L mask (causal, and the window's)
        mask = torch.full((L, L), -math.inf).triu(1)
        if window:
            mask = mask + torch.full((L, L), -math.inf).tril(-window)
        s = q @ k.transpose(-1, -2) / math.sqrt(D) + mask
        pos = torch.sigmoid(s).flip(-1).cumsum(-1).flip(-1).clamp(max=npos - 1)
        qe = q @ layer.emb
        lo, hi = pos.floor().long(), pos.ceil().long()
        w = pos - pos.floor()
        ref = torch.softmax(s + qe.gather(-1, hi) * w + qe.gather(-1, lo) * (1 - w), -1) @ v
        for block in (3, 64):
            out, _ = layer(q, k, v, torch.arange(L), window=window, block=block)
            assert torch.allclose(out, ref, atol=1e-5), (window, block)


# ---- the model --------------------------------------------------------------------------------
@pytest.mark.parametrize("pe", SURVEY)
def test_future_tokens_do_not_change_earlier_logits(pe):
    m = _tiny(pe)
    x = torch.tensor([list(b"def f(x):\n    return x\n\nprint")])
    y = x.clone()
    y[0, 12:] = torch.tensor(list(b"\n\n\n\n\nab\nc\n\nd\n\n\n\n\n\n"))[: y.shape[1] - 12]
    with torch.no_grad():
        a, b = m(x).logits, m(y).logits
    assert torch.allclose(a[:, :12], b[:, :12], atol=1e-5) and not torch.allclose(a[:, 12:], b[:, 12:])


@pytest.mark.parametrize("pe", ["complex", "floater", "cope:npos=16"])
def test_kv_cache_streaming_matches_the_full_forward(pe):
    m = _tiny(pe)
    x = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = m(x).logits
        cache = m.new_cache()
        parts = [m.step(x[:, s : s + 5], s, cache) for s in range(0, 21, 5)]
        assert torch.allclose(torch.cat(parts, 1), full, atol=1e-4)
        win = m.new_cache(window=4)  # a rolling cache equals the windowed forward
        parts = [m.step(x[:, s : s + 3], s, win) for s in range(0, 21, 3)]
        assert torch.allclose(torch.cat(parts, 1), m(x, window=4).logits, atol=1e-4)


def test_bipe_refuses_the_kv_cache_in_one_line():
    with pytest.raises(ExtrapError, match="segment ids depend on the whole prefix") as e:
        _tiny("bipe").new_cache()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("pe", SURVEY)
def test_probes_run(pe):
    m = _tiny(pe)
    x = torch.randint(0, 256, (1, 19), generator=torch.Generator().manual_seed(4))
    layers = list(m.attention_probs(x))
    assert len(layers) == 2
    rows = dict(m.attention_rows(x, [0, 18]))[1]  # (1, H, 2, L), each row sums to 1
    assert torch.allclose(rows.sum(-1), torch.ones(1, 2, 2), atol=1e-5)
    assert all(b.isfinite().any() for b in m.layer_logits(x, 1))


@pytest.mark.parametrize("pe", SURVEY)
def test_not_applicable_in_theory_with_its_own_reason(pe):
    reason = not_applicable_reason(positional.get(pe))
    assert reason and "\n" not in reason and pe.split(":")[0] in reason.lower()
    res = extrap.theory.analyse(pe)
    assert res[0].verdict == "not-applicable"


# ---- training, evaluation, checkpoints ---------------------------------------------------------
@pytest.mark.parametrize("pe", ["complex", "floater", "bipe", "cope:npos=16"])
def test_smoke_training_evaluation_gradients_and_checkpoint(pe, tmp_path, tiny_text, capsys):
    m_cfg, t_cfg = build_configs(pe, "smoke", overrides=dict(steps=3, corpus=tiny_text, train_length=32))
    m_cfg.n_layer = 1
    train(tmp_path / "r", m_cfg, t_cfg, progress=False)
    model, tok, cfg = extrap.load(tmp_path / "r")
    stream = torch.tensor(tok.encode("import os\nx = 1.0\n" * 40))
    for protocol in ("nonoverlapping", "sliding", "last-token"):
        res = evaluate(model, stream, [16, 48], protocol, tokens=96, stride=16, targets=4)
        assert all(math.isfinite(r.loss) for r in res), protocol
    # checkpoint: every weight (the scheme's own included) is in the file and loads back exactly
    ckpt = next((tmp_path / "r" / "checkpoints").iterdir()) / "model.safetensors"
    saved = load_file(ckpt)
    assert set(saved) == set(model.state_dict())
    fresh = GPT(cfg.model)
    fresh.load_state_dict(saved)
    ids = stream[None, :40]
    assert torch.equal(fresh.eval()(ids).logits, model(ids).logits)
    name = PE_PARAMS.get(pe, "blocks.0.attn.pe_layer.emb")
    assert not torch.equal(saved[name], GPT(cfg.model).state_dict()[name])  # training moved it
    # the CLI: a windowed evaluation streams through a KV cache, which BiPE refuses in one line
    capsys.readouterr()
    (tmp_path / "f.py").write_text("import os\nx = 1.0\n" * 20)
    rc = main(["eval", str(tmp_path / "r"), "--file", str(tmp_path / "f.py"), "--window", "8", "--json"])
    err = capsys.readouterr().err.strip()
    if pe == "bipe":
        assert rc == 2 and "segment ids depend on the whole prefix" in err and len(err.splitlines()) == 1
    else:
        assert rc == 0, err
    # gradients reach the scheme's own parameters
    model.train()
    model(ids).logits.logsumexp(-1).mean().backward()
    assert dict(model.named_parameters())[name].grad.abs().sum() > 0


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("cope:0", "npos=0 is invalid"),
        ("cope:npos=-3", "is invalid"),
        ("bipe:base=t5", "must be alibi or rope"),
        ("bipe:segment=comma", "must be newline or sentence"),
        ("bipe:max_positions=-2", "is invalid"),
        ("bipe:intra=rotary", "must be learned or sinusoidal"),
        ("bipe:base=rope,slope_scale=2", "only applies with base=alibi"),
        ("floater:dt=0", "is invalid"),
        ("floater:substeps=-1", "is invalid"),
        ("complex:base=0.5", "is invalid"),
    ],
)
def test_bad_options_are_one_line_and_status_2(spec, needle, tmp_path, capsys):
    assert main(["train", "--pe", spec, "--preset", "smoke", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_floater_without_torchdiffeq_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchdiffeq", None)  # import torchdiffeq -> ImportError
    with pytest.raises(ExtrapError, match=r"extrap\[floater\]"):
        _tiny("floater")
    assert main(["train", "--pe", "floater", "--preset", "smoke", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "pip install 'extrap[floater]'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()
    assert positional.get("floater").name == "floater"  # the registry itself does not need it


def test_complex_refuses_tied_embeddings_and_odd_widths_in_one_line():
    with pytest.raises(ExtrapError, match="tied embeddings are not available"):
        GPT(ModelConfig(pe="complex", n_layer=1, d_model=16, n_head=2, tie_embeddings=True))
    with pytest.raises(ExtrapError, match="d_model must be even"):
        GPT(ModelConfig(pe="complex", n_layer=1, d_model=15, n_head=3))
    with pytest.raises(ExtrapError, match="positions must be >= 0"):
        _tiny("floater")(torch.zeros(1, 3, dtype=torch.long), positions=torch.tensor([-1, 0, 1]))
