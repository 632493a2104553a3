"""The rotary variants of the registry: p-RoPE, partial rotary, Resonance RoPE and LongRoPE.

Each is checked against an independent value: transformers' own functions (``proportional`` for p-RoPE,
GPT-NeoX's partial rotary, ``_compute_longrope_parameters``) or a hand computation in Python floats
(Resonance's rounded wavelengths).  Streaming through the KV cache is in tests/test_rope_streaming.py.
"""

from __future__ import annotations

import math

import pytest
import torch

from extrap import positional as P
from extrap.cli import main
from extrap.errors import ExtrapError

TWO_PI = 2 * math.pi


def _hf(rope_type: str, head_dim: int = 32, max_pos: int = 128, **params):
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("transformers 5 rope_parameters")
    from transformers import LlamaConfig

    rp = {"rope_type": rope_type, "rope_theta": params.pop("rope_theta", 10000.0), **params}
    return LlamaConfig(
        hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim, max_position_embeddings=max_pos,
        rope_parameters=rp,
    )  # fmt: skip


def _init(rope_type: str):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS[rope_type]


# ---------------------------------------------------------------------------
# p-RoPE (Barbero et al. 2025)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("head_dim", [32, 64, 128])
@pytest.mark.parametrize("p", [0.25, 0.5, 0.6, 0.75, 0.9])
def test_p_rope_equals_transformers_proportional(head_dim, p):
    """transformers' ``proportional`` (Gemma's rope_proportion): int(p·d // 2) pairs keep θ, the rest are 0."""
    inv_hf, af_hf = _init("proportional")(_hf("proportional", head_dim, partial_rotary_factor=p, rope_theta=1e4), None)
    inv, af = P.get(f"rope:p={p}").frequencies(head_dim)
    assert torch.equal(inv, inv_hf) and af == af_hf == 1.0


def test_p_rope_by_hand():
    # d = 16: 8 pairs, int(0.75·16 // 2) = 6 keep θ_i = 10^4^(-2i/16), pairs 6 and 7 (the lowest) do not rotate
    inv = P.get("rope:p=0.75").frequencies(16, dtype=torch.float64)[0].tolist()
    assert inv[:6] == pytest.approx([10000 ** (-2 * i / 16) for i in range(6)], rel=1e-15)
    assert inv[6:] == [0.0, 0.0]


def test_p_one_is_plain_rope_bit_for_bit():
    plain, p1 = P.get("rope"), P.get("rope:p=1")
    assert p1.spec == "rope"
    assert torch.equal(plain.frequencies(64)[0], p1.frequencies(64)[0])
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 2, 40, 64, generator=g), torch.randn(2, 2, 40, 64, generator=g)
    pos = torch.arange(40)
    for a, b in zip(plain.rotate(q, k, pos), p1.rotate(q, k, pos)):
        assert torch.equal(a, b)


def test_dropped_pairs_do_not_rotate():
    """The dimensions of a θ = 0 pair come out of the rotation unchanged, at every position."""
    q = torch.randn(1, 1, 50, 16, dtype=torch.float64)
    out, _ = P.get("rope:p=0.75").rotate(q, q, torch.arange(50))
    for i in (6, 7):
        assert torch.equal(out[..., i], q[..., i]) and torch.equal(out[..., i + 8], q[..., i + 8])
    assert not torch.allclose(out[..., 5], q[..., 5])


# ---------------------------------------------------------------------------
# partial rotary (GPT-NeoX rotary_pct / HF partial_rotary_factor)
# ---------------------------------------------------------------------------
def _neox(head_dim: int, pct: float):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPTNeoXConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        max_position_embeddings=64,
        rotary_pct=pct,
        intermediate_size=64,
    )
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    return GPTNeoXRotaryEmbedding(cfg)


@pytest.mark.parametrize("head_dim,pct", [(32, 0.5), (64, 0.25), (16, 0.75)])
def test_partial_frequencies_equal_gpt_neox(head_dim, pct):
    """θ over the rotary dimension r = int(pct·d), as HF computes them, then (d - r)/2 pairs with θ = 0."""
    emb = _neox(head_dim, pct)
    inv, _ = P.get(f"rope:partial={pct}").frequencies(head_dim)
    r = int(head_dim * pct)
    assert torch.equal(inv[: r // 2], emb.inv_freq) and torch.equal(inv[r // 2 :], torch.zeros(head_dim // 2 - r // 2))


@pytest.mark.parametrize("head_dim,pct", [(32, 0.5), (64, 0.25)])
def test_partial_rotation_equals_gpt_neox(head_dim, pct):
    """scheme.rotate == GPTNeoXRotaryEmbedding + its apply_rotary_pos_emb, which rotates only the first r dims."""
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb

    emb = _neox(head_dim, pct)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 2, 70, head_dim, generator=g), torch.randn(2, 2, 70, head_dim, generator=g)
    pos = torch.arange(70).expand(2, 70)
    cos, sin = emb(q, pos)
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin)
    q2, k2 = P.get(f"rope:partial={pct}").rotate(q, k, pos)
    torch.testing.assert_close(q2, q_hf, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k2, k_hf, rtol=1e-6, atol=1e-6)
    r = int(head_dim * pct)
    assert torch.equal(q2[..., r:], q[..., r:])


def test_partial_with_linear_equals_transformers():
    cfg = _hf("linear", 32, factor=4.0, partial_rotary_factor=0.5)
    inv_hf, _ = _init("linear")(cfg, None)
    inv, _ = P.get("rope:partial=0.5,scaling=linear,factor=4").frequencies(32)
    assert torch.equal(inv[:8], inv_hf) and not inv[8:].any()


# ---------------------------------------------------------------------------
# Resonance RoPE (Wang et al. 2024)
# ---------------------------------------------------------------------------
def test_resonance_by_hand():
    # θ_0 = 1: λ = 2π = 6.283 -> 6, θ̃ = 2π/6; θ_1 = 10^4^(-1/8) = 0.316228: λ = 19.8692 -> 20, θ̃ = 2π/20;
    # θ_7 = 10^4^(-7/8) = 3.16228e-4: λ = 19869.2 -> 19869
    inv = P.get("rope:resonance=1").frequencies(16, dtype=torch.float64)[0].tolist()
    expected = [TWO_PI / round(TWO_PI / 10000 ** (-2 * i / 16)) for i in range(8)]
    assert inv == pytest.approx(expected, rel=1e-15)
    assert inv[0] == pytest.approx(TWO_PI / 6) and inv[1] == pytest.approx(TWO_PI / 20)
    assert inv[7] == pytest.approx(TWO_PI / 19869)
    for t in inv:  # every wavelength is an integer: the feature repeats exactly
        assert TWO_PI / t == pytest.approx(round(TWO_PI / t), rel=1e-12)


def test_resonance_rounds_after_the_scaling_and_keeps_dropped_pairs():
    # linear s = 4 then p = 0.5 (4 of 8 pairs) then the rounding: θ_1/4 has λ = 79.477 -> 79
    inv = P.get("rope:scaling=linear,factor=4,p=0.5,resonance=1").frequencies(16, dtype=torch.float64)[0].tolist()
    assert inv[1] == pytest.approx(TWO_PI / 79) and inv[4:] == [0.0] * 4


# ---------------------------------------------------------------------------
# LongRoPE (Ding et al. 2024)
# ---------------------------------------------------------------------------
SHORT = [1.0, 1.0, 1.02, 1.05, 1.1, 1.2, 1.4, 1.6, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
LONG = [1.0, 1.1, 1.3, 1.6, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 14.0, 18.0, 24.0, 28.0, 31.0, 32.0]


def _longrope_spec(**extra) -> str:
    opts = {"scaling": "longrope", "original_max_position": 32, "factor": 4, **extra}
    opts.update(short_factor="/".join(map(str, SHORT)), long_factor="/".join(map(str, LONG)))
    return "rope:" + ",".join(f"{k}={v}" for k, v in opts.items())


@pytest.mark.parametrize("seq_len", [None, 16, 32, 33, 100])
@pytest.mark.parametrize("extra", [{}, {"attention_factor": 1.3}])
def test_longrope_equals_transformers(seq_len, extra):
    cfg = _hf("longrope", 32, max_pos=128, original_max_position_embeddings=32, factor=4.0,
              short_factor=SHORT, long_factor=LONG, **extra)  # fmt: skip
    inv_hf, af_hf = _init("longrope")(cfg, None, seq_len=seq_len)
    inv, af = P.get(_longrope_spec(**extra)).frequencies(32, seq_len)
    assert torch.equal(inv, inv_hf) and af == pytest.approx(af_hf, rel=1e-15)
    if not extra:  # sqrt(1 + ln 4 / ln 32) = sqrt(1 + 2/5) (LongRoPE / Phi-3)
        assert af == pytest.approx(math.sqrt(1.4), rel=1e-15)


def test_longrope_spec_round_trips_and_switches_at_the_original_length():
    s = P.get(_longrope_spec())
    assert P.get(s.spec).opts == s.opts and s.length_dependent
    short, long = s.frequencies(32, 32)[0], s.frequencies(32, 33)[0]
    base = P.get("rope").frequencies(32)[0]
    torch.testing.assert_close(short, base / torch.tensor(SHORT), rtol=1e-6, atol=0)
    torch.testing.assert_close(long, base / torch.tensor(LONG), rtol=1e-6, atol=0)


# ---------------------------------------------------------------------------
# bad values: ExtrapError in one line, exit 2 from the CLI
# ---------------------------------------------------------------------------
BAD = [
    ("rope:p=0", "must be in (0, 1]"),
    ("rope:p=1.5", "must be in (0, 1]"),
    ("rope:p=abc", "not a valid float"),
    ("rope:partial=0", "must be in (0, 1]"),
    ("rope:partial=1.01", "must be in (0, 1]"),
    ("rope:resonance=2", "must be 0 or 1"),
    ("rope:resonance=0.5", "not a valid int"),
    ("rope:scaling=longrope,original_max_position=32", "needs short_factor"),
    ("rope:scaling=longrope,original_max_position=32,short_factor=1/x,long_factor=1", "not a valid FactorList"),
    ("rope:scaling=longrope,original_max_position=32,short_factor=1/-1,long_factor=1/1", "positive numbers"),
    ("rope:short_factor=1/2", "only applies to scaling=longrope"),
    ("rope:wobble=1", "unknown option"),
]


@pytest.mark.parametrize("spec,words", BAD)
def test_bad_values_raise_one_line(spec, words):
    with pytest.raises(ExtrapError, match=None) as e:
        P.get(spec)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "spec,head_dim,words",
    [
        ("rope:partial=0.3", 10, "rotates 3 dimensions"),  # int(0.3·10) = 3: odd
        ("rope:partial=0.1", 16, "rotates 1 dimensions"),
        ("rope:scaling=longrope,original_max_position=32,short_factor=1/1,long_factor=1/1", 16, "has 8 pairs"),
    ],
)
def test_bad_head_dim_for_the_options(spec, head_dim, words):
    with pytest.raises(ExtrapError) as e:
        P.get(spec).frequencies(head_dim)
    assert words in str(e.value)


@pytest.mark.parametrize(
    "argv",
    [
        ["rope:p=0", "--head-dim", "64"],
        ["rope:partial=2", "--head-dim", "64"],
        ["rope:partial=0.3", "--head-dim", "10"],
        ["rope:resonance=3", "--head-dim", "64"],
        ["rope:bogus=1", "--head-dim", "64"],
        ["rope:scaling=longrope,original_max_position=64,short_factor=1,long_factor=1", "--head-dim", "64"],
    ],
)
def test_cli_exit_2_one_line_nothing_written(tmp_path, capsys, argv):
    csv = tmp_path / "out.csv"
    assert main(["theory", *argv, "--csv", str(csv)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("extrap: error:"), err
    assert not csv.exists()


def test_pe_list_options_shows_them_with_citations(capsys):
    assert main(["pe", "list", "--options"]) == 0
    out = capsys.readouterr().out
    for words in ("Barbero et al. 2025", "partial_rotary_factor", "Wang et al. 2024", "Ding et al. 2024", "longrope"):
        assert words in out, words


# ---------------------------------------------------------------------------
# a run trained with the variants: train, evaluate, analyse
# ---------------------------------------------------------------------------
def test_variant_run_trains_evaluates_and_is_analysed(tmp_path, capsys, tiny_text):
    import json

    pe = "rope:partial=0.5,p=0.75,resonance=1"  # the canonical spec: options in the table's order
    run = tmp_path / "run"
    assert main(["train", "--pe", pe, "--preset", "smoke", "--steps", "2", "--train-length", "32",
                 "--corpus", tiny_text, "--out", str(run), "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["eval", str(run), "--lengths", "32,64", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["length"] for r in results] == [32, 64] and all(math.isfinite(r["ppl"]) for r in results)
    assert main(["theory", "--checkpoint", str(run), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["rope"][0]
    # smoke: head dim 16, partial 0.5 -> 8 rotating dims = 4 pairs, p = 0.75 keeps int(0.75·8 // 2) = 3 of them
    assert r["pe"] == pe and r["head_dim"] == 16
    thetas = [p["theta"] for p in r["pairs"]]
    assert thetas[3:] == [0.0] * 5 and thetas[0] == pytest.approx(TWO_PI / 6)
