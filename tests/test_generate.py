"""KV-cache decoding equals the full forward pass; a rolling cache equals windowed attention."""

import pytest
import torch

from extrap.errors import ExtrapError
from extrap.model import GPT, ModelConfig
from extrap.model.generate import KVCache, generate, step_logits


@pytest.mark.parametrize(
    "pe", ["alibi", "kerple-log", "t5", "sandwich", "fire", "rope", "xpos", "sinusoidal", "nope", "window:5"]
)
@pytest.mark.parametrize("window", [None, 6])
def test_cached_steps_match_the_forward_pass(pe, window):
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4)).eval()
    x = torch.randint(0, 256, (2, 20))
    with torch.no_grad():
        full = model(x, window=window).logits
    cache = KVCache(window)
    steps = torch.stack([step_logits(model, x[:, p], p, cache) for p in range(20)], dim=1)
    if pe == "xpos":  # xPos centres positions on the sequence; scores stay relative up to float error
        torch.testing.assert_close(steps, full, rtol=1e-4, atol=1e-4)
    else:
        torch.testing.assert_close(steps, full, rtol=1e-5, atol=1e-5)
    if window is not None:
        assert cache.layers[0].keys.shape[2] == window


def test_generate_greedy_is_deterministic_and_extends_the_prompt():
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="alibi", n_layer=1, d_model=16, n_head=2))
    prompt = torch.randint(0, 256, (1, 5))
    a = generate(model, prompt, 7, cache_window=4)
    b = generate(model, prompt, 7, cache_window=4)
    assert a.shape == (1, 12) and torch.equal(a, b) and torch.equal(a[:, :5], prompt)


@pytest.mark.parametrize("pe", ["alibi", "fire", "rope", "sinusoidal", "learned"])
@pytest.mark.parametrize("window", [None, 5])
def test_step_over_chunks_of_tokens_matches_the_forward_pass(pe, window):
    """model.step: a prompt of several tokens in one call, then single tokens, then a chunk again."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=2, d_model=32, n_head=4, attn_block=4)).eval()
    x = torch.randint(0, 256, (2, 20))
    with torch.no_grad():
        full = model(x, window=window).logits
    cache = model.new_cache(window)
    parts = [model.step(x[:, :9], 0, cache)] + [model.step(x[:, p : p + 1], p, cache) for p in (9, 10)]
    parts.append(model.step(x[:, 11:], 11, cache))
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-5, atol=1e-5)
    with pytest.raises(ExtrapError, match="window"):
        model.new_cache(0)
