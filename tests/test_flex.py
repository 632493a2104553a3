"""FlexAttention's score_mods, generated from each bias scheme's own formula (extrap.model.flex), on the CPU.

FlexAttention evaluates a score_mod with torch.func.vmap over (head, query, key) when it runs eagerly, and
traces the same function into its kernel when compiled.  So the generated score function, vmapped over an
(H, L, L) grid, is compared here with the bias the blocked path adds, and so are its gradients (the CPU's
compiled FlexAttention has no backward: this is how the gradients are proven off a GPU; tests/test_gpu.py
runs the fused backward).  The blocked kernel evaluates r(t) in float64 and rounds it to the attention's
dtype; the score_mod computes it in float32, hence the float32 tolerances below.
"""

import math
import types
import warnings

import pytest
import torch
from torch.func import vmap

from extrap import positional as P
from extrap.errors import ExtrapError
from extrap.model import flex
from extrap.model.attention import BiasContext, attend, bias_block, choose_backend, toeplitz_table
from extrap.model.kernel import MASKED, flex_available
from extrap.positional.content import ContentBias

pytestmark = pytest.mark.skipif(not flex_available(), reason="no FlexAttention in this torch")

H = 4
# every registered Toeplitz bias (the default options; window: a window shorter than the grids), and a formula
TOEPLITZ = sorted(
    (n if n != "window" else "window:7")
    for n, c in P.REGISTRY.items()
    if issubclass(c, P.BiasRPE) and not issubclass(c, ContentBias) and c.toeplitz and not c.is_identity
) + ["-2*log(n)", "nope"]
FIRE = "fire:L=8"  # r also reads the query position i (= q_idx): a threshold L well inside the grids


def _values(scheme, dtype=torch.float64, seed=0):
    """The scheme's initial values, T5's zero table made random (else every bucket reads 0)."""
    g = torch.Generator().manual_seed(seed)
    vals = scheme.init_values(H)
    if "table" in vals:
        vals["table"] = torch.randn(vals["table"].shape, generator=g, dtype=torch.float64)
    return {n: x.to(dtype).requires_grad_(scheme.learned) for n, x in vals.items()}


def _grid_score(scheme, values: dict, L: int, tau: float = 1.0) -> torch.Tensor:
    """The generated score_mod at score 0, vmapped over (h, q_idx, kv_idx) as FlexAttention does: (H, L, L).

    Under FlexAttention's own index rewrite (each ``buffer[...]`` becomes one differentiable op that must
    index every dimension of the buffer), as in its eager forward and its traced backward."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex  # FlexAttention's own

    names, params = flex._names(scheme, flex.FORMULA), flex.formula_params(scheme, values, H, "cpu")
    mod = flex.score_mod(scheme, names, flex.FORMULA, params, torch.tensor(1.0 / tau))
    zero, b = torch.zeros(()), torch.zeros((), dtype=torch.int32)
    f = lambda h, q, k: mod(zero, b, h, q, k)  # noqa: E731
    f = vmap(vmap(vmap(f, in_dims=(None, None, 0)), in_dims=(None, 0, None)), in_dims=(0, None, None))
    idx = torch.arange(L, dtype=torch.int32)
    with TransformGetItemToIndex():
        return f(torch.arange(H, dtype=torch.int32), idx, idx)


def _blocked_bias(scheme, values: dict, L: int) -> torch.Tensor:
    """What the blocked path adds: r(i - j) from the float64 r(t) table, (H, L, L), MASKED above the diagonal
    (FIRE: r(t, i) per entry, in float32, as the blocked path computes the queries past its table)."""
    table = toeplitz_table(scheme, values, L - 1, torch.float64, "cpu") if scheme.toeplitz else None
    ctx = BiasContext(scheme, values, torch.arange(L), table=table, contiguous=True)
    return bias_block(ctx, 0, L, 0, L, torch.float64).expand(H, L, L)


@pytest.mark.parametrize("spec", TOEPLITZ + [FIRE])
def test_score_mod_is_the_schemes_bias_and_has_its_gradients(spec):
    scheme, L = P.get(spec), 48
    v64 = _values(scheme)
    v32 = {n: x.detach().float().requires_grad_(x.requires_grad) for n, x in v64.items()}
    got, want = _grid_score(scheme, v32, L), _blocked_bias(scheme, v64, L)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    # float32 against float64: |r| <= ~60 here, so 2e-5 relative plus 2e-5 absolute (Sandwich's 64 cosines)
    torch.testing.assert_close(got[:, causal].double(), want[:, causal], rtol=2e-5, atol=2e-5)
    learned = [n for n, x in v64.items() if x.requires_grad]
    if not learned:
        return
    w = torch.randn(H, L, L, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * causal
    g32 = torch.autograd.grad((got.double() * w).sum(), [v32[n] for n in learned])
    g64 = torch.autograd.grad((want * w).sum(), [v64[n] for n in learned])
    for n, a, b in zip(learned, g32, g64):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-4, msg=f"{spec}: d/d{n}")


def _blocked_context(scheme, values, L, window=None) -> BiasContext:
    """The context the model builds (GPT's bias_context): the r(t) table, FIRE's for its queries i <= L only."""
    ctx = BiasContext(scheme, values, torch.arange(L), window, contiguous=True)
    rows = L if scheme.toeplitz else min(L, math.floor(scheme.toeplitz_until(values)) + 1)
    ctx.table = toeplitz_table(scheme, values, rows - 1, torch.float32, "cpu")
    ctx.toeplitz_rows = None if scheme.toeplitz else rows
    return ctx


@pytest.mark.parametrize("spec", TOEPLITZ + ["sandwich/table", "kerple-log/table", "t5/table", "fire:L=64"])
def test_eager_flex_forward_equals_the_blocked_kernel(spec):
    """The whole attention, FlexAttention run eagerly (its vmap reference) against attend(backend="blocked"):
    L = 200 with a window of 150, temperature 0.8; formula mode, and table mode where named.  FIRE: the
    blocked path reads its table for queries up to L = 64 and computes the others per entry."""
    name, _, mode = spec.partition("/")
    scheme, L, window, tau = P.get(name), 200, 150, 0.8
    values = {n: x.detach().float() for n, x in _values(scheme).items()}
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, H, L, 16, generator=g) for _ in range(3))
    ctx = _blocked_context(scheme, values, L, window)
    want, _ = attend(q, k, v, ctx, tau, backend="blocked")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile")
        got = flex.flex_attention(
            q, k, v, scheme, values, table=ctx.table, window=window, tau=tau, mode=mode or None, compiled=False
        )
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_default_modes_and_forced_backends():
    assert flex.default_mode(P.get("sandwich")) == flex.TABLE  # d̄/2 cosines per pair
    assert all(flex.default_mode(P.get(s)) == flex.FORMULA for s in ("alibi", "kerple-power", "t5", "type2", "tisa"))
    L = 16
    q = torch.zeros(1, H, L, 8)
    alibi = P.get("alibi")
    ctx = BiasContext(alibi, alibi.init_values(H), torch.arange(L), contiguous=True, table=torch.zeros(H, L))
    with torch.no_grad():
        assert {choose_backend(b, ctx, q, False) for b in ("flex", "flex-formula", "flex-table")} == {"flex"}
        assert choose_backend("auto", ctx, q, False) == "blocked"  # CPU: FlexAttention compiles
    fire = P.get("fire")
    assert flex.default_mode(fire) == flex.FORMULA
    fctx = _blocked_context(fire, fire.init_values(H), L)
    with torch.no_grad():  # FIRE reads the query position too: i = q_idx, in formula mode only
        assert {choose_backend(b, fctx, q, False) for b in ("flex", "flex-formula")} == {"flex"}
        assert choose_backend("auto", fctx, q, False) == "blocked"
        assert choose_backend("flex", fctx, q, True) == "blocked"  # probabilities: the blocked path records them
        with pytest.raises(ExtrapError, match="query position: no r.t. table for flex-table"):
            choose_backend("flex-table", fctx, q, False)
    on_cuda = types.SimpleNamespace(is_cuda=True)  # choose_backend reads only q.is_cuda: a GPU's auto, on a CPU
    assert choose_backend("auto", ctx, on_cuda, False) == "flex"
    assert choose_backend("auto", fctx, on_cuda, False) == "blocked"  # FIRE: flex only when asked, until timed
    with pytest.raises(ExtrapError, match="query position"):
        flex.flex_attention(q, q, q, fire, fctx.values, table=fctx.table, mode="table", compiled=False)
    with pytest.raises(ExtrapError, match="table mode needs"):
        flex.flex_attention(q, q, q, alibi, ctx.values, mode="table", compiled=False)
    from extrap.model import ModelConfig

    assert ModelConfig(attn_backend="flex-table").attn_backend == "flex-table"
    assert ModelConfig(pe="fire", attn_backend="flex").attn_backend == "flex"
    with pytest.raises(ExtrapError, match="query position: no r.t. table for flex-table"):
        ModelConfig(pe="fire", attn_backend="flex-table")
    with pytest.raises(ExtrapError, match="attn_backend must be one of"):
        ModelConfig(attn_backend="flex-fast")


def test_each_compiled_callable_has_its_own_code_and_recompile_limit():
    """torch._dynamo keeps compiled entries, and its limit of 8, per code object: ten closures of one
    function compile ten times only as copies with their own code (the limit is checked without it)."""
    import torch._dynamo

    def make(c):
        text = "x" * c  # a string is guarded by value (an int in a closure would turn dynamic instead)

        def f(x):
            return x + len(text)

        return f

    for fresh, expected in ((flex.own_code, 10), (lambda f: f, torch._dynamo.config.recompile_limit)):
        compiles = []

        def count(gm, example_inputs, compiles=compiles):
            compiles.append(1)
            return gm.forward

        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for c in range(10):
                torch.compile(fresh(make(c)), backend=count)(torch.ones(3))
        assert len(compiles) == expected


def test_compiled_flex_does_not_recompile_for_new_values_temperatures_or_lengths():
    """One compile (CPU forward): new parameter values, another temperature and, once lengths have turned
    dynamic, new lengths reuse it.  (A new length compiles at most twice more: dynamic shapes, then the
    block mask's second block; the CUDA test checks a whole training run for the recompile warning.)"""
    import torch._dynamo.utils as du

    scheme = P.get("kerple-log")
    values = {n: x.float() for n, x in scheme.init_values(H).items()}
    torch._dynamo.reset()
    graphs = []
    with torch.no_grad():
        for i, L in enumerate((64, 64, 96, 160, 200, 131, 257, 300)):
            vals = {n: x * (1 + 0.05 * i) for n, x in values.items()}  # e.g. slopes during training
            q, k, v = (torch.randn(1, H, L, 16, generator=torch.Generator().manual_seed(i)) for _ in range(3))
            out = flex.flex_attention(q, k, v, scheme, vals, tau=1 + 0.1 * i)
            graphs.append(du.counters["stats"]["unique_graphs"])
            ctx = BiasContext(scheme, vals, torch.arange(L), contiguous=True)
            ctx.table = toeplitz_table(scheme, vals, L - 1, torch.float32, "cpu")
            torch.testing.assert_close(
                out, attend(q, k, v, ctx, 1 + 0.1 * i, backend="blocked")[0], rtol=1e-4, atol=1e-5
            )
    assert graphs[1] == graphs[0]  # new values, new τ, same length: no recompile
    assert graphs[-1] == graphs[3]  # from the fourth length on, none at all
    assert len(set(graphs)) <= 3


def test_compiled_fire_forward_equals_the_blocked_kernel():
    """FIRE through attend(backend="flex") on the CPU (no grad): one compile of its MLP unrolled in the score_mod,
    queries past its threshold L = 64 included, against the blocked path."""
    scheme, L, window, tau = P.get("fire:L=64"), 200, 150, 0.8
    values = {n: x.detach().float() for n, x in _values(scheme).items()}
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, H, L, 16, generator=g) for _ in range(3))
    ctx = _blocked_context(scheme, values, L, window)
    with torch.no_grad():
        assert choose_backend("flex", ctx, q, False) == "flex"
        got, want = (attend(q, k, v, ctx, tau, backend=b)[0] for b in ("flex", "blocked"))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_window_score_is_clamped_like_the_blocked_kernel():
    """The window scheme's -inf beyond W becomes MASKED (finite), as in the blocked kernel's bias."""
    scheme = P.get("window:3")
    got = _grid_score(scheme, {}, 6)
    assert float(got.min()) == float(torch.tensor(MASKED, dtype=torch.float32)) and torch.isfinite(got).all()


@pytest.mark.parametrize("L,window", [(256, None), (300, None), (1000, 150), (1024, 128), (130, 1), (513, 129)])
def test_band_block_mask_has_create_block_masks_blocks_without_the_dense_mask(L, window):
    """Full, partial and empty blocks from t's range per block pair equal what create_block_mask finds by
    evaluating every entry (ragged last blocks and windows narrower or wider than a block included)."""
    from torch.nn.attention.flex_attention import create_block_mask

    def kinds(bm):  # (query block, key block) -> 0 empty, 1 partial, 2 full
        nb = bm.kv_num_blocks.shape[-1]
        out = torch.zeros(nb, nb, dtype=torch.int8)
        for lists, kind in (((bm.kv_num_blocks, bm.kv_indices), 1), ((bm.full_kv_num_blocks, bm.full_kv_indices), 2)):
            for m in range(nb):
                out[m, lists[1][0, 0, m, : int(lists[0][0, 0, m])].long()] = kind
        return out

    mine = flex.band_block_mask(L, window, "cpu")
    want = create_block_mask(flex._mask_mod(window), None, None, L, L, device="cpu")
    assert torch.equal(kinds(mine), kinds(want))
    assert torch.equal(mine.to_dense(), want.to_dense())


def test_eval_refuses_flex_table_for_fire_before_any_work(tmp_path, tiny_text, capsys):
    """`eval --backend flex-table` on a FIRE run used to evaluate and report every length as failed (exit 0):
    the run's backend is checked as a new ModelConfig checks it, so it stops in one line, exit 2."""
    from extrap.cli import main
    from extrap.train import build_configs, train

    m, t = build_configs("fire", "smoke", overrides=dict(steps=1, corpus=tiny_text, train_length=32))
    train(tmp_path / "fire", m, t, progress=False)
    capsys.readouterr()
    code = main(["eval", str(tmp_path / "fire"), "--lengths", "32", "--backend", "flex-table"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no r(t) table for flex-table" in err, err
