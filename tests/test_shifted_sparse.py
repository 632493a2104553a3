"""LongLoRA's S²-Attn (training only): groups, the shifted half of the heads, full attention at inference."""

from __future__ import annotations

import pytest
import torch

from extrap.errors import ExtrapError
from extrap.model import GPT, ModelConfig
from extrap.model.shifted_sparse import group_size, s2_ratio, shifted_sparse_attention


def _uniform_causal(q, k, v):
    """Causal attention with q = 0: every query averages the values of the keys up to it."""
    n = v.shape[2]
    return torch.cumsum(v, dim=2) / torch.arange(1, n + 1).view(1, 1, n, 1)


def test_each_token_averages_exactly_the_keys_of_its_group_by_hand():
    # N = 8, G = 4, 2 heads, v = one-hot of the token.  Head 0: groups {0..3}, {4..7}, causal.  Head 1 sees the
    # sequence rolled by -2: order 2 3 4 5 | 6 7 0 1, so token 4 averages {2, 3, 4}, token 0 {6, 7, 0}, ...
    N, G = 8, 4
    v = torch.eye(N).view(1, 1, N, N).repeat(1, 2, 1, 1)
    q = k = torch.zeros(1, 2, N, N)
    out = shifted_sparse_attention(q, k, v, G, _uniform_causal)
    head0 = {0: [0], 1: [0, 1], 2: [0, 1, 2], 3: [0, 1, 2, 3], 4: [4], 5: [4, 5], 6: [4, 5, 6], 7: [4, 5, 6, 7]}
    head1 = {2: [2], 3: [2, 3], 4: [2, 3, 4], 5: [2, 3, 4, 5], 6: [6], 7: [6, 7], 0: [6, 7, 0], 1: [6, 7, 0, 1]}
    for h, seen in ((0, head0), (1, head1)):
        for t, keys in seen.items():
            want = torch.zeros(N)
            want[keys] = 1 / len(keys)
            assert torch.allclose(out[0, h, t], want, atol=1e-6), (h, t)


def test_the_spec_and_the_group():
    assert s2_ratio("full") is None and s2_ratio("s2") == 0.25 and s2_ratio("s2:ratio=0.5") == 0.5
    assert group_size(128, 0.25) == 32
    for bad in ("s2:ratio=0", "s2:ratio=x", "s2:group=4", "sparse"):
        with pytest.raises(ExtrapError):
            s2_ratio(bad)
    with pytest.raises(ExtrapError, match="even and divide"):
        group_size(100, 0.25)  # G = 25: odd


def test_a_model_trains_with_it_and_reads_with_full_attention():
    torch.manual_seed(0)
    cfg = dict(n_layer=1, d_model=16, n_head=2, pe="rope")
    full, s2 = GPT(ModelConfig(**cfg)), GPT(ModelConfig(**cfg, attention="s2"))
    s2.load_state_dict(full.state_dict())
    x = torch.randint(0, 256, (2, 16))
    full.eval(), s2.eval()
    assert torch.equal(full(x).logits, s2(x).logits)  # inference: full attention, the same model
    s2.train()
    out = s2(x).logits
    assert not torch.allclose(out, full(x).logits, atol=1e-4)  # a later token lost its keys outside its group
    with pytest.raises(ExtrapError, match="rotary PE or NoPE"):
        ModelConfig(**{**cfg, "pe": "alibi"}, attention="s2")


def test_train_attention_flag_trains_with_s2_and_refuses_what_it_cannot(tmp_path, capsys):
    """`extrap train --attention s2:ratio=0.5` records it in the run; a bias PE and an hf: fine-tune refuse it."""
    import json

    from extrap.cli import main

    out = tmp_path / "r"
    argv = ["train", "--preset", "smoke", "--pe", "rope", "--steps", "2", "--out", str(out), "--json"]
    assert main([*argv, "--attention", "s2:ratio=0.5"]) == 0
    assert json.loads((out / "config.json").read_text())["model"]["attention"] == "s2:ratio=0.5"
    capsys.readouterr()
    bad = tmp_path / "b"
    assert main(["train", "--preset", "smoke", "--pe", "alibi", "--out", str(bad), "--attention", "s2"]) == 2
    assert "needs a rotary PE or NoPE" in capsys.readouterr().err and not bad.exists()
    untiled = tmp_path / "g"  # 1e-9 of L = 64: a group of 0 tokens, refused before the run folder is written
    assert (
        main(["train", "--preset", "smoke", "--pe", "rope", "--out", str(untiled), "--attention", "s2:ratio=1e-9"]) == 2
    )
    assert "group size 0" in capsys.readouterr().err and not untiled.exists()
    hf = ["train", "--init-from", f"hf:{tmp_path}", "--out", str(tmp_path / "h"), "--attention", "s2"]
    assert main(hf) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--attention" in err and not (tmp_path / "h").exists()
