"""extrap.extend: every distance map against a matrix written here from the paper's rule, the closed forms,
the theory, and the specs that are refused."""

import math

import pytest
import torch

from extrap.errors import ExtrapError
from extrap.extend import METHODS, analyse_extension, parse
from extrap.extend.theory import scan

L = 12
NAN = math.nan


def _hand(rule) -> torch.Tensor:
    """(L, L) float64 from rule(i, j) -> d or None (masked), for 0 <= j <= i; NaN above the diagonal."""
    d = torch.full((L, L), NAN, dtype=torch.float64)
    for i in range(L):
        for j in range(i + 1):
            v = rule(i, j)
            if v is not None:
                d[i, j] = v
    return d


def _streaming_cache(n, W):
    """StreamingLLM's cache, simulated token by token: after token i it holds the first n and the last W."""

    def rule(i, j):
        cache = list(range(i + 1))
        if len(cache) > n + W:
            cache = cache[:n] + cache[-W:]
        if j not in cache:
            return None
        return cache.index(i) - cache.index(j)  # in-cache positions, query minus key

    return rule


def _dca(s, w):
    c = s - w

    def rule(i, j):
        if i // c == j // c:
            return i % c - j % c
        if i // c - j // c == 1:
            return min(i % c + c, s) - j % c
        return min(2 * c - 1, s) - j % c  # ChunkLlama reads the successive table at c - 1

    return rule


CASES = [
    ("sinks:n=2,window=5", _streaming_cache(2, 5)),
    ("sinks:n=0,window=4", _streaming_cache(0, 4)),
    ("lm-infinite:global=2,local=5", lambda i, j: i - j if i - j < 5 else (5 if j < 2 else None)),
    ("self-extend:group=2,window=4", lambda i, j: i - j if i - j < 4 else i // 2 - j // 2 + 4 - 4 // 2),
    ("self-extend:group=3,window=4", lambda i, j: i - j if i - j < 4 else i // 3 - j // 3 + 4 - 4 / 3),
    ("dca:chunk=7,local=2", _dca(7, 2)),
    ("dca:chunk=8,local=5", _dca(8, 5)),
    ("rerope:window=3", lambda i, j: min(i - j, 3)),
    ("leaky-rerope:window=3,k=2", lambda i, j: i - j if i - j < 3 else 3 + (i - j - 3) / 2),
    ("string:shift=4,local=1", lambda i, j: i - j if i - j < 4 else i - j - 4 + 1),
]


@pytest.mark.parametrize("spec,rule", CASES, ids=[c[0] for c in CASES])
def test_distance_map_equals_the_paper_rule(spec, rule):
    m = parse(spec, L)
    i = torch.arange(L)
    torch.testing.assert_close(m.distance(i, i), _hand(rule), equal_nan=True, rtol=0, atol=1e-12)
    # the same map, block by block on shifted index blocks (what attention sees)
    blocks = torch.cat([torch.cat([m.distance(i[a : a + 5], i[b : b + 5]) for b in range(0, L, 5)], 1)
                        for a in range(0, L, 5)])  # fmt: skip
    torch.testing.assert_close(blocks, _hand(rule), equal_nan=True, rtol=0, atol=1e-12)


def _dca_table(s, w):
    """The table's rule: s (not min(2c - 1, s)) for chunks older than the previous one."""
    c = s - w
    return lambda i, j: _dca(s, w)(i, j) if i // c - j // c < 2 else s - j % c


def test_dca_follows_chunkllama_where_it_differs_from_the_table():
    i = torch.arange(L)
    same = parse("dca:chunk=7,local=2", L).distance(i, i)  # c = 5 > w: 2c - 1 >= s, the two rules agree
    torch.testing.assert_close(same, _hand(_dca_table(7, 2)), equal_nan=True, rtol=0, atol=0)
    code = parse("dca:chunk=8,local=5", L).distance(i, i)  # c = 3: 2c - 1 = 5 < s = 8
    table = _hand(_dca_table(8, 5))
    seen = ~code.isnan()
    assert (code[seen] != table[seen]).any() and (code[seen] <= table[seen]).all()


@pytest.mark.parametrize("spec", [c[0] for c in CASES])
def test_key_spans_cover_every_attended_key_and_counts_match_the_closed_form(spec):
    m = parse(spec, L)
    N = 3 * L
    i = torch.arange(N)
    full = m.mask(i, i)
    for q0 in range(0, N, 5):
        q1 = min(N, q0 + 5)
        covered = torch.zeros(N, dtype=torch.bool)
        for a, b in m.key_spans(q0, q1):
            covered[a:b] = True
        assert not (full[q0:q1] & ~covered).any()
    assert [m.keys_per_query(k) for k in range(N)] == full.sum(1).tolist()


@pytest.mark.parametrize("spec", [c[0] for c in CASES])
def test_theory_max_distance_and_usable_length(spec):
    m = parse(spec, L)
    for N in (5, L, 2 * L, 5 * L):
        r = analyse_extension(m, L, N)
        d = m.distance(torch.arange(N), torch.arange(N))
        assert r.max_distance == float(d[~d.isnan()].max())
        assert r.in_distribution == (r.max_distance <= L - 1)
        assert r.keys_per_query_max == int((~d.isnan()).sum(1).max())
        assert r.keys_per_query_mean == pytest.approx(float((~d.isnan()).sum(1).double().mean()))
        if r.in_distribution_up_to is not None:  # the closed form is the exact edge of in-distribution
            assert r.in_distribution == (N <= r.in_distribution_up_to)
    # the tail rows hold the largest distance (what long lengths scan)
    top, _ = scan(m, 5 * L, 5 * L - 3)
    assert top == analyse_extension(m, L, 5 * L).max_distance


def test_theory_record_round_trips_and_defaults_scale_with_the_training_length():
    from extrap.extend import ExtensionTheory

    r = analyse_extension("self-extend", 4096, 8192)
    assert ExtensionTheory.from_json(r.to_json()) == r
    assert r.method == "self-extend:group=8,window=1024" and r.in_distribution_up_to == (4096 - 1024) * 8 + 1024
    assert parse("dca", 4096).spec == "dca:chunk=3072,local=256"
    assert parse("string", 4096).spec == "string:shift=1365,local=128"
    assert parse("rerope", 4096).spec == "rerope:window=512"
    assert parse("leaky-rerope", 4096).spec == "leaky-rerope:window=512,k=16"
    assert parse("lm-infinite", 4096).spec == "lm-infinite:global=10,local=4096"
    assert analyse_extension("lm-infinite", 4096, 8192).max_distance == 4096  # one past training: the paper's L


BAD = [
    "nope",
    "rerope:w=3",
    "rerope:window",
    "rerope:window=3,window=4",
    "self-extend:group=0",
    "self-extend:group=1.5",
    "self-extend:window=12",
    "rerope:window=12",
    "rerope:window=0",
    "leaky-rerope:k=0",
    "leaky-rerope:k=-1",
    "leaky-rerope:k=nan",
    "sinks:n=-1",
    "sinks:n=4,window=9",
    "lm-infinite:local=13",
    "dca:chunk=12",
    "dca:chunk=6,local=6",
    "string:shift=12",
    "string:shift=3,local=4",
    "self-extend:group=x",
]


@pytest.mark.parametrize("spec", BAD)
def test_bad_specs_are_refused(spec):
    with pytest.raises(ExtrapError):
        parse(spec, L)


def test_registry_lists_every_method_with_a_citation():
    assert set(METHODS) == {"sinks", "lm-infinite", "self-extend", "dca", "rerope", "leaky-rerope", "string"}
    assert all(cls.citation and cls.summary for cls in METHODS.values())


def test_new_angle_pairs_by_hand():
    # d = 64, base 10000: θ_i = 10000^(-i/32); training at L_tr = 4096 covered a full turn where 4095·θ_i >= 2π,
    # i.e. θ_i >= 2π/4095, i.e. i <= 32·log10(4095/2π)/4 = 22.5...: pairs 23..31 had not; past 4095 they turn further
    r = analyse_extension("string", 4096, 16384, head_dim=64)
    want = sum(1 for i in range(32) if 4095 * 10000 ** (-i / 32) < 2 * math.pi)
    assert want == 9 and r.new_angle_pairs == want and r.max_distance > 4095
    assert analyse_extension("rerope", 4096, 16384, head_dim=64).new_angle_pairs == 0  # d <= w < L_tr
    with pytest.raises(ExtrapError):
        analyse_extension("rerope", 4096, 100, head_dim=7)
