"""Every extension method as branches merged by log-sum-exp (extrap.extend.branches), on the CPU through
FlexAttention's reference path: equal to a dense softmax over the method's distance-rotated scores, the merge
equal to one logsumexp over all scores, and each branch's block mask as sparse as its rule."""

import pytest
import torch

from extrap import positional
from extrap.extend import METHODS, parse, plain_rotate
from extrap.extend.branches import BLOCK, block_masks, branch_attention, merge_lse
from extrap.extend.methods import MASKED, scale_queries
from extrap.positional.rotation import apply_rotary

L_TR, N, DH = 32, 200, 16
SPECS = [*METHODS] + [  # every method at its defaults, then a non-default option set of each
    "sinks:n=2,window=9",
    "lm-infinite:global=3,local=20",
    "self-extend:group=3,window=5,floor=1,log=20",
    "dca:chunk=20,local=3,mscale=1",
    "rerope:window=5,log=1",
    "leaky-rerope:window=6,k=4,log=1",
    "string:shift=7,local=2",
]  # fmt: skip  (k = 4: the far branch divides an integer tensor, exact in float32 only for dyadic k)


def dense_reference(method, q, k, v, scale, inv):
    """softmax over f_i·(R(d_ij) q_i)·k_j · scale, row by row, d from the method's distance map (float64),
    f_i its query scale: no branch, block or lse."""
    B, H, n, D = q.shape
    i = torch.arange(n)
    d = method.distance(i, i)
    f = method.query_scale(i, n)
    out = torch.zeros_like(q)
    for r in range(n):
        seen = ~d[r].isnan()
        qr = apply_rotary(q[:, :, r : r + 1].expand(B, H, int(seen.sum()), D), d[r][seen], inv)
        s = (qr * k[:, :, seen]).sum(-1) * scale * (1.0 if f is None else float(f[r]))
        out[:, :, r] = torch.softmax(s, -1).unsqueeze(-2).matmul(v[:, :, seen]).squeeze(-2)
    return out


@pytest.mark.parametrize("spec", SPECS)
def test_branch_merge_equals_the_dense_reference(spec):
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, N, DH, generator=g, dtype=torch.float64) for _ in range(3))
    method, rope, pos = parse(spec, L_TR), positional.get("rope"), torch.arange(N)
    assert not method.no_op(N)
    inv, _ = rope.frequencies(DH, dtype=torch.float64)
    want = dense_reference(method, q, k, v, 0.3, inv)
    got = branch_attention(method, plain_rotate(rope, N), scale_queries(method, q, pos, N), k, v, pos, pos, 0.3)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)  # float64 throughout: rounding only


def test_merge_equals_one_logsumexp_over_all_scores():
    """Scores split into column groups (branches), each softmaxed alone: the merge is the whole row's softmax."""
    g = torch.Generator().manual_seed(3)
    s, v = (
        torch.randn(2, 3, 5, 12, generator=g, dtype=torch.float64),
        torch.randn(2, 3, 12, 4, generator=g, dtype=torch.float64),
    )
    groups = [torch.arange(12) % 2 == 0, torch.arange(12) % 2 == 1, torch.zeros(12, dtype=torch.bool)]  # 2: no key
    s[..., 1, :] = torch.where(groups[0], s[..., 1, :], -torch.inf)  # row 1: seen by branch 0 only
    outs, lses = [], []
    for m in groups:
        part = s.masked_fill(~m, -torch.inf)
        lse = part.logsumexp(-1)
        outs.append(torch.softmax(part, -1).nan_to_num(torch.nan) @ v)  # rows a branch misses: NaN, weight 0
        lses.append(lse)
    out, lse = merge_lse(outs, lses)
    torch.testing.assert_close(lse, s.logsumexp(-1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, torch.softmax(s, -1) @ v, rtol=1e-12, atol=1e-12)
    assert torch.isnan(outs[1][..., 1, :]).all() and torch.isfinite(out).all()


@pytest.mark.parametrize("spec", ["self-extend:group=4,window=64", "sinks:n=4,window=100", "dca:chunk=300,local=40"])
def test_block_masks_hold_exactly_the_blocks_each_branch_scores(spec):
    """Each branch's blocks are those where select gives it a pair (full where it gives every pair), so a
    window branch touches only its band: O(L·W) pairs, not O(L²)."""
    method, n = parse(spec, 512), 1000
    i = torch.arange(n)
    sel = torch.nn.functional.pad(method.select(i, i), (0, 24, 0, 24), value=MASKED).view(8, BLOCK, 8, BLOCK)
    for b, mask in enumerate(block_masks(method, 0, 0, n, n, "cpu")):
        hit = sel == b
        want_any, want_all = hit.any(3).any(1), hit.all(3).all(1)
        assert torch.equal(mask.to_dense()[0, 0].bool(), want_any)
        full = torch.zeros(8, 8, dtype=torch.bool)
        for r in range(8):
            full[r, mask.full_kv_indices[0, 0, r, : mask.full_kv_num_blocks[0, 0, r]].long()] = True
        assert torch.equal(full, want_all)
    if spec.startswith("self-extend"):  # the neighbour band (W = 64): the diagonal and the one before it
        assert int(block_masks(method, 0, 0, n, n, "cpu")[0].to_dense().sum()) <= 2 * 8


@pytest.mark.parametrize("spec", SPECS)
def test_rule_is_elementwise_and_vmaps_on_scalars(spec):
    """rule on 0-d tensors under vmap (FlexAttention's mask_mod) gives select's table, offsets included."""
    method = parse(spec, L_TR)
    i, j = torch.arange(50, 90), torch.arange(0, 90)
    want = method.select(i, j)
    got = torch.vmap(torch.vmap(method.rule, in_dims=(None, 0)), in_dims=(0, None))(i, j)
    assert torch.equal(got, want)
    assert want.dtype == torch.int8 and {-1, 0} <= set(want.unique().tolist())


@pytest.mark.parametrize("spec", ["self-extend", "sinks:n=2,window=9"])
def test_grouped_query_keys_need_no_copies(spec):
    """k, v with 2 heads for 4 query heads (an hf: Llama's grouped-query attention): flex's enable_gqa gives
    what the dense reference gives with each key head repeated for its group."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 4, N, DH, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 2, N, DH, generator=g, dtype=torch.float64) for _ in range(2))
    method, rope, pos = parse(spec, L_TR), positional.get("rope"), torch.arange(N)
    inv, _ = rope.frequencies(DH, dtype=torch.float64)
    want = dense_reference(method, q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), 0.3, inv)
    got = branch_attention(method, plain_rotate(rope, N), q, k, v, pos, pos, 0.3)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_offset_queries_against_a_longer_cache():
    """The last 150 queries of 200 against all 200 keys (a chunked prefill): the mask reads absolute positions."""
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(1, 2, N, DH, generator=g, dtype=torch.float64) for _ in range(3))
    method, rope, pos = parse("dca:chunk=20,local=3", L_TR), positional.get("rope"), torch.arange(N)
    inv, _ = rope.frequencies(DH, dtype=torch.float64)
    want = dense_reference(method, q, k, v, 0.3, inv)[:, :, 50:]
    got = branch_attention(method, plain_rotate(rope, N), q[:, :, 50:], k, v, pos[50:], pos, 0.3)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("spec", ["self-extend:group=3,window=5", "dca:chunk=20,local=3", "rerope:window=5,log=1"])
@pytest.mark.parametrize("new", [1, 5])
def test_a_decoding_step_reads_every_key_in_one_block_with_the_same_output(spec, new):
    """The last ``new`` queries of 1500 against the whole cache (a decoding step): one key block instead of six
    (the loop of 256-key blocks is launch-bound on a GPU), the same attention as the 256-key blocks give."""
    from extrap.extend import extended_attention
    from extrap.extend.branches import DECODE_SCORES, attend, decode_block

    n = 1500
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, n, DH, generator=g, dtype=torch.float64) for _ in range(3))
    method, rope, pos = parse(spec, L_TR), positional.get("rope"), torch.arange(n)
    rot = plain_rotate(rope, n)
    q = scale_queries(method, q[:, :, -new:], pos[-new:], n)
    assert decode_block(2, new, n) == n and decode_block(2, 256, n) == 256  # a prefill keeps its blocks
    assert decode_block(DECODE_SCORES // 100, new, n) == 256  # past the score budget: the default block
    assert decode_block(DECODE_SCORES // 1000, 1, n) == 1000  # within it: as many keys as the budget holds
    got = attend(method, rot, q, k, v, pos[-new:], pos, 0.3, spans=False)
    want = extended_attention(method, rot, q, k, v, pos[-new:], pos, 0.3, spans=False, block=256)
    # the kernel scores in float32: one block or six differ by the order of the online softmax's float32 sums
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
