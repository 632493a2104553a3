"""StreamingLLM's in-cache positions against NVIDIA kvpress's KeyRerotationPress(StreamingLLMPress(n_sink)).

kvpress cannot be installed beside transformers 5, so its rule is written here from its source:
kvpress/presses/streaming_llm_press.py (``score``: ones, zero on [n_sink, n_sink + n_pruned) with
n_pruned = q_len - int(q_len (1 - compression_ratio))) and kvpress/presses/key_rerotation_press.py
(``compress``: the n_kept = max(1, int(q_len (1 - ratio))) highest scores, sorted; ``_rerotate_cos_sin``
turns each kept key by arange(n_kept) - its old position, so the kept keys sit at 0..n_kept-1).
"""

import pytest
import torch

from extrap.evaluate.streaming import stream_nll
from extrap.extend import extend_model, parse
from extrap.model.gpt import GPT, ModelConfig


def kvpress_positions(q_len: int, n_sink: int, compression_ratio: float) -> tuple[list[int], list[int]]:
    """(kept token indices, their positions after rerotation), as kvpress computes them."""
    n_pruned = q_len - int(q_len * (1 - compression_ratio))
    scores = torch.ones(q_len)
    scores[n_sink : n_sink + n_pruned] = 0
    n_kept = max(1, int(q_len * (1 - compression_ratio)))
    kept = torch.sort(scores.topk(n_kept).indices).values
    delta = torch.arange(n_kept) - kept  # _rerotate_cos_sin: idx - selected_positions
    return kept.tolist(), (kept + delta).tolist()


@pytest.mark.parametrize("n,W,T", [(4, 8, 40), (2, 5, 23), (1, 3, 9)])
def test_sink_positions_equal_kvpress(n, W, T):
    """The query at position T sees n sinks and W - 1 earlier tokens: kvpress compressing the T-token prefix
    to n + W - 1 keys and rerotating them gives the same keys at the same positions, the query next."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=32, n_layer=1, d_model=16, n_head=1, pe="rope")).eval()
    extend_model(model, parse(f"sinks:n={n},window={W}", n + W))
    calls = []
    original = model.scheme.rotate

    def spy(q, k, qpos, k_positions=None, **kw):
        calls.append((qpos.clone(), k_positions.clone()))
        return original(q, k, qpos, k_positions=k_positions, **kw)

    model.scheme.rotate = spy
    try:
        x = torch.randint(0, 32, (1, T + 1))
        stream_nll(model, x, x, W, chunk=1)
    finally:
        model.scheme.rotate = original
    # the last step (query T): the window branch, then the sink branch (keys rotated per branch)
    *_, (q_window, k_window), (q_sink, k_sink) = calls
    n_kept = n + W - 1
    kept, positions = kvpress_positions(T, n, 1 - (n_kept + 0.5) / T)  # int() then gives n_kept exactly
    assert kept == list(range(n)) + list(range(T - (W - 1), T))
    assert k_sink.tolist() + k_window[:-1].tolist() == positions  # the query's own key comes last
    assert int(q_sink[-1]) == int(q_window[-1]) == n_kept == int(k_window[-1])
