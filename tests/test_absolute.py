"""Absolute embeddings: sinusoidal closed forms, SHAPE / CAPE augmentation, learned range checks."""

import math

import pytest
import torch

from extrap import positional as P
from extrap.errors import ExtrapError
from extrap.positional import absolute as A


def test_sinusoidal_position_zero_and_layout():
    e = A.sinusoidal_embedding(torch.arange(3), 8)
    assert e.shape == (3, 8) and e.dtype == torch.float32
    assert e[0].tolist() == [0.0, 1.0] * 4  # interleaved: sin at even, cos at odd dims


def test_sinusoidal_closed_form_and_continuous_positions():
    d = 12
    pos = torch.tensor([[0.0, 1.0, 7.5, 1234.25]], dtype=torch.float64)  # (1, 4), fractional allowed (CAPE)
    e = A.sinusoidal_embedding(pos, d)
    assert e.shape == (1, 4, d) and e.dtype == torch.float64
    for j, m in enumerate(pos[0].tolist()):
        for i in range(d // 2):
            w = 10000.0 ** (-2 * i / d)  # Vaswani et al. 2017 §3.5
            assert float(e[0, j, 2 * i]) == pytest.approx(math.sin(m * w), abs=1e-12)
            assert float(e[0, j, 2 * i + 1]) == pytest.approx(math.cos(m * w), abs=1e-12)


def test_sinusoidal_inner_products_match_sandwich():
    # p_m . p_n = Σ_i cos((m-n) ω_i): the quantity Sandwich (003 Eq. 5) is built from
    d, m, n = 16, 40, 13
    e = A.sinusoidal_embedding(torch.tensor([m, n], dtype=torch.float64), d)
    s = P.get(f"sandwich:dbar={d}")
    values = s.init_values(1)
    bias = s.bias(torch.tensor([float(m - n)], dtype=torch.float64), values)[0, 0]
    assert float(e[0] @ e[1]) == pytest.approx(float(bias * values["ratio"][0] + d / 2), rel=1e-12)


def test_sinusoidal_scheme_embedding_and_errors():
    s = P.get("sinusoidal:base=100")
    assert s.kind == "ape"
    torch.testing.assert_close(s.embedding(torch.arange(5), 6), A.sinusoidal_embedding(torch.arange(5), 6, 100.0))
    with pytest.raises(ExtrapError):
        A.sinusoidal_embedding(torch.arange(3), 7)
    assert torch.equal(s.eval_positions(4), torch.arange(4))
    assert torch.equal(s.train_positions(2, 4), torch.arange(4).expand(2, 4))


def test_shape_shifts_whole_sequences():
    g = torch.Generator().manual_seed(0)
    s = P.get("sinusoidal:shape=50")
    p = s.train_positions(64, 10, g)
    assert p.shape == (64, 10) and p.dtype == torch.long
    k = p[:, 0]
    assert torch.equal(p, k[:, None] + torch.arange(10))  # one shift per sequence (Kiyono et al. 2021)
    assert 0 <= k.min() and k.max() <= 50 and len(set(k.tolist())) > 10
    again = s.train_positions(64, 10, torch.Generator().manual_seed(0))
    assert torch.equal(p, again)  # deterministic for a seeded generator
    assert torch.equal(s.eval_positions(10), torch.arange(10))


def test_cape_components():
    g = torch.Generator().manual_seed(1)
    B, L = 256, 20
    m = torch.arange(L, dtype=torch.float32)
    # global shift only: differences stay 1, shift within ±Δmax
    p = A.cape_positions(B, L, g, max_global_shift=5.0)
    assert p.dtype == torch.float32
    torch.testing.assert_close(p.diff(dim=-1), torch.ones(B, L - 1))
    assert p[:, 0].abs().max() <= 5.0 and p[:, 0].abs().max() > 4.0
    # local shift only: each token within ±εmax of its position, order kept
    p = A.cape_positions(B, L, g, max_local_shift=0.5)
    assert (p - m).abs().max() <= 0.5 and (p.diff(dim=-1) >= 0).all()
    assert (p - m).std() > 0.2
    # scaling only: x' = λ x with log λ ~ U[-log s, log s], one λ per sequence
    p = A.cape_positions(B, L, g, max_global_scale=2.0)
    lam = p[:, 1:] / m[1:]
    torch.testing.assert_close(lam, lam[:, :1].expand_as(lam))
    assert lam.min() >= 0.5 - 1e-6 and lam.max() <= 2.0 + 1e-6
    assert (p[:, 0] == 0).all()


def test_cape_scheme_defaults_and_determinism():
    s = P.get("sinusoidal:cape=1")
    a = s.train_positions(4, 16, torch.Generator().manual_seed(3))
    b = s.train_positions(4, 16, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.dtype == torch.float32 and a.shape == (4, 16)
    o = s.opts
    # x' = λ (m + Δ + ε): bounded by the defaults
    lo = (torch.arange(16) - o["cape_global"] - o["cape_local"]) / o["cape_scale"]
    hi = (torch.arange(16) + o["cape_global"] + o["cape_local"]) * o["cape_scale"]
    lo = torch.minimum(lo, lo * o["cape_scale"] ** 2)  # negative positions scale the other way
    assert (a >= lo - 1e-5).all() and (a <= hi + 1e-5).all()
    # the embedding accepts CAPE's float positions directly
    assert s.embedding(a, 8).shape == (4, 16, 8)


def test_augmentation_composes_with_sampler_positions():
    base = torch.tensor([[0, 5, 9, 30]])
    g = torch.Generator().manual_seed(0)
    p = P.get("sinusoidal:shape=3").train_positions(1, 4, g, positions=base)
    assert torch.equal(p - base, (p - base)[:, :1].expand(1, 4))


def test_sinusoidal_option_errors():
    for bad in (
        "sinusoidal:shape=2,cape=1",
        "sinusoidal:cape_global=3",
        "sinusoidal:cape=1,cape_local=0.8",
        "sinusoidal:cape=1,cape_scale=0.5",
        "sinusoidal:shape=-1",
        "sinusoidal:base=1",
    ):
        with pytest.raises(ExtrapError):
            P.get(bad)
    s = P.get("sinusoidal:cape=1,cape_global=10,cape_local=0.25,cape_scale=1.1")
    assert s.opts["cape_global"] == 10.0 and P.get(s.spec).spec == s.spec


def test_learned_scheme_range_check():
    s = P.get("learned:max_positions=16")
    assert s.kind == "ape" and s.max_positions == 16
    s.check_positions(16)  # a length: ids 0..15
    s.check_positions(torch.arange(16))
    with pytest.raises(ExtrapError) as e:
        s.check_positions(torch.arange(17))
    assert "beyond max_positions=16" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ExtrapError):
        s.check_positions(17)
    with pytest.raises(ExtrapError):
        A.check_learned_positions(torch.tensor([-1, 0]), 16)
    with pytest.raises(ExtrapError):
        A.check_learned_positions(torch.tensor([0.5]), 16)
    assert P.get("learned").max_positions == 1024
    with pytest.raises(ExtrapError):
        P.get("learned:max_positions=0")


def test_registered_with_summary_and_reference():
    for name in ("sinusoidal", "learned"):
        cls = P.REGISTRY[name]
        assert cls.kind == "ape" and cls.summary and cls.reference
        assert issubclass(cls, P.EmbeddingScheme)
