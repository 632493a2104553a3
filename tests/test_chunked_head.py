"""Scored tokens from the final hidden states, the head over chunks of positions (extrap.model.scoring): the
losses equal the full logits' (float32, rtol = atol = 1e-5: the same matmuls on fewer rows), no (L, V) logits
tensor is made, and the memory estimate of an 8B-shaped model at 128k counts one chunk of logits."""

import pytest
import torch
import torch.nn.functional as F

from extrap.evaluate.driver import evaluation_estimate
from extrap.evaluate.streaming import token_nll
from extrap.extend import extend_model, parse
from extrap.model import GPT, ModelConfig, scoring
from extrap.tasks.continuations import score_candidates

GB = 1 << 30
TOL = dict(rtol=1e-5, atol=1e-5)


def _full_nll(logits, y):
    return F.cross_entropy(logits.float().transpose(1, 2), y, reduction="none")


def _record_positions(module) -> list[int]:
    """The positions of every logits tensor ``module`` (a head) returns, appended as it runs."""
    seen: list[int] = []
    module.register_forward_hook(lambda m, args, out: seen.append(out.shape[1]))
    return seen


@pytest.fixture
def tiny_budget(monkeypatch):
    """A logits budget of one element: every chunk is MIN_CHUNK (16) positions."""
    monkeypatch.setattr(scoring, "LOGITS_BUDGET", 1)
    return scoring.MIN_CHUNK


@pytest.mark.parametrize("pe", ["alibi", "rope", "rope+self-extend"])
def test_gpt_chunked_nll_equals_full_logits(pe, tiny_budget):
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=64, n_layer=2, d_model=32, n_head=2, pe=pe.split("+")[0])).eval()
    with torch.no_grad():
        for blk in model.blocks:
            blk.attn.qkv.weight.mul_(20)  # sharper attention than the init's, so that positions matter
    x, y = (torch.randint(0, 64, (2, 70), generator=torch.Generator().manual_seed(s)) for s in (4, 5))
    with torch.no_grad():
        plain = _full_nll(model(x).logits, y)
    if "+" in pe:
        extend_model(model, parse(pe.split("+")[1], 12))  # in the attention: the body call must keep it
    with torch.no_grad():
        want = _full_nll(model(x).logits, y)
    if "+" in pe:
        assert not torch.allclose(want, plain, atol=1e-3)  # 70 > L_tr = 12: the extension changes the losses
    seen = _record_positions(model.head)
    got = token_nll(model, x, y)
    assert max(seen) <= tiny_budget < 70 and len(seen) == 5  # ceil(70 / 16) chunks, never (70, V)
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(token_nll(model, x, y, score_last=30), want[:, -30:], **TOL)


@pytest.fixture(scope="module")
def llama(tmp_path_factory, hf_tokenizer):
    from conftest import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("llama"), hf_tokenizer, hidden=32, max_positions=16)


@pytest.mark.parametrize("extend", [None, "self-extend:group=2,window=4"])
def test_hf_llama_chunked_nll_equals_full_logits(llama, extend, tiny_budget):
    import extrap
    from extrap.extend import extend_run

    run = extrap.load(f"hf:{llama}", device="cpu", dtype="float32")
    x, y = (torch.randint(0, 300, (2, 40), generator=torch.Generator().manual_seed(s)) for s in (1, 2))
    with torch.no_grad():
        plain = _full_nll(run.model.hf(input_ids=x).logits, y)  # transformers' own forward
    if extend:
        extend_run(run, extend)
    assert run.model.chunked_head
    with torch.no_grad():
        want = _full_nll(run.model(x).logits, y)
    if extend:
        assert not torch.allclose(want, plain, atol=1e-3)  # 40 > L_tr = 16
    else:
        torch.testing.assert_close(want, plain, **TOL)
    seen = _record_positions(run.model.hf.get_output_embeddings())
    got = token_nll(run.model, x, y)
    assert max(seen) <= tiny_budget < 40 and len(seen) == 3
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(token_nll(run.model, x, y, score_last=7), want[:, -7:], **TOL)


def test_hf_family_without_an_exact_head_keeps_the_full_logits(llama, monkeypatch):
    import extrap
    import extrap.hf.model as hf_model

    run = extrap.load(f"hf:{llama}", device="cpu", dtype="float32")
    monkeypatch.setattr(hf_model, "HEAD_FAMILIES", ())
    assert not run.model.chunked_head
    x, y = (torch.randint(0, 300, (1, 20), generator=torch.Generator().manual_seed(s)) for s in (1, 2))
    seen = _record_positions(run.model.hf.get_output_embeddings())
    with torch.no_grad():
        torch.testing.assert_close(token_nll(run.model, x, y), _full_nll(run.model.hf(input_ids=x).logits, y), **TOL)
    assert seen[0] == 20  # the full logits, as the causal LM computes them


def test_ranking_prefills_the_prompt_without_its_logits():
    """score_candidates (task score, RULER rank) needs the prompt's last logits only: one position, not L."""
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=64, n_layer=2, d_model=32, n_head=2, pe="rope")).eval()
    prompt = torch.randint(0, 64, (200,), generator=torch.Generator().manual_seed(3)).tolist()
    conts = [[5, 6, 7], [8, 9]]
    seen = _record_positions(model.head)
    got = score_candidates(model, prompt, conts)
    assert max(seen) == 1
    with torch.no_grad():
        for c, r in zip(conts, got):
            logp = F.log_softmax(model(torch.tensor([prompt + c[:-1]])).logits[0, len(prompt) - 1 :], -1)
            assert r.loglik == pytest.approx(float(logp.gather(1, torch.tensor(c)[:, None]).sum()), rel=1e-5, abs=1e-5)


def _llama_8b(transformers):
    """Llama-3.1-8B's shape from its config (vocab 128,256, d 4096, 32 layers), bf16, on the meta device: no weights."""
    from extrap.hf.model import HFModel

    cfg = transformers.LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, max_position_embeddings=131072, rope_theta=500000.0,
    )  # fmt: skip
    with torch.device("meta"):
        hf = transformers.LlamaForCausalLM._from_config(cfg, dtype=torch.bfloat16)
    return HFModel(hf, "llama", "hf:llama/rope")


def test_8b_shape_at_128k_fits_beside_its_weights(monkeypatch):
    """80 GB less the 16 GB of bf16 weights (which the estimate leaves out: it is compared with the memory
    free once they are loaded) holds the estimate at 128k; with all 128k positions' float32 logits it did not."""
    model = _llama_8b(pytest.importorskip("transformers"))
    chunked = evaluation_estimate(model, 131072, 1, None)
    assert chunked < 64 * GB
    head = 4 * 128256 * scoring.chunk_size(1, 128256)  # one chunk of float32 logits: 130 positions
    assert evaluation_estimate(model, 131072, 1, None, logits=False) + head == chunked
    import extrap.hf.model as hf_model

    monkeypatch.setattr(hf_model, "HEAD_FAMILIES", ())
    assert evaluation_estimate(model, 131072, 1, None) - chunked == 4 * 128256 * (131072 - 130)
    assert evaluation_estimate(model, 131072, 1, None) > 64 * GB
