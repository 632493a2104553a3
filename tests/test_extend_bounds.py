"""extend theory: every closed form (largest distance, in-distribution bound, keys per query) against the
registry's own distance map, length by length: every length up to each bound plus one, and null bounds
("any length") to a long length; and the closed forms at lengths up to 2^64, fast and without tracebacks."""

import math
import time

import pytest
import torch

from extrap.errors import ExtrapError
from extrap.extend import analyse_extension, parse
from extrap.extend.theory import usable_length

# (spec, L_tr, the bound it must report): None is "any length", argued per method in the comments
SETTINGS = [
    ("sinks", 16, None),  # window d <= W - 1, a sink d <= n + W - 1 <= L_tr - 1
    ("sinks:n=0,window=5", 16, None),
    ("sinks:n=3,window=13", 16, None),
    ("lm-infinite", 64, 64),  # issue 28: global keys at d = n_local = L_tr enter at L' = L_tr + 1
    ("lm-infinite:global=1,local=16", 16, 16),
    ("lm-infinite:global=2,local=10", 16, None),  # global keys at d = 10 <= 15
    ("lm-infinite:global=0,local=16", 16, None),  # no global keys: d <= n_local - 1
    ("self-extend:group=4,window=30", 64, 164),  # issue 28: G does not divide W; (L - W)·G + W = 166 is wrong
    ("self-extend:group=4,window=30,floor=1", 64, 164),  # Llama_4_40.py's W - ⌊W/G⌋: the same bound
    ("self-extend:group=3,window=4", 12, 3 * (12 - 4 + 1)),
    ("self-extend:group=2,window=4", 12, (12 - 4) * 2 + 4),
    ("self-extend:group=5,window=7,floor=1", 16, 5 * (16 - 7 + 1)),
    ("self-extend:group=1,window=3", 12, 12),
    ("dca", 64, None),  # every distance <= s < L_tr
    ("dca:chunk=7,local=2", 12, None),
    ("dca:chunk=8,local=5", 12, None),
    ("dca:chunk=5,local=0", 12, None),
    ("rerope", 16, None),  # d <= w < L_tr
    ("rerope:window=11", 12, None),
    ("leaky-rerope:window=3,k=2", 12, (12 - 1 - 3) * 2 + 3 + 1),
    ("leaky-rerope:window=3,k=1.5", 12, 8 * 3 // 2 + 3 + 1),
    ("leaky-rerope:window=5,k=3", 16, (16 - 1 - 5) * 3 + 5 + 1),  # 1/3 is not exact in float64
    ("leaky-rerope:window=2,k=0.7", 12, math.floor(9 * 0.7) + 3),
    ("string:shift=4,local=1", 12, 12 + 4 - 1),
    ("string", 64, 64 + 21 - 2),
    ("string:shift=5,local=5", 12, 12),
]
LONG = 1500  # null bounds are scanned this far (and argued above)


def row_max(method, length: int) -> torch.Tensor:
    """(length,) the largest distance of each query row, from the map itself, block by block."""
    out = torch.empty(length, dtype=torch.float64)
    i_all = torch.arange(length)
    for q0 in range(0, length, 256):
        i = i_all[q0 : q0 + 256]
        d = method.distance(i, i_all[: int(i[-1]) + 1])
        out[q0 : q0 + len(i)] = d.nan_to_num(-math.inf).amax(1)
    return out


@pytest.mark.parametrize("spec,L,bound", SETTINGS, ids=[f"{s}@{L}" for s, L, _ in SETTINGS])
def test_every_length_up_to_the_bound_plus_one_matches_the_map(spec, L, bound):
    m = parse(spec, L)
    assert usable_length(m) == bound
    n = LONG if bound is None else bound + 1
    seen = torch.cummax(row_max(m, n), 0).values  # seen[N - 1]: the largest distance at length N
    for N in range(1, n + 1):
        top = float(seen[N - 1])
        assert m.max_distance(N) == top, N  # bit for bit: the closed form computes as the map does
        assert (top <= L - 1) == (bound is None or N <= bound), N
    r = analyse_extension(m, L, n)
    assert r.in_distribution == (bound is None) and r.in_distribution_up_to == bound
    if bound is not None:
        assert analyse_extension(m, L, bound).in_distribution


@pytest.mark.parametrize("spec,L", [(s, L) for s, L, _ in SETTINGS[::3]])
def test_keys_per_query_closed_forms_match_the_mask(spec, L):
    m = parse(spec, L)
    i = torch.arange(4 * L)
    counts = m.mask(i, i).sum(1)
    for N in range(1, 4 * L + 1):
        r = analyse_extension(m, L, N)
        assert r.keys_per_query_max == int(counts[:N].max())
        assert m.keys_total(N) == int(counts[:N].sum())


@pytest.mark.parametrize("spec", ["sinks", "lm-infinite", "self-extend", "dca", "rerope", "leaky-rerope", "string",
                                  "self-extend:group=3,window=1000,floor=1", "leaky-rerope:k=1e-300"])  # fmt: skip
def test_any_length_up_to_2_pow_64_answers_fast(spec):
    for length in (10**6, 2**40, 2**64):
        t = time.perf_counter()
        r = analyse_extension(spec, 4096, length, head_dim=128)
        assert time.perf_counter() - t < 1.0
        assert r.length == length and r.keys_per_query_max <= length
    with pytest.raises(ExtrapError, match="2\\^64"):
        analyse_extension(spec, 4096, 2**64 + 1)
    with pytest.raises(ExtrapError, match="401 digits"):
        analyse_extension(spec, 4096, 10**400)
    with pytest.raises(ExtrapError, match="training length"):
        analyse_extension(spec, 10**400, 100)


def test_closed_forms_by_hand_at_large_lengths():
    # sinks at 2^40: the sink at j = 0 sits at n + W - 1 = 4095; mean keys (Σ min(i + 1, 4096))/L'
    r = analyse_extension("sinks", 4096, 2**40)
    assert r.max_distance == 4095 and r.keys_per_query_mean == (4096 * 4097 / 2 + (2**40 - 4096) * 4096) / 2**40
    r = analyse_extension("self-extend", 4096, 10**6)  # ⌊(10^6 - 1)/8⌋ + 1024 - 128
    assert r.max_distance == 124999 + 896 and r.in_distribution_up_to == 25600
    assert analyse_extension("rerope", 4096, 10**6).max_distance == 512


@pytest.mark.parametrize("args", [
    ["--extend", "sinks", "--train-length", "4096", "--length", str(10**400)],
    ["--extend", "rerope", "--train-length", "4096", "--length", str(2**64 + 1)],
    ["--extend", "rerope", "--train-length", str(10**400), "--length", "100"],
])  # fmt: skip
def test_cli_huge_lengths_are_one_line_and_exit_2(args, capsys):
    from extrap.cli import main

    assert main(["theory", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2^64" in err[0] and len(err[0]) < 200


def test_cli_hangs_of_issue_28_answer_at_once(capsys):
    from extrap.cli import main

    t = time.perf_counter()
    assert main(["theory", "--extend", "sinks", "--train-length", "4096", "--length", "1099511627776"]) == 0
    assert main(["theory", "--extend", "rerope", "--train-length", "4096", "--length", "1000000"]) == 0
    assert main(["theory", "--extend", "dca", "--train-length", "4096", "--length", str(2**64), "--json"]) == 0
    assert time.perf_counter() - t < 3.0
    assert "any length" in capsys.readouterr().out


SCALED = [  # the authors'-code options: spec, the factor on query i at sequence length N written here
    ("rerope:window=3,log=1", lambda i, N: max(1.0, math.log(i + 1) / math.log(12))),  # bojone/rerope
    ("leaky-rerope:window=3,k=2,log=1", lambda i, N: max(1.0, math.log(i + 1) / math.log(12))),
    ("self-extend:group=2,window=4,log=5", lambda i, N: max(1.0, math.log(i + 1) / math.log(5))),  # scale_base
    ("dca:chunk=7,local=2,mscale=1", lambda i, N: (0.05 * math.log(N / 12) + 1) ** 2 if N > 12 else 1.0),
]


@pytest.mark.parametrize("spec,factor", SCALED, ids=[s for s, _ in SCALED])
def test_log_length_query_scalings_multiply_each_row_of_scores(spec, factor):
    from extrap import positional
    from extrap.extend import extended_attention, plain_rotate
    from extrap.extend.methods import scale_queries
    from extrap.positional.rotation import apply_rotary

    g = torch.Generator().manual_seed(4)
    B, H, N, D = 1, 2, 30, 8
    q, k, v = (torch.randn(B, H, N, D, generator=g, dtype=torch.float64) for _ in range(3))
    method, scheme = parse(spec, 12), positional.get("rope")
    inv, _ = scheme.frequencies(D, dtype=torch.float64)
    f = torch.tensor([factor(i, N) for i in range(N)], dtype=torch.float64)
    d = method.distance(torch.arange(N), torch.arange(N))
    want = torch.zeros_like(q)
    for r in range(N):  # dense: softmax(f_r · (R(d_rj) q_r)·k_j · scale) v
        seen = ~d[r].isnan()
        qr = apply_rotary(q[:, :, r : r + 1].expand(B, H, int(seen.sum()), D), d[r][seen], inv)
        s = (qr * k[:, :, :N][:, :, seen]).sum(-1) * 0.3 * f[r]
        want[:, :, r] = torch.softmax(s, -1).unsqueeze(-2).matmul(v[:, :, seen]).squeeze(-2)
    i = torch.arange(N)
    got = extended_attention(method, plain_rotate(scheme, N), scale_queries(method, q, i, N), k, v, i, i, 0.3, block=7)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not method.no_op(N)
    base = parse(spec.rsplit(",", 1)[0], 12)  # the same method without the option: the default spec hides it
    assert base.spec == parse(base.spec, 12).spec and "log" not in base.spec and "mscale" not in base.spec
    assert spec.rsplit(",", 1)[1] in method.spec.split(":")[1].split(",")
