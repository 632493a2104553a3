"""The model: blockwise biased attention against a dense reference, every scheme trains."""

import math

import pytest
import torch

from extrap import positional as P
from extrap.errors import ExtrapError
from extrap.model import GPT, ModelConfig
from extrap.model.attention import dense_probs
from extrap.model.protocol import ExtrapLM, ModelShape, temperature

BIAS_SCHEMES = [
    "alibi",
    "alibi:shift=2",
    "alibi:h=3",
    "kerple-log",
    "kerple-power",
    "sandwich",
    "sandwich-smooth",
    "t5",
    "t5:bidirectional=true",
    "fire",
    "fire:L=20",
    "type1",
    "type2",
    "example1",
    "example2",
    "window:7",
    "nope",
    "-0.3*log(n)-0.01*t",
]


def dense_reference(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """Naive attention with the full (H, L, L) bias built from the scheme: the ground truth."""
    cfg, scheme = model.cfg, model.scheme
    B, L = idx.shape
    x = model.embed(idx, torch.arange(L))
    i = torch.arange(L, dtype=torch.float64).unsqueeze(1)
    t = i - torch.arange(L, dtype=torch.float64).unsqueeze(0)
    for blk in model.blocks:
        a = blk.attn
        h = blk.ln1(x)
        q, k, v = a.qkv(h).view(B, L, 3, cfg.n_head, cfg.head_dim).permute(2, 0, 3, 1, 4)
        logits = (q @ k.transpose(-1, -2)) / math.sqrt(cfg.head_dim)
        if scheme.kind == "bias" and not scheme.is_identity:
            vals = {kk: vv.double() for kk, vv in a.bias_values().items()}
            bias = scheme.bias(t.clamp_min(0), vals, i=i.expand_as(t)).float()
            logits = logits + bias.clamp_min(-1e30)
        logits = logits.masked_fill(t < 0, float("-inf"))
        y = torch.softmax(logits, -1) @ v
        x = x + a.proj(y.transpose(1, 2).reshape(B, L, -1))
        x = x + blk.mlp(blk.ln2(x))
    return model.head(model.ln_f(x))


def _randomise_bias_params(model):
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for blk in model.blocks:
            for name, p in blk.attn.bias_params.items():
                if name == "table":
                    p.copy_(torch.randn(p.shape, generator=g))


@pytest.mark.parametrize("pe", BIAS_SCHEMES)
def test_blockwise_attention_matches_dense_reference(pe):
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, attn_block=16)).eval()
    _randomise_bias_params(model)
    idx = torch.randint(0, 256, (2, 45))
    with torch.no_grad():
        got = model(idx).logits
        ref = dense_reference(model, idx)
        explicit = model(idx, return_probs=True).logits
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(explicit, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pe", ["alibi", "kerple-log", "kerple-power", "t5", "fire", "fire:L=20", "sandwich"])
def test_gradients_match_dense_reference(pe):
    """Training goes through the zero-copy Toeplitz views: every gradient, bias parameters included,
    must equal the dense reference's (FIRE with L=20 also crosses into its per-query rows)."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, attn_block=16))
    _randomise_bias_params(model)
    idx = torch.randint(0, 256, (2, 45))
    grads = []
    for forward in (lambda: model(idx).logits, lambda: dense_reference(model, idx)):
        model.zero_grad()
        forward().square().mean().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    learns_bias = any("bias_params" in n for n in grads[0])
    assert grads[0].keys() == grads[1].keys() and learns_bias == (pe not in ("alibi", "sandwich"))
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-6, msg=name)


def test_attention_probabilities_are_normalised_and_causal():
    model = GPT(ModelConfig(pe="alibi", n_layer=1, d_model=16, n_head=2, attn_block=8)).eval()
    out = model(torch.randint(0, 256, (1, 20)), return_probs=True)
    for k0, p in out.probs[0]:
        assert k0 == 0
        torch.testing.assert_close(p.sum(-1), torch.ones(p.shape[:-1]))
    full = dense_probs(out.probs[0], 20)  # (B, H, L, L)
    assert full.triu(1).abs().max() == 0


def test_window_one_has_no_nan_and_sees_only_itself():
    model = GPT(ModelConfig(pe="window:1", n_layer=1, d_model=16, n_head=2, attn_block=8)).eval()
    out = model(torch.randint(0, 256, (1, 20)), return_probs=True)
    assert torch.isfinite(out.logits).all()
    p = dense_probs(out.probs[0], 20)[0, 0]
    torch.testing.assert_close(p, torch.eye(20))


def test_inference_window_matches_a_window_scheme():
    torch.manual_seed(0)
    base = GPT(ModelConfig(pe="nope", n_layer=2, d_model=32, n_head=4, attn_block=8)).eval()
    windowed = GPT(ModelConfig(pe="window:5", n_layer=2, d_model=32, n_head=4, attn_block=8)).eval()
    windowed.load_state_dict(base.state_dict())
    idx = torch.randint(0, 256, (1, 40))
    with torch.no_grad():
        torch.testing.assert_close(base(idx, window=5).logits, windowed(idx).logits, rtol=1e-5, atol=1e-5)


def test_temperature_sharpens_attention():
    model = GPT(ModelConfig(pe="alibi", n_layer=1, d_model=16, n_head=2)).eval()
    idx = torch.randint(0, 256, (1, 30))
    pmax = lambda: model(idx, return_probs=True).probs[0][0][1].amax(-1).mean()  # noqa: E731
    base = pmax()
    model.set_temperature(0.5)
    assert pmax() > base
    with pytest.raises(ExtrapError):
        model.set_temperature(0.0)
    with pytest.raises(ExtrapError):
        model.set_temperature([1.0, 1.0])


def test_last_logits_only():
    model = GPT(ModelConfig(pe="type2", n_layer=1, d_model=16, n_head=2)).eval()
    idx = torch.randint(0, 256, (2, 30))
    with torch.no_grad():
        torch.testing.assert_close(model(idx, last=3).logits, model(idx).logits[:, -3:])


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(n_head=3, d_model=32), "does not divide"),
        (dict(n_layer=-1), "n_layer must be positive"),
        (dict(pe="nonsense"), "unknown positional scheme"),
        (dict(dropout=1.5), "dropout"),
    ],
)
def test_bad_model_config(bad, match):
    with pytest.raises(ExtrapError, match=match):
        ModelConfig(**bad)
    with pytest.raises(ExtrapError, match="unknown key"):
        ModelConfig.from_dict({"layers": 3})


ALL_SCHEMES = [n for n in P.names() if n != "formula"] + ["-2*log(n)"]


@pytest.mark.parametrize("pe", ALL_SCHEMES)
def test_every_scheme_trains_and_loss_falls(pe):
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=2, attn_block=32))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    g = torch.Generator().manual_seed(0)
    text = torch.tensor(list(b"def f(x):\n    return x + 1\n" * 40))
    losses = []
    for _ in range(25):
        starts = torch.randint(0, len(text) - 33, (8,), generator=g)
        batch = torch.stack([text[s : s + 33] for s in starts])
        x, y = batch[:, :-1], batch[:, 1:]
        positions = model.train_positions(8, 32, g, "cpu")
        logits = model(x, positions).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0], (pe, losses[0], losses[-1])


@pytest.mark.parametrize("pe,window", [("alibi", None), ("kerple-log", 24), ("type2", None)])
def test_flex_backend_matches_blocked_attention(pe, window):
    """FlexAttention's score_mod reads the same r(t) table (compiled CPU inference here)."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    torch.manual_seed(0)
    blocked = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, attn_block=32)).eval()
    flex = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, attn_backend="flex")).eval()
    flex.load_state_dict(blocked.state_dict())
    idx = torch.randint(0, 256, (1, 128))
    with torch.no_grad():
        torch.testing.assert_close(
            flex(idx, window=window).logits, blocked(idx, window=window).logits, rtol=1e-4, atol=1e-4
        )


# ---------------------------------------------------------------------------
# the ExtrapLM protocol
# ---------------------------------------------------------------------------
def test_gpt_implements_the_protocol():
    model = GPT(ModelConfig(pe="kerple-log", n_layer=2, d_model=32, n_head=4))
    assert isinstance(model, ExtrapLM)
    assert model.shape == ModelShape(n_layer=2, n_head=4, d_model=32, vocab_size=256, pe="kerple-log")
    assert model.scheme.spec == "kerple-log" and all(b.attn.scheme is model.scheme for b in model.blocks)
    values = model.bias_values()
    assert len(values) == 2 and set(values[0]) == {"r1", "r2"}
    assert GPT(ModelConfig(pe="rope", n_layer=1, d_model=16, n_head=2)).bias_values() is None
    assert not isinstance(torch.nn.Linear(2, 2), ExtrapLM)


@pytest.mark.parametrize("pe", ["alibi", "fire", "rope"])
def test_logit_probe_equals_the_softmax_input_by_hand(pe):
    """Layer 1 of a tiny model at τ = 0.5: (q k / sqrt(Dh) + r(i - j)) / τ, -inf above the diagonal."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, attn_block=8)).eval()
    idx = torch.randint(0, 256, (2, 21))
    B, L, H, Dh = 2, 21, 4, 8
    model.set_temperature([1.0, 0.5])
    with torch.no_grad():
        pos = torch.arange(L)
        h, _ = model.blocks[0](model.embed(idx, pos), pos)
        a = model.blocks[1].attn
        q, k, _v = a.qkv(model.blocks[1].ln1(h)).view(B, L, 3, H, Dh).permute(2, 0, 3, 1, 4)
        if model.scheme.rotates:
            q, k = model.scheme.rotate(q, k, pos)
        manual = q @ k.transpose(-1, -2) / math.sqrt(Dh)
        if model.scheme.adds_bias:
            i = pos[:, None].double()
            t = (i - pos[None].double()).clamp_min(0)
            vals = {n: v.double() for n, v in a.bias_values().items()}
            manual = manual + model.scheme.bias(t, vals, i=i.expand_as(t)).float()
        manual = (manual / 0.5).masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
        blocks = model.layer_logits(idx, 1)
        got = torch.cat([torch.nn.functional.pad(b, (0, L - b.shape[-1]), value=-math.inf) for b in blocks], dim=2)
        probs = dense_probs(model(idx, return_probs=True).probs[1], L)
    assert len(blocks) > 1  # query blocks of attn_block rows
    low = torch.ones(L, L, dtype=torch.bool).tril()
    torch.testing.assert_close(got[..., low], manual[..., low], rtol=1e-5, atol=1e-5)
    assert torch.isinf(got[..., ~low]).all()
    torch.testing.assert_close(torch.softmax(got, -1), probs, rtol=1e-5, atol=1e-6)


def test_attention_probs_stream_layer_by_layer():
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="alibi", n_layer=3, d_model=32, n_head=4, attn_block=8)).eval()
    idx = torch.randint(0, 256, (1, 20))
    with torch.no_grad():
        full = model(idx, return_probs=True).probs
    stream = model.attention_probs(idx, upto_layer=1)
    layer, blocks = next(stream)
    assert layer == 0 and all(torch.equal(p, q) for (_, p), (_, q) in zip(blocks, full[0]))
    assert [layer for layer, _ in stream] == [1]  # stops after upto_layer
    with pytest.raises(ExtrapError, match="layer"):
        list(model.attention_probs(idx, upto_layer=3))


def test_temperature_context_restores_per_layer_values_even_when_the_body_raises():
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=16, n_head=2))
    model.set_temperature([0.9, 0.8])
    with pytest.raises(RuntimeError, match="boom"):
        with temperature(model, 0.5):
            assert model.temperatures() == [0.5, 0.5]
            raise RuntimeError("boom")
    assert model.temperatures() == pytest.approx([0.9, 0.8])
    with temperature(model):  # None: leave τ, but still restore what the body changes
        model.set_temperature(0.7)
    assert model.temperatures() == pytest.approx([0.9, 0.8])
    with pytest.raises(ExtrapError, match="2 values"):
        with temperature(model, [0.5]):
            pass
    assert model.temperatures() == pytest.approx([0.9, 0.8])
