"""A stream through the rolling KV cache equals the one pass it replaces, for every RoPE scaling.

A scaling whose θ depends on the sequence length (dynamic NTK, longrope) takes it once per sequence,
never per chunk; hf: yarn/longrope without a factor keep the factor transformers derives.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

from extrap.evaluate.score import score_tokens
from extrap.model import GPT, ModelConfig
from extrap.model.generate import generate
from extrap.positional.rope_scaling import SCALINGS, RopeRequest

L_ORIG, FACTOR = 32, 4
T, W, CHUNK = 160, 24, 48  # T > L_ORIG and several chunks of 48
RTOL = 1e-5


# LongRoPE's per-pair divisors for this model's 8 pairs (head dim 16): short up to L_ORIG, long beyond
LONGROPE = ",short_factor=1/1/1/1/1.1/1.2/1.3/1.4,long_factor=1/1.2/1.5/2/3/4/4/4"


def _spec(scaling: str, pe: str = "rope") -> str:
    if scaling == "none":
        return pe
    return f"{pe}:scaling={scaling},factor={FACTOR},original_max_position={L_ORIG}" + (
        LONGROPE if scaling == "longrope" else ""
    )


SPECS = [_spec(s) for s in SCALINGS] + [_spec("none", "xpos"), _spec("dynamic", "xpos")]
VARIANTS = [
    "rope:p=0.5",
    "rope:partial=0.5",
    "rope:resonance=1",
    "xpos:partial=0.5,p=0.75,resonance=1",
    f"rope:partial=0.5,p=0.5,resonance=1,scaling=longrope,factor={FACTOR},original_max_position={L_ORIG},"
    "short_factor=1/1/1.1/1.2,long_factor=1/2/4/4",
]  # fmt: skip  (4 pairs: a rotary dim of 8)


def _ids(vocab: int, n: int = T + 1, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed))


def _gpt(spec: str) -> GPT:
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=spec, n_layer=2, d_model=32, n_head=2, vocab_size=64)).eval()
    with torch.no_grad():  # sharper attention than at initialisation, so that θ is felt in the loss
        for blk in model.blocks:
            blk.attn.qkv.weight.mul_(8)
            blk.attn.proj.weight.mul_(30)
    return model


def _one_pass_loss(model, ids: torch.Tensor, window: int | None) -> float:
    """The reference: the whole sequence in one forward pass (windowed or exact)."""
    x, y = ids[None, :-1], ids[None, 1:]
    with torch.no_grad():
        logits = model(x, window=window).logits
    return float(F.cross_entropy(logits[0].float(), y[0], reduction="none").double().mean())


def _assert_streams_like_one_pass(model, vocab: int) -> None:
    ids = _ids(vocab)
    windowed = _one_pass_loss(model, ids, W)
    for chunk in (16, CHUNK, 1000):  # several chunks, or one: the chunk does not change the result
        got = score_tokens(model, ids, W, chunk=chunk).loss
        assert got == pytest.approx(windowed, rel=RTOL), (chunk, got, windowed)
    exact = score_tokens(model, ids, None).loss
    assert exact == pytest.approx(_one_pass_loss(model, ids, None), rel=RTOL)
    assert abs(exact - windowed) > 1e-3  # the window matters: the comparison above is not vacuous
    for chunk in (16, CHUNK):  # a window of at least L keys is exact attention, streamed
        assert score_tokens(model, ids, T + 8, chunk=chunk).loss == pytest.approx(exact, rel=RTOL)


@pytest.mark.parametrize("spec", SPECS)
def test_every_scaling_streams_like_its_one_pass(spec):
    _assert_streams_like_one_pass(_gpt(spec), 64)


@pytest.mark.parametrize("spec", VARIANTS)
def test_every_variant_streams_like_its_one_pass(spec):
    """p-RoPE, partial rotary and Resonance through the rolling KV cache: as one pass, as every scaling."""
    _assert_streams_like_one_pass(_gpt(spec), 64)


def test_the_length_dependent_scaling_is_active_at_these_lengths():
    """dynamic differs from plain RoPE past L_ORIG, so its stream compares something real."""
    ids = _ids(64)
    assert abs(_one_pass_loss(_gpt(_spec("dynamic")), ids, W) - _one_pass_loss(_gpt("rope"), ids, W)) > 2e-4


@pytest.mark.parametrize("spec", [_spec("dynamic"), _spec("dynamic", "xpos")])
def test_generate_scores_as_one_pass_over_the_finished_sequence(spec):
    """generate fixes θ by prompt + new tokens: each greedy token is the argmax of one pass over the result."""
    model = _gpt(spec)
    prompt = _ids(64, 20)[None]
    out = generate(model, prompt, 30)
    with torch.no_grad():
        logits = model(out).logits
    assert torch.equal(logits[:, 19:-1].argmax(-1), out[:, 20:])
    cache = model.new_cache(None, seq_len=out.shape[1])  # and the cached steps are that pass, token for token
    steps = torch.cat([model.step(out[:, p : p + 10], p, cache) for p in range(0, 50, 10)], dim=1)
    torch.testing.assert_close(steps, logits, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# hf: Llama with transformers' own dynamic and longrope, and with --rope dynamic
# ---------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")
VOCAB = 300
HALF = 4  # head_dim 8
LONGROPE = dict(rope_type="longrope", rope_theta=1e4, long_factor=[1.0, 2.0, 4.0, 8.0], short_factor=[1.0] * HALF)


@pytest.mark.parametrize("spec", [_spec("dynamic"), _spec("dynamic", "xpos")])
def test_ranked_candidates_share_the_one_pass_rotation(spec):
    """task score --score rank: the prompt-once KV-cache path scores as the batched forward does."""
    from extrap.tasks.continuations import score_candidates, score_continuations

    model = _gpt(spec)
    prompt = _ids(64, 300, seed=3).tolist()
    conts = [_ids(64, 6, seed=s).tolist() for s in (4, 5, 6)]
    cached = score_candidates(model, prompt, conts)
    batched = score_continuations(model, [(prompt, c) for c in conts], batch=len(conts))
    for a, b in zip(cached, batched):
        assert a.loglik == pytest.approx(b.loglik, rel=1e-5)


def _llama_config(max_pos: int, rope_parameters: dict | None = None):
    extra = {"rope_parameters": rope_parameters} if rope_parameters else {}
    return transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=max_pos,
        vocab_size=VOCAB,
        **extra,
    )


def _hf_pair(cfg):
    """(HFModel, an untouched copy of the same transformers model)."""
    from extrap.hf.model import HFModel

    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    with torch.no_grad():
        for layer in hf.model.layers:
            layer.self_attn.q_proj.weight.mul_(8)
            layer.self_attn.k_proj.weight.mul_(8)
    twin = copy.deepcopy(hf)
    return HFModel(hf, "llama", "hf:llama/rope"), twin


CONFIGS = {
    "dynamic": (L_ORIG, dict(rope_type="dynamic", rope_theta=1e4, factor=float(FACTOR))),
    "longrope": (64, {**LONGROPE, "original_max_position_embeddings": 16}),  # Phi-3 style: no factor
}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_hf_config_native_scaling_streams_like_its_one_pass(kind):
    max_pos, rp = CONFIGS[kind]
    model, twin = _hf_pair(_llama_config(max_pos, rp))
    ids = _ids(VOCAB)
    with torch.no_grad():  # one pass is transformers' own, bit for bit (a fresh model: no earlier lengths)
        torch.testing.assert_close(model(ids[None]).logits, twin(input_ids=ids[None]).logits, rtol=0, atol=1e-6)
    _assert_streams_like_one_pass(model, VOCAB)


@pytest.mark.parametrize("rope", ["dynamic", "hf:dynamic"])
def test_hf_requested_dynamic_streams_like_its_one_pass(rope):
    from extrap.hf.rope import apply_rope

    model, _ = _hf_pair(_llama_config(L_ORIG))
    apply_rope(model, rope, float(FACTOR), L_ORIG)
    _assert_streams_like_one_pass(model, VOCAB)


def test_hf_one_pass_does_not_depend_on_earlier_calls():
    """transformers' dynamic keeps the θ of the longest sequence seen; extrap's pass is stateless."""
    max_pos, rp = CONFIGS["dynamic"]
    model, twin = _hf_pair(_llama_config(max_pos, rp))
    ids = _ids(VOCAB)
    with torch.no_grad():
        first = model(ids[None, :64]).logits
        model(ids[None])  # a longer sequence in between
        torch.testing.assert_close(model(ids[None, :64]).logits, first, rtol=0, atol=0)
        torch.testing.assert_close(first, twin(input_ids=ids[None, :64]).logits, rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------
# Item 3: hf:yarn / hf:longrope without a factor keep transformers' derived factor
# ---------------------------------------------------------------------------
def _reference(kind: str, cfg, seq_len: int | None = None):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS[kind](cfg, None, seq_len=seq_len)


def _rotary(model):
    return model.hf.model.rotary_emb


def test_hf_longrope_without_factor_keeps_the_phi3_attention_factor():
    from extrap.hf.rope import apply_rope

    cfg = _llama_config(64, {**LONGROPE, "original_max_position_embeddings": 16})
    model, twin = _hf_pair(cfg)
    ids = _ids(VOCAB, 100)
    with torch.no_grad():
        own = model(ids[None]).logits
    info = apply_rope(model, "hf:longrope", None, 64)
    inv, af = _reference("longrope", cfg)
    assert af == pytest.approx(1.224744871391589) and info["factor"] == 4.0  # sqrt(1 + ln 4 / ln 16), 64 / 16
    assert _rotary(model).attention_scaling == af and info["rope_parameters"]["factor"] == 4.0
    torch.testing.assert_close(_rotary(model).original_inv_freq, inv, rtol=0, atol=0)
    with torch.no_grad():  # the loaded model is unchanged, long factors included (100 > 16)
        torch.testing.assert_close(model(ids[None]).logits, own, rtol=0, atol=1e-6)
        torch.testing.assert_close(own, twin(input_ids=ids[None]).logits, rtol=0, atol=1e-6)


@pytest.mark.parametrize("config", ["yarn-no-factor", "phi3-style"])
def test_hf_yarn_without_factor_takes_transformers_derived_factor(config):
    from extrap.hf.rope import apply_rope

    own = dict(rope_type="yarn", rope_theta=1e4, factor=None, original_max_position_embeddings=16)
    rp = own if config == "yarn-no-factor" else {**LONGROPE, "original_max_position_embeddings": 16}
    model, _ = _hf_pair(_llama_config(64, rp))
    info = apply_rope(model, "hf:yarn", None, 64)
    inv, af = _reference("yarn", _llama_config(64, own))  # transformers: factor = 64 / 16
    assert af == pytest.approx(0.1 * torch.log(torch.tensor(4.0)).item() + 1) and info["factor"] == 4.0
    assert _rotary(model).attention_scaling == af
    torch.testing.assert_close(_rotary(model).inv_freq, inv, rtol=0, atol=0)


def test_hf_factor_given_or_from_the_config_wins():
    from extrap.hf.rope import hf_rope_parameters

    rp = {**LONGROPE, "original_max_position_embeddings": 16}
    assert hf_rope_parameters(RopeRequest.parse("hf:longrope"), rp, 64, HALF, 64)["factor"] == 4.0
    assert hf_rope_parameters(RopeRequest.parse("hf:longrope", 2.0), rp, 64, HALF, 64)["factor"] == 2.0
    assert hf_rope_parameters(RopeRequest.parse("hf:longrope"), {**rp, "factor": 8.0}, 64, HALF, 64)["factor"] == 8.0
    assert hf_rope_parameters(RopeRequest.parse("hf:yarn"), rp, 64, HALF, 64)["factor"] == 4.0
    plain = {"rope_type": "default", "rope_theta": 1e4}  # nothing to derive from: L = max_position, factor 1
    assert hf_rope_parameters(RopeRequest.parse("hf:yarn"), plain, 64, HALF, 64)["factor"] == 1.0
    assert hf_rope_parameters(RopeRequest.parse("hf:linear"), plain, 64, HALF, 64)["factor"] == 1.0
    llama3 = {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0, "original_max_position_embeddings": 16}
    assert hf_rope_parameters(RopeRequest.parse("hf:llama3"), llama3, 64, HALF, 64)["factor"] == 8.0
