"""--extend on a tiny random hf: Llama (built here): q and k reach attention unrotated, are rotated with the
model's own θ at the method's positions, and the cache keeps them so."""

import json
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

import extrap  # noqa: E402
from conftest import save_tiny_llama  # noqa: E402
from extrap.cli import main  # noqa: E402
from extrap.errors import ExtrapError  # noqa: E402
from extrap.extend import extend_run, parse  # noqa: E402
from extrap.positional.rotation import apply_rotary  # noqa: E402

SPECS = ["sinks:n=2,window=8", "lm-infinite:global=2,local=8", "self-extend:group=2,window=4", "dca",
         "rerope:window=4", "leaky-rerope:window=4,k=4", "string"]  # fmt: skip


@pytest.fixture(scope="module")
def folder(tmp_path_factory, hf_tokenizer):
    return save_tiny_llama(tmp_path_factory.mktemp("llama"), hf_tokenizer, hidden=32, max_positions=16)


def _reference(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Dense: softmax((R(d_ij) q_i)·k_j) v row by row, d from the method's map, θ from the rotary module."""
    method, rot = module._extrap_extend, module._extrap_rotary
    rep = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(rep, 1), value.repeat_interleave(rep, 1)
    B, H, N, D = query.shape
    d = method.distance(torch.arange(N), torch.arange(N))
    out = torch.zeros_like(query)
    for r in range(N):
        seen = ~d[r].isnan()
        qr = apply_rotary(query[:, :, r : r + 1].expand(B, H, int(seen.sum()), D), d[r][seen], rot.inv_freq)
        s = (qr * key[:, :, seen]).sum(-1) * scaling
        out[:, :, r] = torch.softmax(s, -1).unsqueeze(-2).matmul(value[:, :, seen]).squeeze(-2)
    return out.transpose(1, 2).contiguous(), None


def _attend_with(run, attention) -> None:
    """Every layer of the hf: run attends with ``attention`` (an AttentionInterface function) from now on."""
    transformers.AttentionInterface.register("extend_reference", attention)
    for m in run.model.hf.modules():
        if hasattr(getattr(m, "config", None), "_attn_implementation"):
            m.config._attn_implementation = "extend_reference"


IDS = torch.randint(0, 300, (2, 40), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("spec", SPECS)
def test_hf_extension_equals_a_dense_reference(folder, spec):
    run = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    plain = run.model(IDS).logits
    extend_run(run, spec)
    assert run.pe.endswith("+" + parse(spec, 16).spec)
    with torch.no_grad():
        got = run.model(IDS).logits
        _attend_with(run, _reference)
        want = run.model(IDS).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, plain, atol=1e-3)  # 40 > 16 = L_tr: the map differs from plain RoPE


def test_a_second_method_replaces_the_first_and_the_module_tree_stays_the_models(folder):
    """bench/gpu.py times one model under method after method: the second extension must equal a fresh
    model's, and extending must not make the rotary module a child of every attention layer."""
    run = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    names = [n for n, _ in run.model.hf.named_modules(remove_duplicate=False)]
    extend_run(run, "self-extend")
    extend_run(run, "rerope")
    assert [n for n, _ in run.model.hf.named_modules(remove_duplicate=False)] == names
    fresh = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    extend_run(fresh, "rerope")
    with torch.no_grad():
        torch.testing.assert_close(run.model(IDS).logits, fresh.model(IDS).logits, rtol=0, atol=0)


def test_hf_no_op_window_is_plain_rope(folder):
    run = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    plain = run.model(IDS).logits
    extend_run(run, parse("rerope:window=15", 16))
    with torch.no_grad():
        torch.testing.assert_close(run.model(IDS[:, :15]).logits, plain[:, :15], rtol=1e-5, atol=1e-5)


def test_hf_cached_generation_equals_full_passes(folder):
    from extrap.model.generate import generate

    run = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    extend_run(run, "self-extend:group=2,window=4")
    prompt = IDS[:1, :10]
    out = generate(run.model, prompt, 20, greedy=True)
    x = prompt
    with torch.no_grad():
        for _ in range(20):
            x = torch.cat([x, run.model(x).logits[:, -1:].argmax(-1)], 1)
    assert torch.equal(out, x)


def test_hf_eval_cli_and_refusals(folder, tiny_text, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXTRAP_CACHE", str(tmp_path / "cache"))
    base = ["eval", f"hf:{folder}", "--corpus", tiny_text, "--lengths", "16,48", "--tokens", "96", "--dtype", "float32"]
    assert main([*base, "--extend", "self-extend:group=2,window=4", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"].endswith("+self-extend:group=2,window=4") and all(math.isfinite(r["ppl"]) for r in rep["results"])
    out = tmp_path / "o.json"
    assert main([*base, "--extend", "rerope", "--window", "8", "--out", str(out)]) == 2
    assert not out.exists() and capsys.readouterr().err.count("\n") == 1
    assert main(["align", f"hf:{folder}", "--extend", "rerope", "--lengths", "32"]) == 2
    run = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    extend_run(run, "rerope")
    with pytest.raises(ExtrapError):
        run.model.new_cache(8)


FAMILIES = {  # the other Llama-family architectures --extend accepts: (config class, model class)
    "mistral": ("MistralConfig", "MistralForCausalLM"),  # without its own sliding window (refused: below)
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_other_families_equal_the_dense_reference(family, tmp_path, hf_tokenizer):
    classes = tuple(getattr(transformers, n) for n in FAMILIES[family])
    save_tiny_llama(tmp_path, hf_tokenizer, hidden=32, max_positions=16, classes=classes, head_dim=8)
    run = extrap.load(f"hf:{tmp_path}", device="cpu", dtype="float32")
    plain = run.model(IDS).logits
    extend_run(run, "self-extend:group=2,window=4")
    with torch.no_grad():
        got = run.model(IDS).logits
        _attend_with(run, _reference)
        want = run.model(IDS).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, plain, atol=1e-3)


def test_a_model_with_its_own_sliding_window_is_refused(tmp_path, hf_tokenizer):
    sizes = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)
    cfg = transformers.MistralConfig(vocab_size=300, num_key_value_heads=2, sliding_window=8, head_dim=8, **sizes)
    transformers.MistralForCausalLM(cfg).save_pretrained(tmp_path)
    hf_tokenizer.save_pretrained(tmp_path)
    run = extrap.load(f"hf:{tmp_path}", device="cpu", dtype="float32")
    with pytest.raises(ExtrapError, match="sliding window"):
        extend_run(run, "rerope")


def _scaled_reference(tau: float, log_length: int):
    """Dense, with the logit scale written here: s(i) (bojone/rerope's max(1, ln(i+1)/ln L_tr)) / (τ √D)."""

    def attend(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        i = torch.arange(query.shape[2], dtype=torch.float64)
        s = (torch.log(i + 1) / math.log(log_length)).clamp(min=1.0).to(query.dtype)
        return _reference(module, query * s[:, None], key, value, None, query.shape[-1] ** -0.5 / tau)

    return attend


def test_hf_extension_with_a_temperature_equals_the_dense_reference(folder):
    run = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    extend_run(run, "rerope:window=4,log=1")
    with torch.no_grad():
        run.model.set_temperature(1.0)
        alone = run.model(IDS).logits
        run.model.set_temperature(0.7)  # the module's scaling, which hf_extended_attention reads
        got = run.model(IDS).logits
        run.model.set_temperature(1.0)  # the reference applies τ itself
        _attend_with(run, _scaled_reference(0.7, 16))
        want = run.model(IDS).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, alone, atol=1e-3)


def test_hf_cli_takes_a_tau_and_refuses_a_probing_search(folder, tiny_text, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXTRAP_CACHE", str(tmp_path / "cache"))
    base = ["eval", f"hf:{folder}", "--corpus", tiny_text, "--lengths", "16,48", "--tokens", "96", "--dtype", "float32",
            "--extend", "rerope:window=4", "--json"]  # fmt: skip
    assert main([*base, "--temperature", "0.8"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"].endswith("+rerope:window=4") and rep["temperature"] == {"mode": "fixed", "tau": 0.8}
    assert main([*base, "--temperature", "auto:log-length"]) == 0  # τ = log_48 16 reads no attention
    rep = json.loads(capsys.readouterr().out)
    assert rep["temperature"]["tau"]["48"] == pytest.approx(math.log(16) / math.log(48), rel=1e-12)
    out = tmp_path / "o.json"
    for auto in (["--temperature", "auto"], ["--temperature", "auto", "--align-mode", "prop2"]):
        assert main([*base, *auto, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "hf: models" in err and not out.exists()
    run = extrap.load(f"hf:{folder}", device="cpu", dtype="float32")
    extend_run(run, "rerope")
    with pytest.raises(ExtrapError, match="not available"):  # eager logits would be unrotated: refused
        run.model.layer_logits(IDS[:, :8])
