"""The attention kernel against a dense reference softmax((q k^T) s + bias) with a causal mask, and its helpers."""

import math
from types import SimpleNamespace

import pytest
import torch

from extrap import positional as P
from extrap.model import kernel
from extrap.model.attention import BiasContext, attend, attend_rows, dense_probs, toeplitz_table
from extrap.model.kernel import MASKED, consecutive

B, H, D = 2, 3, 8


def _qkv(Lq, Lk=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    Lk = Lq if Lk is None else Lk
    q = torch.randn(B, H, Lq, D, generator=g, dtype=torch.float64)
    return q, torch.randn(B, H, Lk, D, generator=g, dtype=torch.float64), torch.randn(B, H, Lk, D, generator=g).double()


def dense(q, k, v, bias, scale, window=None):
    """softmax(q k^T s + bias) v with query a at key Lk - Lq + a, causal (and windowed): out, probs, logits."""
    Lq, Lk = q.shape[2], k.shape[2]
    t = torch.arange(Lk - Lq, Lk)[:, None] - torch.arange(Lk)[None]
    hidden = (t < 0) | (t >= window) if window is not None else t < 0
    s = ((q @ k.transpose(-1, -2)) * scale + bias).masked_fill(hidden, -math.inf)
    p = torch.softmax(s, -1)
    return p @ v, p, s


def toeplitz_bias(table, Lq, Lk):
    """(H, Lq, Lk) bias r(i - j) of a table r(0..T-1), 0 where i < j (masked anyway), MASKED past the table."""
    t = torch.arange(Lk - Lq, Lk)[:, None] - torch.arange(Lk)[None]
    bias = table[:, t.clamp(0, table.shape[1] - 1)]
    return bias.masked_fill(t >= table.shape[1], MASKED)


def _table(T, seed=1):
    return -torch.rand(H, T, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).cumsum(-1)


# ---------------------------------------------------------------------------
# the kernel: Toeplitz, non-Toeplitz, window, temperature, probes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("window", [None, 1, 5])
@pytest.mark.parametrize("tau", [1.0, 0.5])
def test_toeplitz_attention_equals_the_dense_reference(window, tau):
    L, table = 37, _table(37)
    q, k, v = _qkv(L)
    scale = 1 / (math.sqrt(D) * tau)
    ref, probs, logits = dense(q, k, v, toeplitz_bias(table, L, L) / tau, scale, window)
    for block in (1, 8, 37, 64):
        out, _ = kernel.toeplitz_attention(q, k, v, table, window, scale, block, tau=tau)
        torch.testing.assert_close(out, ref)
    out, blocks = kernel.toeplitz_attention(q, k, v, table, window, scale, 8, tau=tau, record="probs")
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(dense_probs(blocks, L), probs)
    _, blocks = kernel.toeplitz_attention(q, k, v, table, window, scale, 8, tau=tau, record="logits")
    for (k0, s), q0 in zip(blocks, range(0, L, 8)):  # finite where masked: MASKED / τ plus q·k
        visible = torch.isfinite(logits[:, :, q0 : q0 + s.shape[-2], k0 : k0 + s.shape[-1]])
        torch.testing.assert_close(s[visible], logits[:, :, q0 : q0 + s.shape[-2], k0 : k0 + s.shape[-1]][visible])
        assert (s[~visible] < MASKED / (2 * tau)).all()


@pytest.mark.parametrize("trim", [True, False])
def test_toeplitz_attention_of_new_queries_against_cached_keys(trim):
    """The last 5 of 23 keys query (a KV cache step), with a table shorter than the distances (a window of 6)."""
    q, k, v = _qkv(5, 23)
    table, scale = _table(6), 0.3
    ref, _, _ = dense(q, k, v, toeplitz_bias(table, 5, 23), scale, 6)
    for block in (2, 5):
        out, _ = kernel.toeplitz_attention(q, k, v, table, 6, scale, block, trim=trim)
        torch.testing.assert_close(out, ref)
    no_bias, _ = kernel.toeplitz_attention(q, k, v, None, 6, scale, 5)  # the window mask alone
    torch.testing.assert_close(no_bias, dense(q, k, v, torch.zeros(1, 5, 23, dtype=q.dtype), scale, 6)[0])


def test_softmax_attention_with_a_non_toeplitz_bias_and_its_gradient():
    L = 19
    q, k, v = _qkv(L)
    bias = torch.randn(1, H, L, L, dtype=torch.float64, requires_grad=True)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    mask = torch.where(causal, bias, torch.full((), MASKED, dtype=torch.float64))
    ref, probs, logits = dense(q, k, v, bias, 0.25)
    out, p = kernel.softmax_attention(q, k, v, mask, 0.25)  # a bias that needs its gradient: explicit softmax
    assert p is None
    torch.testing.assert_close(out, ref)
    (g,) = torch.autograd.grad(out.square().sum(), bias)
    (g_ref,) = torch.autograd.grad(ref.square().sum(), bias)
    torch.testing.assert_close(g, g_ref)
    with torch.no_grad():  # no gradient: SDPA
        torch.testing.assert_close(kernel.softmax_attention(q, k, v, mask, 0.25)[0], ref)
        torch.testing.assert_close(kernel.softmax_attention(q, k, v, mask, 0.25, "probs")[1], probs)
        _, s = kernel.softmax_attention(q, k, v, mask, 0.25, "logits")
        torch.testing.assert_close(s[..., causal], logits[..., causal])
        assert kernel.softmax_attention(q, k, None, mask, 0.25, "probs")[0] is None  # the probabilities alone
        torch.testing.assert_close(
            kernel.softmax_attention(q, k, v, None, 0.25)[0], dense(q, k, v, 0.0, 0.25)[0]
        )  # no mask


def _fire_context(L, positions=None):
    scheme = P.get("fire")
    values = {n: x.double() for n, x in scheme.init_values(H).items()}
    pos = torch.arange(L) if positions is None else positions
    return BiasContext(scheme, values, pos), scheme, values


@pytest.mark.parametrize("batched", [False, True])
def test_attend_with_a_non_toeplitz_scheme_and_probes(batched):
    """FIRE (r depends on i too) at non-consecutive positions, τ = 0.7: output, probabilities, logits, rows."""
    L, tau = 21, 0.7
    positions = torch.arange(L) * 2 + 3
    ctx, scheme, values = _fire_context(L, positions.expand(B, L) if batched else positions)
    q, k, v = _qkv(L)
    i = positions[:, None].double()
    t = i - positions[None].double()
    bias = scheme.bias(t.clamp_min(0), values, i=i.expand_as(t)).float().double()
    ref, probs, logits = dense(q, k, v, bias / tau, 1 / (math.sqrt(D) * tau))
    out, blocks = attend(q, k, v, ctx, temperature=tau, block=8, return_probs=True)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(dense_probs(blocks, L), probs)
    _, blocks = attend(q, k, v, ctx, temperature=tau, block=8, return_logits=True)
    got = torch.cat([torch.nn.functional.pad(s, (0, L - s.shape[-1]), value=-math.inf) for _, s in blocks], dim=2)
    torch.testing.assert_close(got, logits)
    if not batched:
        rows = [0, 7, 20]
        torch.testing.assert_close(attend_rows(q, k, ctx, tau, rows), probs[:, :, rows])


@pytest.mark.parametrize("window", [None, 4])
def test_attend_on_consecutive_positions_reads_the_toeplitz_table(window):
    """ALiBi from position 0 (the strided views), and the same keys as the last 6 of a KV cache."""
    L, scheme = 30, P.get("alibi")
    values = {n: x.double() for n, x in scheme.init_values(H).items()}
    table = toeplitz_table(scheme, values, L - 1, torch.float64, "cpu")
    ctx = BiasContext(scheme, values, torch.arange(L), window, table, contiguous=True)
    q, k, v = _qkv(L)
    ref, _, _ = dense(q, k, v, toeplitz_bias(table, L, L), 1 / math.sqrt(D), window)
    torch.testing.assert_close(attend(q, k, v, ctx, block=8)[0], ref)
    cached = BiasContext(scheme, values, torch.arange(100, 100 + L), window, table)  # any first position
    torch.testing.assert_close(attend(q[:, :, -6:], k, v, cached, block=8)[0], ref[:, :, -6:])


def test_hf_window_attention_goes_through_the_kernel():
    """The hf: adapter's windowed attention (grouped-query heads, 3 cached keys) equals the dense band."""
    from extrap.hf.attention import window_attention

    q, k, v = _qkv(7, 10)
    module = SimpleNamespace(_extrap_window=4, training=False)
    out, weights = window_attention(module, q, k[:, :1], v[:, :1], None, scaling=0.4)
    ref, _, _ = dense(q, k[:, :1].expand_as(k), v[:, :1].expand_as(v), 0.0, 0.4, 4)
    assert weights is None
    torch.testing.assert_close(out, ref.transpose(1, 2))


# ---------------------------------------------------------------------------
# helpers: consecutive positions, the Toeplitz vector and view
# ---------------------------------------------------------------------------
def test_consecutive_positions_on_edge_cases():
    assert consecutive(torch.arange(5)) and consecutive(torch.arange(3, 8), start=None)
    assert not consecutive(torch.arange(3, 8)) and consecutive(torch.arange(3, 8), start=3)
    assert not consecutive(torch.arange(0)) and not consecutive(torch.arange(0), start=None)  # empty
    assert consecutive(torch.tensor([0])) and consecutive(torch.tensor([9]), start=None)  # a single position
    assert not consecutive(torch.tensor([9]))
    assert not consecutive(torch.tensor([0, 2, 3])) and not consecutive(torch.tensor([1, 0]), start=None)
    assert not consecutive(torch.arange(4.0))  # float positions
    assert not consecutive(torch.arange(4).expand(2, 4))  # per-sequence positions


def test_toeplitz_vector_and_view_on_edge_cases():
    table = torch.tensor([[0.0, -1.0, -2.0, -3.0]], dtype=torch.float64)
    w = kernel.toeplitz_vector(table, -2, 8, window=3)  # t = -2 .. 5: masked below 0, from the window, past the table
    assert w.tolist() == [[MASKED, MASKED, 0.0, -1.0, -2.0, MASKED, MASKED, MASKED]]
    assert kernel.toeplitz_vector(table, 0, 6, None)[0, 3:].tolist() == [-3.0, MASKED, MASKED]
    assert kernel.toeplitz_vector(table, 0, 0, None).shape == (1, 0)  # empty
    view = kernel.toeplitz_view(w, 1, 3, 4)
    assert view.shape == (1, 1, 3, 4) and view.data_ptr() == w[:, 1:].data_ptr()  # shares w's memory
    assert all(view[0, 0, a, c] == w[0, 1 + a + c] for a in range(3) for c in range(4))
    one = kernel.toeplitz_view(kernel.toeplitz_vector(table, 0, 1, None), 0, 1, 1)  # a single position: r(0)
    assert one.tolist() == [[[[0.0]]]]
    assert kernel.toeplitz_view(w, 0, 0, 0).numel() == 0
    q, k, v = _qkv(1)
    out, _ = kernel.toeplitz_attention(q, k, v, table, None, 1.0, 256)  # one query, one key: its value
    torch.testing.assert_close(out, v)
