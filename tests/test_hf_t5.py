"""Softmax temperature in Hugging Face T5 attention (004), on a tiny random T5: no download."""

import pytest
import torch

pytest.importorskip("transformers")

from extrap.errors import ExtrapError  # noqa: E402
from extrap.hf.t5 import (  # noqa: E402
    attention_modules,
    get_t5_temperature,
    load_t5,
    remove_t5_temperature,
    set_t5_temperature,
    t5_algorithm1,
    t5_attention_stats,
)


def _config():
    from transformers import T5Config

    return T5Config(
        d_model=32,
        d_kv=8,
        num_heads=4,
        num_layers=2,
        d_ff=64,
        vocab_size=100,
        decoder_start_token_id=0,
        dropout_rate=0.0,
    )


@pytest.fixture
def t5():
    from transformers import T5ForConditionalGeneration

    torch.manual_seed(0)
    return T5ForConditionalGeneration(_config()).eval()


def _logits(model, x, y):
    with torch.no_grad():
        return model(input_ids=x, decoder_input_ids=y).logits


def test_tau_one_is_exact_and_hooks_are_removable(t5):
    x, y = torch.randint(0, 100, (2, 24)), torch.randint(0, 100, (2, 5))
    base = _logits(t5, x, y)
    handle = set_t5_temperature(t5, 1.0)
    assert torch.equal(_logits(t5, x, y), base)
    set_t5_temperature(t5, 0.6)
    assert get_t5_temperature(t5) == [0.6] * len(attention_modules(t5))
    changed = _logits(t5, x, y)
    assert (changed - base).abs().max() > 1e-3
    handle.remove()
    assert torch.equal(_logits(t5, x, y), base)
    for _, mod in attention_modules(t5):
        assert not mod._forward_hooks and not mod._forward_pre_hooks
        assert "compute_bias" not in mod.__dict__ and mod.scaling == 1.0
    remove_t5_temperature(t5)  # idempotent


def test_tau_divides_scores_and_position_bias_in_every_layer(t5):
    """Layer 1 receives layer 0's bias unscaled and divides it by its own τ; sdpa and eager agree."""
    x = torch.randint(0, 100, (1, 20))
    enc = [m for _, m in attention_modules(t5, "encoder")]
    set_t5_temperature(t5, [1.0, 0.5], part="encoder")
    seen = {}

    def grab(mod, args, kwargs, output):
        seen["h"], seen["w"] = args[0] if args else kwargs["hidden_states"], output[2]

    h = enc[1].register_forward_hook(grab, with_kwargs=True)
    t5.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            eager = t5.get_encoder()(input_ids=x).last_hidden_state
            hid = seen["h"]
            q = enc[1].q(hid).view(1, 20, 4, 8).transpose(1, 2)
            k = enc[1].k(hid).view(1, 20, 4, 8).transpose(1, 2)
            bias = enc[0].compute_bias(20, 20)
            expect = torch.softmax((q @ k.transpose(-1, -2) + bias) / 0.5, dim=-1)
    finally:
        h.remove()
        t5.set_attn_implementation("sdpa")
    assert torch.allclose(seen["w"], expect, atol=1e-5)
    with torch.no_grad():
        sdpa = t5.get_encoder()(input_ids=x).last_hidden_state
    assert torch.allclose(eager, sdpa, atol=1e-5)


def test_lower_tau_raises_pmax_and_lowers_entropy(t5):
    x = torch.randint(0, 100, (2, 64))
    before = t5_attention_stats(t5, x)
    after = t5_attention_stats(t5, x, tau=0.5)
    assert after["pmax"] > before["pmax"] and after["entropy"] < before["entropy"]
    assert get_t5_temperature(t5) == [1.0] * len(attention_modules(t5))  # probe restored τ
    assert len(before["layers"]) == 2 and before["rows"] == 2 * 4 * 64
    assert t5.config._attn_implementation == "sdpa"
    # dispersed attention: a longer input is flatter
    longer = t5_attention_stats(t5, torch.randint(0, 100, (2, 256)))
    assert longer["pmax"] < before["pmax"] and longer["entropy"] > before["entropy"]
    # padded queries are left out
    mask = torch.ones(2, 64, dtype=torch.long)
    mask[1, 32:] = 0
    assert t5_attention_stats(t5, x, mask)["rows"] == (64 + 32) * 4
    whole = t5_attention_stats(t5, x, decoder_input_ids=torch.zeros(2, 3, dtype=torch.long), part="all")
    assert len(whole["layers"]) == 6


def test_algorithm1_on_t5_encoder_model_and_loading(tmp_path):
    from transformers import T5EncoderModel

    torch.manual_seed(1)
    enc = T5EncoderModel(_config()).eval()
    res = t5_algorithm1(enc, torch.randint(0, 100, (1, 32)), torch.randint(0, 100, (1, 48)), "pmax")
    assert 0.5 <= res.tau <= 1.0 and len(res.search.curve) == 11
    enc.save_pretrained(tmp_path / "enc")
    again = load_t5(tmp_path / "enc", encoder_only=True)
    assert len(attention_modules(again, "encoder")) == 2
    with pytest.raises(ExtrapError):
        load_t5(tmp_path / "missing")
    with pytest.raises(ExtrapError):
        set_t5_temperature(enc, 0.0)
    with pytest.raises(ExtrapError):
        set_t5_temperature(enc, [0.5], part="encoder")
    with pytest.raises(ExtrapError):
        attention_modules(enc, "middle")


def test_missing_transformers_is_a_clear_error(monkeypatch):
    import sys

    import extrap.hf.t5 as hf

    for name in [n for n in sys.modules if n == "transformers" or n.startswith("transformers.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    with pytest.raises(ExtrapError, match=r"extrap\[hf\]"):
        hf.load_t5("/nonexistent")
