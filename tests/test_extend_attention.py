"""Blockwise attention under every extension method: a dense reference built here, no-op settings that give
plain RoPE bit for bit, and streaming through the sinks cache equal to the whole blockwise pass."""

import math

import pytest
import torch

from extrap import positional
from extrap.evaluate.streaming import stream_nll, token_nll
from extrap.extend import extend_model, extended_attention, parse, plain_rotate
from extrap.model.gpt import GPT, ModelConfig
from extrap.positional.rotation import apply_rotary

L_TR = 12
SPECS = [
    "sinks:n=2,window=5",
    "lm-infinite:global=2,local=5",
    "self-extend:group=2,window=4",
    "self-extend:group=3,window=4",
    "dca:chunk=7,local=2",
    "dca:chunk=8,local=5",
    "rerope:window=3",
    "leaky-rerope:window=3,k=2",
    "string:shift=4,local=1",
]


def _dense(method, q, k, v, scale, rot_q):
    """softmax((R(d_ij) q_i)·k_j · scale) v row by row, d from the method's map; rot_q(x, d) rotates x by d."""
    B, H, N, D = q.shape
    i = torch.arange(N)
    d = method.distance(i, i)
    out = torch.zeros_like(q)
    for r in range(N):
        seen = ~d[r].isnan()
        pos = d[r][seen]
        qr = rot_q(q[:, :, r : r + 1].expand(B, H, len(pos), D), pos)
        s = (qr * k[:, :, : len(seen)][:, :, seen]).sum(-1) * scale
        out[:, :, r] = torch.softmax(s, -1).unsqueeze(-2).matmul(v[:, :, seen]).squeeze(-2)
    return out


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("pe", ["rope", "xpos"])
def test_blockwise_equals_dense_reference(spec, pe):
    g = torch.Generator().manual_seed(1)
    B, H, N, D = 2, 2, 40, 8
    q, k, v = (torch.randn(B, H, N, D, generator=g, dtype=torch.float64) for _ in range(3))
    scheme, method = positional.get(pe), parse(spec, L_TR)
    inv, _ = scheme.frequencies(D, dtype=torch.float64)
    if pe == "rope":
        rot_q = lambda x, pos: apply_rotary(x, pos, inv)  # noqa: E731
    else:  # xPos: the query turned by d and scaled by ζ^(d/scale_base) (Sun et al. 2023, Eq. 11-12)
        zeta = (torch.arange(0, D, 2, dtype=torch.float64) / D + 0.4) / 1.4
        rot_q = lambda x, pos: apply_rotary(x, pos, inv) * torch.cat([zeta, zeta]) ** (pos[:, None] / 512)  # noqa: E731
    want = _dense(method, q, k, v, 0.3, rot_q)
    got = extended_attention(method, plain_rotate(scheme, seq_len=N), q, k, v, torch.arange(N), torch.arange(N), 0.3,
                             block=7)  # fmt: skip
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got32 = extended_attention(method, plain_rotate(scheme, seq_len=N), q.float(), k.float(), v.float(),
                               torch.arange(N), torch.arange(N), 0.3, block=16)  # fmt: skip
    torch.testing.assert_close(got32.double(), want, rtol=1e-5, atol=1e-5)


def _gpt(pe="rope", seed=0):
    torch.manual_seed(seed)
    return GPT(ModelConfig(vocab_size=64, n_layer=2, d_model=32, n_head=2, pe=pe)).eval()


NO_OPS = ["self-extend:group=4,window=40", "rerope:window=40", "sinks:n=4,window=40", "lm-infinite:local=48",
          "string:shift=40", "dca:chunk=44,local=2"]  # fmt: skip


@pytest.mark.parametrize("spec", NO_OPS)
@pytest.mark.parametrize("pe", ["rope", "xpos"])
def test_no_op_settings_give_plain_rope_bit_for_bit(spec, pe):
    x = torch.randint(0, 64, (2, 40), generator=torch.Generator().manual_seed(2))
    plain = _gpt(pe)
    ext = _gpt(pe)
    method = parse(spec, 48)
    assert method.no_op(40)
    extend_model(ext, method)
    with torch.no_grad():
        assert torch.equal(ext(x).logits, plain(x).logits)
        # the blockwise path itself (one step past no-op is not taken: probes run it) agrees to float error
        q, k, v = (torch.randn(1, 2, 40, 16, generator=torch.Generator().manual_seed(3)) for _ in range(3))
        s = positional.get(pe)
        got = extended_attention(method, plain_rotate(s, 40), q, k, v, torch.arange(40), torch.arange(40), 0.25)
        qr, kr = s.rotate(q, k, torch.arange(40), seq_len=40)
        want = torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=True, scale=0.25)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", ["sinks:n=3,window=9", "sinks:n=0,window=12", "lm-infinite:global=2,local=10"])
@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_streaming_equals_the_blockwise_pass(spec, chunk):
    model = _gpt("rope")
    extend_model(model, parse(spec, 12))
    x = torch.randint(0, 64, (2, 70), generator=torch.Generator().manual_seed(4))
    y = torch.randint(0, 64, (2, 70), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        whole = torch.nn.functional.cross_entropy(model(x).logits.transpose(1, 2), y, reduction="none")
    streamed = stream_nll(model, x, y, model.extension.window, chunk=chunk)
    torch.testing.assert_close(streamed, whole, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(token_nll(model, x, y), whole, rtol=1e-5, atol=1e-5)  # token_nll streams it
    cache = model.new_cache(model.extension.window)
    for s in range(0, 70, 7):
        model.step(x[:, s : s + 7], s, cache)
    m = model.extension.method
    kept = cache.layers[0].positions
    assert kept.numel() == m.sinks_kept + m.bounded  # the cache holds the sinks and the window, whatever L
    assert kept[: m.sinks_kept].tolist() == list(range(m.sinks_kept))


def test_streamed_rotation_uses_in_cache_positions():
    """A stream far past L_tr rotates window keys by positions below n + W + chunk, not by absolute ones."""
    model = _gpt("rope")
    extend_model(model, parse("sinks:n=2,window=6", 12))
    seen = []
    scheme = model.scheme
    original = scheme.rotate

    def spy(q, k, qpos, k_positions=None, **kw):
        seen.append(float(torch.cat([qpos.flatten().double(), k_positions.flatten().double()]).max()))
        return original(q, k, qpos, k_positions=k_positions, **kw)

    scheme.rotate = spy
    try:
        x = torch.randint(0, 64, (1, 200), generator=torch.Generator().manual_seed(6))
        stream_nll(model, x, x, 6, chunk=4)
    finally:
        scheme.rotate = original
    assert max(seen) < 2 + 6 + 4


def test_probes_under_an_extension_are_the_attention_it_runs():
    model = _gpt("rope")
    extend_model(model, parse("self-extend:group=2,window=4", 12))
    x = torch.randint(0, 64, (1, 30), generator=torch.Generator().manual_seed(7))
    from extrap.model.attention import dense_probs

    (layer, blocks), *_ = model.attention_probs(x, upto_layer=0)
    p = dense_probs(blocks, 30)
    torch.testing.assert_close(p.sum(-1), torch.ones(1, 2, 30))
    assert torch.all(p.triu(1) == 0)
    logits = model.layer_logits(x, 0)[0]
    torch.testing.assert_close(torch.softmax(logits, -1), p[..., : logits.shape[-1]], rtol=1e-5, atol=1e-6)
    assert not math.isfinite(float(logits[0, 0, 0, 1]))


def test_a_rolling_cache_shorter_than_the_method_needs_is_refused():
    from extrap.errors import ExtrapError

    model = _gpt("rope")
    extend_model(model, parse("self-extend:group=2,window=4", 12))
    with pytest.raises(ExtrapError):
        model.step(torch.zeros(1, 3, dtype=torch.long), 0, model.new_cache(8))


@pytest.mark.parametrize("spec", ["sinks:n=3,window=9", "sinks:n=0,window=12", "lm-infinite:global=2,local=10"])
@pytest.mark.parametrize("pe", ["rope", "xpos"])
@pytest.mark.parametrize("band", [1, 4, 0])
def test_streamed_bands_equal_the_blockwise_kernel_on_a_rolling_cache(spec, pe, band):
    """New queries against a cache of sinks + window (a gap in j), in bands: the same as extended_attention."""
    from extrap.extend import streamed_attention

    method, scheme = parse(spec, 12), positional.get(pe)
    n, W, start, C = method.sinks_kept, method.bounded, 50, 11
    i = torch.arange(start, start + C)
    j = torch.cat([torch.arange(n), torch.arange(start - W, start + C)])  # sinks, the last W cached, the new keys
    g = torch.Generator().manual_seed(8)
    q = torch.randn(2, 2, C, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 2, j.numel(), 8, generator=g, dtype=torch.float64) for _ in range(2))
    rot, origin = plain_rotate(scheme, 64), start - W + 1 - n
    want = extended_attention(method, rot, q, k, v, i, j, 0.3, origin=origin, spans=False, block=5)
    got = streamed_attention(method, rot, q, k, v, i, j, 0.3, origin=origin, band=band)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)  # scores in float32, as the kernel
    whole = extended_attention(method, rot, q, k, v, i, j, 0.3, origin=0, spans=False)  # absolute angles
    torch.testing.assert_close(got, whole, rtol=1e-5, atol=1e-6)  # scores in float32, as the kernel
