"""The same numbers on a CUDA device as on the CPU: forward, streaming, FlexAttention training, decoding.

Skipped where no CUDA device is present (CI); run on a GPU machine with ``python -m pytest -m gpu``.
TF32 is switched off so that float32 on the GPU is comparable with the CPU to 1e-4.
"""

import pytest
import torch

from extrap.model import GPT, ModelConfig

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SCHEMES = ["alibi", "kerple-log", "t5", "type1", "fire", "rope", "xpos", "sinusoidal", "nope", "window:16"]


@pytest.fixture(autouse=True)
def _no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _pair(pe: str, **cfg):
    torch.manual_seed(0)
    cpu = GPT(ModelConfig(pe=pe, n_layer=2, d_model=64, n_head=4, **cfg)).eval()
    gpu = GPT(ModelConfig(pe=pe, n_layer=2, d_model=64, n_head=4, **cfg)).eval()
    gpu.load_state_dict(cpu.state_dict())
    return cpu, gpu.cuda()


@pytest.mark.parametrize("pe", SCHEMES)
def test_forward_on_cuda_equals_cpu(pe):
    cpu, gpu = _pair(pe)
    x = torch.randint(0, 256, (2, 300))
    with torch.no_grad():
        want = cpu(x).logits
        got = gpu(x.cuda()).logits.cpu()
        want_w = cpu(x, window=40).logits
        got_w = gpu(x.cuda(), window=40).logits.cpu()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got_w, want_w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pe", ["alibi", "kerple-log", "rope"])
def test_streamed_score_on_cuda_equals_cpu(pe):
    from extrap.evaluate.score import score_tokens

    cpu, gpu = _pair(pe)
    ids = torch.randint(0, 256, (3000,))
    want = score_tokens(cpu, ids, window=64, chunk=512)
    got = score_tokens(gpu, ids.cuda(), window=64, chunk=512)
    assert got.loss == pytest.approx(want.loss, rel=1e-5)


@pytest.mark.parametrize("pe", ["alibi", "kerple-log"])
def test_flex_attention_trains_on_cuda_like_the_blocked_kernel(pe):
    _, blocked = _pair(pe, attn_backend="blocked")
    _, flex = _pair(pe, attn_backend="flex")
    x = torch.randint(0, 256, (2, 256), device="cuda")
    for m in (blocked, flex):
        m.train()
        loss = torch.nn.functional.cross_entropy(m(x[:, :-1]).logits.flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
    torch.testing.assert_close(flex(x).logits, blocked(x).logits, rtol=2e-4, atol=2e-4)
    for (name, a), (_, b) in zip(flex.named_parameters(), blocked.named_parameters()):
        if not a.requires_grad:  # ALiBi's slopes are fixed
            continue
        assert a.grad is not None and torch.isfinite(a.grad).all(), name
        torch.testing.assert_close(a.grad, b.grad, rtol=2e-3, atol=2e-4, msg=name)


def test_kv_cache_decoding_on_cuda_equals_the_full_forward():
    _, gpu = _pair("alibi")
    x = torch.randint(0, 256, (1, 96), device="cuda")
    cache = gpu.new_cache()
    with torch.no_grad():
        full = gpu(x).logits
        steps = torch.cat(
            [gpu.step(x[:, :64], 0, cache)] + [gpu.step(x[:, t : t + 1], t, cache) for t in range(64, 96)], 1
        )
    torch.testing.assert_close(steps, full, rtol=1e-4, atol=1e-4)


def test_training_a_run_on_cuda_and_reading_it_on_cpu(tmp_path, tiny_text):
    import extrap
    from extrap.train import build_configs, train

    m, t = build_configs("alibi", "smoke", overrides=dict(steps=6, corpus=tiny_text, train_length=64, device="cuda"))
    summary = train(tmp_path / "run", m, t, progress=False)
    assert summary.step == 6 and summary.final_loss == summary.final_loss
    run = extrap.load(tmp_path / "run")  # weights saved from the GPU load on the CPU
    assert next(run.model.parameters()).device.type == "cpu"
