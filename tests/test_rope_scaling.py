"""RoPE re-scaling at inference on hf: models: llama3 in extrap's family, every transformers rope type."""

import json
import math

import pytest
import torch

from extrap import positional as P
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.positional import rotary as R

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
V5 = int(transformers.__version__.split(".")[0]) >= 5
needs_v5 = pytest.mark.skipif(not V5, reason="rope_parameters is transformers 5's config layout")

VOCAB = 300


def _registered_types() -> list[str]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return sorted(ROPE_INIT_FUNCTIONS)


def _llama_config(max_pos=32, rope_parameters=None, head_dim=8, heads=4):
    extra = {"rope_parameters": rope_parameters} if rope_parameters else {}
    return transformers.LlamaConfig(
        hidden_size=heads * head_dim,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        vocab_size=VOCAB,
        **extra,
    )


@pytest.fixture(scope="module")
def tokenizer_obj(hf_tokenizer):
    return hf_tokenizer


@pytest.fixture(scope="module")
def llama(tmp_path_factory, tokenizer_obj):
    """Save a tiny random llama (optionally with rope_parameters in its config); returns the folder."""
    cache = {}

    def make(name="plain", rope_parameters=None, config=None):
        if name not in cache:
            torch.manual_seed(0)
            config = config or _llama_config(rope_parameters=rope_parameters)
            model = transformers.AutoModelForCausalLM.from_config(config)
            folder = tmp_path_factory.mktemp(name)
            model.save_pretrained(folder)
            tokenizer_obj.save_pretrained(folder)
            cache[name] = folder
        return cache[name]

    return make


IDS = torch.randint(0, VOCAB, (1, 96), generator=torch.Generator().manual_seed(1))


def _error_lines(err: str) -> list[str]:
    """The lines extrap wrote to stderr (transformers' progress bars share it, separated by carriage returns)."""
    assert "Traceback" not in err
    return [seg for line in err.split("\n") for seg in line.split("\r") if seg.startswith("extrap:")]


def _logits(folder, **options):
    import extrap

    run = extrap.load(f"hf:{folder}", device="cpu", **options)
    with torch.no_grad():
        return run, run.model(IDS).logits


# ---------------------------------------------------------------------------
# llama3 in extrap's own family: definition, HF parity, registry
# ---------------------------------------------------------------------------
def test_llama3_by_wavelength_by_hand():
    """Long wavelengths divided by s, short ones kept, the blend in between (float64, by hand)."""
    d, L, s, low, high = 32, 64, 8.0, 1.0, 4.0
    inv, af = R.rope_frequencies("llama3", d, factor=s, original_max_position=L, dtype=torch.float64)
    theta = [10000.0 ** (-2 * i / d) for i in range(d // 2)]
    kinds = set()
    for i, t in enumerate(theta):
        lam = 2 * math.pi / t
        if lam > L / low:
            want, kinds = t / s, kinds | {"long"}
        elif lam < L / high:
            want, kinds = t, kinds | {"short"}
        else:
            g = (L / lam - low) / (high - low)
            want, kinds = (1 - g) * t / s + g * t, kinds | {"between"}
        assert float(inv[i]) == pytest.approx(want, rel=1e-12)
    assert kinds == {"long", "short", "between"} and af == 1.0


def _hf_llama3(head_dim, base, L, factor, low, high):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rp = dict(
        rope_type="llama3",
        rope_theta=base,
        factor=factor,
        low_freq_factor=low,
        high_freq_factor=high,
        original_max_position_embeddings=L,
    )
    return ROPE_INIT_FUNCTIONS["llama3"](_llama_config(L * 16, rp, head_dim=head_dim, heads=2), None)


@needs_v5
@pytest.mark.parametrize("head_dim,base", [(16, 10000.0), (64, 10000.0), (128, 500000.0)])
@pytest.mark.parametrize("L", [32, 8192])
@pytest.mark.parametrize("factor,low,high", [(8.0, 1.0, 4.0), (2.0, 1.0, 4.0), (4.0, 2.0, 8.0), (16.0, 0.5, 3.0)])
def test_llama3_matches_transformers(head_dim, base, L, factor, low, high):
    bounds = dict(low_freq_factor=low, high_freq_factor=high)
    ours = R.rope_frequencies("llama3", head_dim, base=base, factor=factor, original_max_position=L, **bounds)
    inv_hf, af_hf = _hf_llama3(head_dim, base, L, factor, low, high)
    assert ours[0].dtype == inv_hf.dtype == torch.float32
    torch.testing.assert_close(ours[0], inv_hf, rtol=1e-6, atol=0)
    assert ours[1] == af_hf == 1.0


@needs_v5
def test_llama3_scheme_rotates_like_transformers():
    """rope:scaling=llama3 == LlamaRotaryEmbedding + apply_rotary_pos_emb, past the training length."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    D, L = 32, 80
    rp = dict(rope_type="llama3", rope_theta=10000.0, factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0)
    cfg = _llama_config(32, {**rp, "original_max_position_embeddings": 16}, head_dim=D, heads=2)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 2, L, D, generator=g), torch.randn(2, 2, L, D, generator=g)
    pos = torch.arange(L).expand(2, L)
    q_hf, k_hf = apply_rotary_pos_emb(q, k, *LlamaRotaryEmbedding(cfg)(q, pos))
    q2, k2 = P.get("rope:scaling=llama3,factor=4,original_max_position=16").rotate(q, k, pos)
    torch.testing.assert_close(q2, q_hf, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(k2, k_hf, rtol=1e-6, atol=1e-6)


def test_llama3_registry_refusals():
    s = P.get("rope:scaling=llama3,factor=8,original_max_position=64,low_freq_factor=2,high_freq_factor=8")
    assert s.opts["low_freq_factor"] == 2.0 and P.get(s.spec).spec == s.spec
    for bad, words in (
        ("rope:scaling=llama3,factor=8", "needs original_max_position"),
        ("rope:scaling=llama3,factor=8,original_max_position=64,low_freq_factor=4", "low_freq_factor <"),
        ("rope:scaling=linear,factor=2,high_freq_factor=8", "only applies to scaling=llama3"),
    ):
        with pytest.raises(ExtrapError, match=words):
            P.get(bad)


def test_request_parsing():
    from extrap.positional.rope_scaling import RopeRequest

    r = RopeRequest.parse("hf:llama3:low_freq_factor=2, high_freq_factor=8", 4)
    assert (r.hf, r.kind, r.factor) == (True, "llama3", 4.0)
    assert r.options == {"low_freq_factor": "2", "high_freq_factor": "8"}
    assert r.name == "hf:llama3" and RopeRequest.parse("yarn").factor == 1.0
    for text, factor in (("", None), ("hf:", None), ("llama3:low", None), ("yarn:factor=2", None), ("linear", 0.0)):
        with pytest.raises(ExtrapError):
            RopeRequest.parse(text, factor)


# ---------------------------------------------------------------------------
# hf: models: every type transformers registers works, or is refused in one line
# ---------------------------------------------------------------------------
WORKS = {"linear", "dynamic", "yarn", "llama3", "proportional"}
NEEDS_CONFIG = {"longrope": "long_factor, short_factor"}


@needs_v5
@pytest.mark.parametrize("kind", _registered_types())
def test_every_registered_type_api(llama, kind):
    folder = llama()
    _, base = _logits(folder)
    try:
        run, scaled = _logits(folder, rope=f"hf:{kind}", factor=4.0)
    except ExtrapError as e:
        assert "\n" not in str(e) and kind not in WORKS
        if kind in NEEDS_CONFIG:
            assert NEEDS_CONFIG[kind] in str(e)
        return
    assert kind not in NEEDS_CONFIG and torch.isfinite(scaled).all()
    assert not torch.allclose(scaled, base, atol=1e-4)  # factor 4 changes the frequencies
    assert run.config.rope["rope"] == f"hf:{kind}" and run.config.rope["rope_parameters"]["factor"] == 4.0


@needs_v5
@pytest.mark.parametrize("kind", _registered_types())
def test_every_registered_type_cli(llama, kind, tiny_text, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EXTRAP_CACHE", str(tmp_path / "cache"))
    args = ["eval", f"hf:{llama()}", "--corpus", tiny_text, "--lengths", "32,64", "--tokens", "64"]
    rc = main([*args, "--rope", f"hf:{kind}", "--factor", "4", "--json"])
    out, err = capsys.readouterr()
    if kind in WORKS or rc == 0:
        assert rc == 0 and kind not in NEEDS_CONFIG, err
        rep = json.loads(out)
        assert rep["rope"]["rope_parameters"]["rope_type"] == kind and rep["pe"].endswith(f"+hf:{kind}x4")
        assert all(math.isfinite(r["ppl"]) for r in rep["results"])
    else:
        (line,) = _error_lines(err)
        assert rc == 2 and line.startswith("extrap: error: RoPE hf:") and NEEDS_CONFIG.get(kind, "") in line


@needs_v5
def test_hf_llama3_defaults_and_options_match_ours(llama):
    """hf:llama3 takes Llama 3.1's 1 and 4 and L = L_tr by default, options otherwise; extrap's llama3 agrees."""
    folder = llama()
    run, theirs = _logits(folder, rope="hf:llama3", factor=4.0)
    rp = run.config.rope["rope_parameters"]
    assert (rp["low_freq_factor"], rp["high_freq_factor"], rp["original_max_position_embeddings"]) == (1.0, 4.0, 32)
    _, ours = _logits(folder, rope="llama3", factor=4.0)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    opts = "low_freq_factor=2,high_freq_factor=8"
    run, theirs2 = _logits(folder, rope=f"hf:llama3:{opts},original_max_position_embeddings=16", factor=4.0)
    assert run.config.rope["original_max_position"] == 16
    _, ours2 = _logits(folder, rope=f"llama3:{opts},original_max_position=16", factor=4.0)
    torch.testing.assert_close(ours2, theirs2, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(theirs, theirs2, atol=1e-4)


@needs_v5
def test_parameters_come_from_the_config(llama):
    """A config that already uses the type gives its parameters: re-applying it changes nothing."""
    half = 4  # head_dim 8
    rp = dict(rope_type="llama3", rope_theta=10000.0, factor=2.0, low_freq_factor=2.0, high_freq_factor=8.0)
    folder = llama("llama3cfg", {**rp, "original_max_position_embeddings": 16})
    _, own = _logits(folder)
    run, again = _logits(folder, rope="hf:llama3", factor=2.0)
    assert run.config.rope["rope_parameters"]["low_freq_factor"] == 2.0
    torch.testing.assert_close(again, own, rtol=1e-6, atol=1e-6)
    _, ours = _logits(folder, rope="llama3:low_freq_factor=2,high_freq_factor=8", factor=2.0)  # L = the config's 16
    torch.testing.assert_close(ours, own, rtol=1e-5, atol=1e-5)
    lr = dict(rope_type="longrope", rope_theta=10000.0, long_factor=[1.0, 2.0, 4.0, 8.0], short_factor=[1.0] * half)
    folder = llama("longropecfg", {**lr, "original_max_position_embeddings": 16})
    _, own = _logits(folder)
    _, again = _logits(folder, rope="hf:longrope", factor=2.0)  # the config's factor: 32 / 16
    torch.testing.assert_close(again, own, rtol=1e-6, atol=1e-6)


@needs_v5
@pytest.mark.parametrize(
    "rope,words",
    [
        ("hf:longrope:long_factor=2", "is a list, read from the model's config.json only"),
        ("hf:llama3:beta=3", "takes original_max_position_embeddings, low_freq_factor, high_freq_factor; got beta"),
        ("hf:llama3:low_freq_factor=4", "low_freq_factor < high_freq_factor"),
        ("hf:llama3:low_freq_factor=abc", "must be a number"),
        ("hf:yarn:original_max_position_embeddings=1.5", "must be a positive integer"),
        ("hf:linear:factor=2", "the factor is given on its own"),
        ("hf:bogus", "TYPE must be one of"),
        ("llama3:low_freq_factor", "must be written key=value"),
        ("yarn:alpha=2", "alpha is not one of its options"),
        ("bogus", "must be one of linear, ntk, dynamic, ntk-by-parts, yarn, truncated, llama3"),
    ],
)
def test_refusals_are_one_line(llama, rope, words, tmp_path, capsys):
    assert main(["eval", f"hf:{llama()}", "--rope", rope, "--factor", "4", "--lengths", "32"]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert line.startswith("extrap: error:") and words in line, line


@needs_v5
def test_partial_rotary_neox(llama):
    """GPT-NeoX rotates a quarter of each head: hf:llama3 and extrap's llama3 agree on it; proportional, which
    always gives a whole head of frequencies, is refused in one line."""
    cfg = transformers.GPTNeoXConfig(
        hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32
    )
    cfg.vocab_size = VOCAB
    folder = llama("neox", config=cfg)
    _, theirs = _logits(folder, rope="hf:llama3", factor=4.0)
    _, ours = _logits(folder, rope="llama3", factor=4.0)
    _, plain = _logits(folder)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(ours, plain, atol=1e-4)
    with pytest.raises(ExtrapError, match="gives 16 frequencies per head where this model's rotary embedding has 4"):
        _logits(folder, rope="hf:proportional", factor=4.0)


def test_longrope_list_of_the_wrong_length_is_refused():
    from extrap.hf.rope import hf_rope_parameters
    from extrap.positional.rope_scaling import RopeRequest

    rp = dict(rope_type="longrope", rope_theta=1e4, long_factor=[1.0, 2.0], short_factor=[1.0, 1.0])
    with pytest.raises(ExtrapError, match="long_factor has 2 numbers; this model needs 4"):
        hf_rope_parameters(RopeRequest.parse("hf:longrope", 2.0), rp, 16, half=4)
    ok = hf_rope_parameters(RopeRequest.parse("hf:longrope", 2.0), {**rp, "original_max_position_embeddings": 8}, 16, 2)
    assert ok["original_max_position_embeddings"] == 8 and ok["long_factor"] == [1.0, 2.0]
