"""RoPE, xPos and the interpolation methods: closed forms, hand computations, HF parity."""

import math

import pytest
import torch

from extrap import positional as P
from extrap.errors import ExtrapError
from extrap.positional import rotary as R


def _theta(d, base=10000.0):
    return torch.tensor([base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)


# ---------------------------------------------------------------------------
# Frequencies: closed forms and hand computations
# ---------------------------------------------------------------------------
def test_none_is_su_et_al_theta():
    inv, af = R.rope_frequencies("none", 16, dtype=torch.float64)
    assert inv.shape == (8,) and af == 1.0
    torch.testing.assert_close(inv, _theta(16), rtol=1e-14, atol=0)
    f32, _ = R.rope_frequencies("none", 16)
    assert f32.dtype == torch.float32


def test_linear_is_inv_freq_over_factor():
    base, _ = R.rope_frequencies("none", 64, base=500.0)
    lin, af = R.rope_frequencies("linear", 64, base=500.0, factor=4.0)
    assert torch.equal(lin, base / 4.0) and af == 1.0


def test_linear_rotation_equals_positions_over_factor():
    # Chen et al. 2023: PI rotates position m as the original RoPE rotates m / s
    x = torch.randn(1, 2, 12, 16, dtype=torch.float64)
    pos = torch.arange(12)
    lin, _ = R.rope_frequencies("linear", 16, factor=3.0, dtype=torch.float64)
    ref, _ = R.rope_frequencies("none", 16, dtype=torch.float64)
    torch.testing.assert_close(
        R.apply_rotary(x, pos, lin), R.apply_rotary(x, pos.double() / 3.0, ref), rtol=1e-12, atol=1e-12
    )


def test_ntk_closed_form():
    d, s, b = 32, 8.0, 10000.0
    inv, af = R.rope_frequencies("ntk", d, base=b, factor=s, dtype=torch.float64)
    new_base = b * s ** (d / (d - 2))
    expected = torch.tensor([new_base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    torch.testing.assert_close(inv, expected, rtol=1e-13, atol=0)
    assert af == 1.0
    # the highest frequency is untouched, the lowest is divided by exactly s
    assert inv[0] == 1.0
    assert math.isclose(float(_theta(d)[-1] / inv[-1]), s, rel_tol=1e-12)


def test_dynamic_is_plain_within_original_and_ntk_beyond():
    d, L, s = 16, 128, 4.0
    for n in (None, 1, 64, 128):
        inv, _ = R.rope_frequencies("dynamic", d, factor=s, original_max_position=L, seq_len=n, dtype=torch.float64)
        torch.testing.assert_close(inv, _theta(d), rtol=1e-14, atol=0)
    n = 300
    inv, _ = R.rope_frequencies("dynamic", d, factor=s, original_max_position=L, seq_len=n, dtype=torch.float64)
    new_base = 10000.0 * (s * n / L - (s - 1)) ** (d / (d - 2))
    torch.testing.assert_close(inv, _theta(d, new_base), rtol=1e-13, atol=0)


def test_ntk_by_parts_hand_computation():
    d, L, s, alpha, beta = 8, 64, 4.0, 1.0, 32.0
    inv, af = R.rope_frequencies(
        "ntk-by-parts", d, factor=s, original_max_position=L, alpha=alpha, beta=beta, dtype=torch.float64
    )
    # θ = 1, 0.1, 0.01, 0.001; r = L θ / 2π = 10.19, 1.019, 0.1019, 0.01019
    expected = []
    for i in range(d // 2):
        theta = 10000.0 ** (-2 * i / d)
        r = L / (2 * math.pi / theta)
        g = min(max((r - alpha) / (beta - alpha), 0.0), 1.0)
        expected.append((1 - g) * theta / s + g * theta)
    torch.testing.assert_close(inv, torch.tensor(expected, dtype=torch.float64), rtol=1e-14, atol=0)
    # by hand: dim 0 is partly kept (γ = 9.186/31), dims 2, 3 fully interpolated
    g0 = (64 / (2 * math.pi) - 1) / 31
    assert math.isclose(float(inv[0]), (1 - g0) / 4 + g0, rel_tol=1e-14)
    assert math.isclose(float(inv[3]), 1e-3 / 4, rel_tol=1e-14) and af == 1.0


def test_truncated_basis_cases():
    d, L = 16, 100
    theta = _theta(d)
    inv, _ = R.rope_frequencies("truncated", d, original_max_position=L, dtype=torch.float64)
    b = 2 * math.pi / L
    a, rho = b / 8, b / 16
    for t, got in zip(theta.tolist(), inv.tolist()):
        expected = t if t >= b else (rho if t >= a else 0.0)
        assert got == pytest.approx(expected, rel=1e-14, abs=0)
    # all three regimes occur with d = 16, L = 100
    assert (inv == 0).any() and (inv == theta).any() and torch.isclose(inv, torch.tensor(rho, dtype=inv.dtype)).any()
    inv2, _ = R.rope_frequencies("truncated", d, original_max_position=L, trunc_wavelength=1e9, dtype=torch.float64)
    torch.testing.assert_close(inv2, theta)  # a cutoff wavelength beyond every dim keeps all


def test_yarn_limits_and_attention_factor():
    d, L = 64, 256
    inv, af = R.rope_frequencies("yarn", d, factor=8.0, original_max_position=L)
    plain, _ = R.rope_frequencies("none", d)
    assert af == pytest.approx(0.1 * math.log(8.0) + 1)
    assert inv[0] == plain[0]  # fastest dim: extrapolated (kept)
    torch.testing.assert_close(inv[-1], plain[-1] / 8.0)  # slowest dim: interpolated
    _, af1 = R.rope_frequencies("yarn", d, factor=1.0, original_max_position=L)
    assert af1 == 1.0


def test_frequency_errors():
    with pytest.raises(ExtrapError):
        R.rope_frequencies("bogus", 16)
    with pytest.raises(ExtrapError):
        R.rope_frequencies("none", 15)
    with pytest.raises(ExtrapError):
        R.rope_frequencies("ntk", 2, factor=2.0)
    with pytest.raises(ExtrapError):
        R.rope_frequencies("linear", 16, factor=0.0)
    with pytest.raises(ExtrapError, match="alpha < beta"):
        R.rope_frequencies("ntk-by-parts", 16, alpha=2.0, beta=1.0)


def test_frequencies_live_in_rope_scaling_and_stay_importable_from_rotary():
    from extrap.positional import rope_scaling

    assert R.rope_frequencies is rope_scaling.rope_frequencies and R.SCALINGS is rope_scaling.SCALINGS
    assert R.default_inv_freq is rope_scaling.default_inv_freq


# ---------------------------------------------------------------------------
# HF transformers parity (linear, dynamic, yarn, default)
# ---------------------------------------------------------------------------
def _hf_config(head_dim, max_pos, rope_type, **params):
    transformers = pytest.importorskip("transformers")
    from transformers import LlamaConfig

    heads = 2
    if int(transformers.__version__.split(".")[0]) >= 5:
        rp = {"rope_type": rope_type, "rope_theta": params.pop("rope_theta", 10000.0), **params}
        return LlamaConfig(
            hidden_size=heads * head_dim,
            num_attention_heads=heads,
            head_dim=head_dim,
            max_position_embeddings=max_pos,
            rope_parameters=rp,
        )
    theta = params.pop("rope_theta", 10000.0)
    scaling = None if rope_type == "default" else {"rope_type": rope_type, **params}
    return LlamaConfig(
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        rope_theta=theta,
        rope_scaling=scaling,
    )


def _hf_init(rope_type):
    mru = pytest.importorskip("transformers.modeling_rope_utils")
    return mru.ROPE_INIT_FUNCTIONS[rope_type]


def _same(ours, theirs):
    inv, af = ours
    inv_hf, af_hf = theirs
    assert inv.dtype == inv_hf.dtype == torch.float32
    torch.testing.assert_close(inv, inv_hf, rtol=1e-6, atol=0)
    assert float(af) == pytest.approx(float(af_hf), rel=1e-12)


@pytest.mark.parametrize("head_dim,base,factor", [(64, 10000.0, 4.0), (32, 500000.0, 2.5), (128, 10000.0, 16.0)])
def test_hf_linear(head_dim, base, factor):
    cfg = _hf_config(head_dim, 2048, "linear", factor=factor, rope_theta=base)
    _same(R.rope_frequencies("linear", head_dim, base=base, factor=factor), _hf_init("linear")(cfg, None))


@pytest.mark.parametrize("seq_len", [None, 64, 128, 129, 300, 1000])
@pytest.mark.parametrize("head_dim,factor", [(64, 4.0), (32, 2.0), (128, 1.5)])
def test_hf_dynamic(head_dim, factor, seq_len):
    # HF's dynamic uses max_position_embeddings as the original length
    cfg = _hf_config(head_dim, 128, "dynamic", factor=factor)
    ours = R.rope_frequencies("dynamic", head_dim, factor=factor, original_max_position=128, seq_len=seq_len)
    _same(ours, _hf_init("dynamic")(cfg, None, seq_len=seq_len))


YARN_CASES = [
    dict(factor=4.0),
    dict(factor=8.0, beta_fast=16.0, beta_slow=2.0),
    dict(factor=16.0, truncate=False),
    dict(factor=4.0, attention_factor=1.3),
    dict(factor=40.0, mscale=1.0, mscale_all_dim=0.707),
    dict(factor=2.0, rope_theta=500000.0),
]


@pytest.mark.parametrize("head_dim,orig", [(64, 128), (128, 4096), (16, 64)])
@pytest.mark.parametrize("case", YARN_CASES)
def test_hf_yarn(head_dim, orig, case):
    case = dict(case)
    base = case.pop("rope_theta", 10000.0)
    cfg = _hf_config(head_dim, orig * 4, "yarn", original_max_position_embeddings=orig, rope_theta=base, **case)
    ours = R.rope_frequencies("yarn", head_dim, base=base, original_max_position=orig, **case)
    _same(ours, _hf_init("yarn")(cfg, None))


def test_hf_default():
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = _hf_config(64, 128, "default")
    inv_hf, af_hf = LlamaRotaryEmbedding.compute_default_rope_parameters(cfg)
    _same(R.rope_frequencies("none", 64), (inv_hf, af_hf))


@pytest.mark.parametrize(
    "spec,rope_type,params",
    [
        ("rope", "default", {}),
        ("rope:scaling=linear,factor=2", "linear", dict(factor=2.0)),
        (
            "rope:scaling=yarn,factor=4,original_max_position=32",
            "yarn",
            dict(factor=4.0, original_max_position_embeddings=32),
        ),
        ("rope:scaling=dynamic,factor=2,original_max_position=32", "dynamic", dict(factor=2.0)),
    ],
)
def test_hf_end_to_end_rotation(spec, rope_type, params):
    """scheme.rotate == LlamaRotaryEmbedding + apply_rotary_pos_emb, on positions past the training length."""
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    D, L = 32, 80
    cfg = _hf_config(D, 32, rope_type, **params)
    emb = LlamaRotaryEmbedding(cfg)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 2, L, D, generator=g), torch.randn(2, 2, L, D, generator=g)
    pos = torch.arange(L).expand(2, L)
    cos, sin = emb(q, pos)
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin)
    q2, k2 = P.get(spec).rotate(q, k, pos)
    torch.testing.assert_close(q2, q_hf, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k2, k_hf, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# The rotation itself
# ---------------------------------------------------------------------------
def test_rotate_half_layout_by_hand():
    D = 8
    x = torch.randn(1, 1, 1, D, dtype=torch.float64)
    m = 5.0
    theta = _theta(D)
    out = R.apply_rotary(x, torch.tensor([m]), theta)[0, 0, 0]
    x = x[0, 0, 0]
    for i in range(D // 2):  # pair (i, i + D/2) rotates by m θ_i (Su et al. Eq. 13)
        c, s = math.cos(m * theta[i]), math.sin(m * theta[i])
        assert float(out[i]) == pytest.approx(float(x[i] * c - x[i + D // 2] * s), abs=1e-13)
        assert float(out[i + D // 2]) == pytest.approx(float(x[i] * s + x[i + D // 2] * c), abs=1e-13)


def test_rope_preserves_norms_and_is_relative():
    g = torch.Generator().manual_seed(1)
    B, H, L, D = 2, 3, 20, 16
    q = torch.randn(B, H, L, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, H, L, D, generator=g, dtype=torch.float64)
    rope = P.get("rope")
    pos = torch.arange(L)
    q1, k1 = rope.rotate(q, k, pos)
    torch.testing.assert_close(q1.norm(dim=-1), q.norm(dim=-1))
    s1 = q1 @ k1.transpose(-1, -2)
    for c in (7, 1000, 12345):  # <R_m q, R_n k> = <R_{m+c} q, R_{n+c} k>
        q2, k2 = rope.rotate(q, k, pos + c)
        torch.testing.assert_close(q2 @ k2.transpose(-1, -2), s1, rtol=1e-9, atol=1e-9)
    # per-sequence (B, L) positions and float positions agree with (L,)
    q3, _ = rope.rotate(q, k, pos.expand(B, L).float())
    torch.testing.assert_close(q3, q1)


def test_yarn_scales_norms_by_attention_factor():
    s = P.get("rope:scaling=yarn,factor=4,original_max_position=128")
    q = torch.randn(1, 1, 10, 64, dtype=torch.float64)
    q1, _ = s.rotate(q, q, torch.arange(10))
    _, af = R.rope_frequencies("yarn", 64, factor=4.0, original_max_position=128)
    torch.testing.assert_close(q1.norm(dim=-1), q.norm(dim=-1) * af)


def test_dynamic_scheme_uses_current_length():
    s = P.get("rope:scaling=dynamic,factor=2,original_max_position=16")
    q = torch.randn(1, 1, 40, 8, dtype=torch.float64)
    out, _ = s.rotate(q, q, torch.arange(40))
    inv, _ = R.rope_frequencies("dynamic", 8, factor=2.0, original_max_position=16, seq_len=40, dtype=torch.float64)
    torch.testing.assert_close(out, R.apply_rotary(q, torch.arange(40), inv))
    short, _ = s.rotate(q[:, :, :10], q[:, :, :10], torch.arange(10))  # within L: plain RoPE
    torch.testing.assert_close(short, P.get("rope").rotate(q[:, :, :10], q[:, :, :10], torch.arange(10))[0])


def test_separate_key_positions_kv_cache():
    rope = P.get("rope")
    q = torch.randn(1, 2, 10, 16, dtype=torch.float64)
    k = torch.randn(1, 2, 10, 16, dtype=torch.float64)
    qa, ka = rope.rotate(q, k, torch.arange(10))
    qb, kb = rope.rotate(q[:, :, -1:], k, torch.tensor([9]), k_positions=torch.arange(10))
    torch.testing.assert_close(qb, qa[:, :, -1:])
    torch.testing.assert_close(kb, ka)


def test_frequency_cache_and_dtypes():
    rope = P.get("rope:scaling=linear,factor=2")
    a = rope.frequencies(16)
    assert rope.frequencies(16) is a
    q = torch.randn(1, 1, 4, 16, dtype=torch.bfloat16)
    q1, k1 = rope.rotate(q, q, torch.arange(4))
    assert q1.dtype == k1.dtype == torch.bfloat16


def test_shape_errors():
    rope = P.get("rope")
    with pytest.raises(ExtrapError):
        rope.rotate(torch.randn(1, 1, 4, 16), torch.randn(1, 1, 4, 16), torch.arange(5))
    with pytest.raises(ExtrapError):
        rope.rotate(torch.randn(1, 4, 16), torch.randn(1, 4, 16), torch.arange(4))


# ---------------------------------------------------------------------------
# xPos
# ---------------------------------------------------------------------------
def test_xpos_zeta_and_single_pair_hand_computation():
    D, B = 8, 512.0
    zeta = [(2 * i / D + 0.4) / 1.4 for i in range(D // 2)]
    pos = torch.tensor([3.0])
    sc = R.xpos_scale(pos, D, center=0.0, dtype=torch.float64)[0]
    torch.testing.assert_close(sc, torch.tensor(zeta + zeta, dtype=torch.float64) ** (3 / B))
    # with only pair i nonzero, the xPos score is ζ_i^((m-n)/B) times the RoPE score
    theta = _theta(D)
    for i in range(D // 2):
        q = torch.zeros(1, 1, 1, D, dtype=torch.float64)
        k = torch.zeros(1, 1, 1, D, dtype=torch.float64)
        q[..., i], q[..., i + D // 2], k[..., i], k[..., i + D // 2] = 0.3, -1.2, 0.7, 0.5
        m, n = 900, 100
        qx, _ = R.apply_xpos(q, k, torch.tensor([m]), theta, k_positions=torch.tensor([n]))
        _, kx = R.apply_xpos(q, k, torch.tensor([m]), theta, k_positions=torch.tensor([n]))
        qr, kr = R.apply_rotary(q, torch.tensor([m]), theta), R.apply_rotary(k, torch.tensor([n]), theta)
        assert float((qx * kx).sum()) == pytest.approx(zeta[i] ** ((m - n) / B) * float((qr * kr).sum()), rel=1e-10)


def test_xpos_relative_and_decaying():
    g = torch.Generator().manual_seed(2)
    L, D = 30, 16
    q = torch.randn(1, 2, L, D, generator=g, dtype=torch.float64)
    k = torch.randn(1, 2, L, D, generator=g, dtype=torch.float64)
    x = P.get("xpos")
    pos = torch.arange(L)
    q1, k1 = x.rotate(q, k, pos)
    s1 = q1 @ k1.transpose(-1, -2)
    for c in (11, 3000):  # relative: a common shift (and the automatic center) leaves scores unchanged
        q2, k2 = x.rotate(q, k, pos + c)
        torch.testing.assert_close(q2 @ k2.transpose(-1, -2), s1, rtol=1e-9, atol=1e-9)
    # decay: with no rotation (θ = 0) and q = k > 0 the score falls strictly with distance
    ones = torch.ones(1, 1, 1, D, dtype=torch.float64)
    zero = torch.zeros(D // 2, dtype=torch.float64)
    scores = []
    for t in range(0, 5000, 500):
        qx, kx = R.apply_xpos(ones, ones, torch.tensor([t]), zero, k_positions=torch.tensor([0]))
        scores.append(float((qx * kx).sum()))
    assert all(a > b for a, b in zip(scores, scores[1:])) and scores[0] == pytest.approx(D)


def test_xpos_long_sequence_is_finite_in_float32():
    x = P.get("xpos")
    L = 8192
    q = torch.randn(1, 1, L, 16)
    q1, k1 = x.rotate(q, q, torch.arange(L))
    assert torch.isfinite(q1).all() and torch.isfinite(k1).all()


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------
def test_registry_specs_and_errors():
    s = P.get("rope:scaling=yarn,factor=4,original_max_position=128")
    assert s.kind == "rotary" and s.opts["factor"] == 4.0 and s.opts["original_max_position"] == 128
    assert P.get(s.spec).spec == s.spec
    x = P.get("xpos:scale_base=256,gamma=0.5")
    assert x.kind == "rotary" and x.opts["scale_base"] == 256.0
    for name in ("rope", "xpos"):
        cls = P.REGISTRY[name]
        assert cls.summary and cls.reference
    for bad in (
        "rope:scaling=bogus",
        "rope:factor=-1",
        "rope:scaling=yarn,factor=4",  # yarn needs L
        "rope:beta_fast=16",
        "rope:scaling=linear,alpha=2",  # option of another scaling
        "rope:scaling=ntk-by-parts,original_max_position=64,alpha=40",
        "rope:base=1",
        "rope:nope=1",
        "rope:scaling=truncated",
        "xpos:gamma=-1",
    ):
        with pytest.raises(ExtrapError):
            P.get(bad)


def test_with_train_length():
    s = P.get("rope:scaling=linear,factor=2").with_train_length(256)
    assert s.opts["original_max_position"] == 256 and s.opts["factor"] == 2.0
    t = P.get("rope:scaling=yarn,factor=2,original_max_position=64")
    assert t.with_train_length(256) is t
