"""T5 relative-position buckets: extrap's torch, sympy and mpmath rules against transformers' own."""

from __future__ import annotations

import math

import mpmath
import pytest
import sympy
import torch

transformers = pytest.importorskip("transformers")
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

from extrap import positional as P  # noqa: E402
from extrap.errors import ExtrapError  # noqa: E402
from extrap.positional import ops, t5_bucket  # noqa: E402

SETTINGS = [(32, 128), (8, 16), (16, 64), (64, 512), (10, 20), (6, 7), (33, 200), (128, 1000)]
DISTANCES = torch.arange(-5000, 5001)  # t = i - j: past keys t >= 0, future keys t < 0


def hf_bucket(t: torch.Tensor, bidirectional: bool, nb: int, md: int) -> torch.Tensor:
    """transformers' bucket of relative_position = j - i = -t."""
    return T5Attention._relative_position_bucket(-t, bidirectional=bidirectional, num_buckets=nb, max_distance=md)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("nb, md", SETTINGS)
def test_torch_bucket_equals_transformers(nb, md, bidirectional):
    ours = t5_bucket(DISTANCES, bidirectional, nb, md)
    assert torch.equal(ours, hf_bucket(DISTANCES, bidirectional, nb, md))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("nb, md", SETTINGS)
def test_sympy_bucket_equals_transformers(nb, md, bidirectional):
    t = sympy.Symbol("t", integer=True)  # both signs: future keys too
    expr = t5_bucket(t, bidirectional, nb, md, xp=ops.SYMPY)
    as_int = sympy.lambdify(t, expr, "math")
    ours = torch.tensor([int(as_int(k)) for k in DISTANCES.tolist()])
    want = hf_bucket(DISTANCES, bidirectional, nb, md)
    assert torch.equal(ours, want)
    for k in DISTANCES[::97].tolist():  # exact substitution agrees with the evaluated form
        assert int(expr.subs(t, k)) == int(want[k + 5000])
    # the library's own distance symbol (t >= 0): the past half alone
    past = t5_bucket(P.T, bidirectional, nb, md, xp=ops.SYMPY)
    assert [int(past.subs(P.T, k)) for k in range(0, 5001, 37)] == want[5000::37].tolist()


@pytest.mark.parametrize("bidirectional", [True, False])
def test_mpmath_bucket_equals_transformers(bidirectional):
    want = hf_bucket(DISTANCES, bidirectional, 32, 128)
    for k in range(-5000, 5001, 53):
        assert t5_bucket(mpmath.mpf(k), bidirectional, 32, 128, xp=ops.MPMATH) == int(want[k + 5000])


@pytest.mark.parametrize("bidirectional", [True, False])
def test_bias_is_the_table_entry_on_every_backend(bidirectional):
    """r(t) = table[head, bucket(t)] for past keys, in float64, exactly (sympy) and in mpmath."""
    nb, md = 16, 40
    scheme = P.get(f"t5:num_buckets={nb},max_distance={md},bidirectional={str(bidirectional).lower()}")
    table = torch.randn(3, nb, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    values = {"table": table}
    ts = torch.arange(0, 400)
    want = table[:, hf_bucket(ts, bidirectional, nb, md)]  # (H, len(ts))
    assert torch.equal(scheme.bias(ts, values), want)
    for h in range(3):
        expr = scheme.symbolic(h, values)
        for k in (0, 1, 3, 7, 12, 25, 39, 40, 41, 399, 10**6):
            b = int(hf_bucket(torch.tensor([k]), bidirectional, nb, md)[0])
            assert float(expr.subs(P.T, k)) == pytest.approx(float(table[h, b]), rel=1e-15, abs=1e-15)
            assert float(scheme.scalar(k, h, values)) == pytest.approx(float(table[h, b]), rel=1e-15, abs=1e-15)


def test_steps_start_where_transformers_changes_bucket():
    from extrap.positional.bias import t5_bucket_steps

    for bidirectional in (True, False):
        steps = t5_bucket_steps(bidirectional, 32, 128)
        b = hf_bucket(torch.arange(0, 2000), bidirectional, 32, 128)
        changes = [0] + [k for k in range(1, 2000) if b[k] != b[k - 1]]
        assert [s for s, _ in steps] == changes and [v for _, v in steps] == b[changes].tolist()
    with pytest.raises(ExtrapError, match="max_distance"):
        t5_bucket_steps(False, 32, 16)  # log buckets would run backwards below max_exact = 16


# ---------------------------------------------------------------------------
# the theory of a T5 checkpoint: the tail weight of each head
# ---------------------------------------------------------------------------
def _save(model, path):
    with torch.no_grad():  # a table with a clearly non-zero tail
        for m in model.modules():
            if hasattr(m, "relative_attention_bias"):
                m.relative_attention_bias.weight.normal_(0, 1)
    model.save_pretrained(path)
    return path


def _config(**kw):
    return dict(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, **kw)


def _expected_tail(weight: torch.Tensor, bidirectional: bool, nb: int, md: int) -> list[float]:
    """exp(table[h, bucket at a far past distance] - the head's largest past bias), from HF's buckets."""
    b = hf_bucket(torch.arange(0, 5001), bidirectional, nb, md)
    past = weight.double()[b]  # (distances, H)
    return [math.exp(float(past[-1, h] - past[:, h].max())) for h in range(weight.shape[1])]


def test_t5_checkpoint_tail_weights_use_the_past_buckets(tmp_path):
    from extrap.hf import hf_theory

    torch.manual_seed(0)
    nb, md = 16, 64
    cfg = transformers.T5Config(relative_attention_num_buckets=nb, relative_attention_max_distance=md, **_config())
    model = transformers.T5ForConditionalGeneration(cfg)
    _save(model, tmp_path / "t5")
    rows = hf_theory(f"hf:{tmp_path / 't5'}", eps=[1e-3], lengths=[64])
    for part, bidirectional in (("encoder", True), ("decoder", False)):
        stack = model.encoder if part == "encoder" else model.decoder
        weight = stack.block[0].layer[0].SelfAttention.relative_attention_bias.weight.detach()
        got = [r for r in rows if r.part == part]
        assert [r.result.head for r in got] == [0, 1, 2, 3]
        assert [r.result.tail_term for r in got] == pytest.approx(
            _expected_tail(weight, bidirectional, nb, md), rel=1e-9
        )
        assert torch.equal(torch.tensor([r.params["table"] for r in got]), weight.double().T)


def test_t5_encoder_only_checkpoint(tmp_path):
    from extrap.hf import hf_theory

    torch.manual_seed(1)
    cfg = transformers.T5Config(relative_attention_num_buckets=32, relative_attention_max_distance=128, **_config())
    model = transformers.T5EncoderModel(cfg)
    _save(model, tmp_path / "enc")
    rows = hf_theory(f"hf:{tmp_path / 'enc'}", eps=[1e-3], lengths=[64])
    weight = model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.detach()
    assert {r.part for r in rows} == {"encoder"}
    assert [r.result.tail_term for r in rows] == pytest.approx(_expected_tail(weight, True, 32, 128), rel=1e-9)


def test_umt5_tables_of_every_layer(tmp_path):
    """UMT5 gives each layer its own bucket table: every layer's heads are analysed."""
    from extrap.hf import hf_theory

    torch.manual_seed(2)
    cfg = transformers.UMT5Config(relative_attention_num_buckets=8, relative_attention_max_distance=16, **_config())
    model = transformers.UMT5EncoderModel(cfg)
    _save(model, tmp_path / "umt5")
    rows = hf_theory(f"hf:{tmp_path / 'umt5'}", eps=[1e-3], lengths=[64])
    assert sorted({r.layer for r in rows}) == [0, 1] and len(rows) == 8
    for layer in (0, 1):
        weight = model.encoder.block[layer].layer[0].SelfAttention.relative_attention_bias.weight.detach()
        got = [r.result.tail_term for r in rows if r.layer == layer]
        assert got == pytest.approx(_expected_tail(weight, True, 8, 16), rel=1e-9)
