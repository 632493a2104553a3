"""Position samplers: randomized positions (Ruoss et al. 2023) and PoSE (Zhu et al. 2023)."""

import pytest
import torch

from extrap.errors import ExtrapError
from extrap.positional.sampling import PositionSampler, pose_positions, randomized_positions


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def test_randomized_sorted_distinct_in_range_and_deterministic():
    p = randomized_positions(32, 10, 64, _g())
    assert p.shape == (32, 10) and p.dtype == torch.long
    assert (p.diff(dim=-1) > 0).all()  # sorted and distinct
    assert p.min() >= 0 and p.max() < 64
    assert torch.equal(p, randomized_positions(32, 10, 64, _g()))
    assert not torch.equal(p, randomized_positions(32, 10, 64, _g(1)))


def test_randomized_covers_all_positions_uniformly():
    p = randomized_positions(2000, 8, 32, _g(2))
    counts = torch.bincount(p.flatten(), minlength=32).double()
    assert (counts > 0).all()
    # each position is in the subset with probability L/M = 1/4: 500 of 2000 expected
    assert (counts - 500).abs().max() < 100
    assert torch.equal(randomized_positions(3, 8, 8, _g()), torch.arange(8).expand(3, 8))  # L == M: all of them


def test_randomized_errors():
    with pytest.raises(ExtrapError):
        randomized_positions(1, 10, 5, _g())
    with pytest.raises(ExtrapError):
        randomized_positions(0, 10, 50, _g())


def _chunks(row):
    """Lengths of the maximal runs of consecutive ids."""
    jumps = [i + 1 for i, d in enumerate(row.diff().tolist()) if d != 1]
    bounds = [0] + jumps + [len(row)]
    return [b - a for a, b in zip(bounds, bounds[1:])]


@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_pose_structure(chunks):
    B, L, T = 200, 16, 100
    p = pose_positions(B, L, T, chunks, _g(3))
    assert p.shape == (B, L) and p.dtype == torch.long
    assert (p[:, 0] == 0).all()  # u_0 = 0
    assert (p.diff(dim=-1) >= 1).all() and p.max() < T  # increasing, inside the target window
    for row in p:
        assert len(_chunks(row)) <= chunks  # contiguous inside each chunk; skips only between chunks
    assert torch.equal(p, pose_positions(B, L, T, chunks, _g(3)))


def test_pose_covers_the_target_range():
    T = 64
    p = pose_positions(3000, 8, T, 2, _g(4))
    seen = torch.bincount(p.flatten(), minlength=T)
    assert (seen > 0).all() and p.max() == T - 1
    # every chunk split occurs: the first chunk's length ranges over 1..L-1
    first = {(_chunks(r)[0] if len(_chunks(r)) > 1 else None) for r in p[:300]}
    assert {1, 7} <= first


def test_pose_skips_are_non_decreasing_biases():
    # with many chunks, position - index is the skip bias u of the chunk: non-decreasing, in [0, T - L]
    p = pose_positions(100, 12, 40, 6, _g(5))
    u = p - torch.arange(12)
    assert (u.diff(dim=-1) >= 0).all() and u.min() == 0 and u.max() <= 40 - 12


def test_pose_degenerate_and_errors():
    assert torch.equal(pose_positions(2, 8, 8, 2, _g()), torch.arange(8).expand(2, 8))  # T == L: no room
    assert torch.equal(pose_positions(2, 8, 50, 1, _g()), torch.arange(8).expand(2, 8))  # one chunk, u_0 = 0
    with pytest.raises(ExtrapError):
        pose_positions(1, 10, 5, 2, _g())
    with pytest.raises(ExtrapError):
        pose_positions(1, 4, 50, 5, _g())


def test_sampler_specs():
    s = PositionSampler.from_spec("randomized:max=4096")
    assert s.kind == "randomized" and s.max_length == 4096 and s.spec == "randomized:max=4096"
    t = PositionSampler.from_spec("pose:target=4096,chunks=3")
    assert t.target_length == 4096 and t.num_chunks == 3 and PositionSampler.from_spec(t.spec) == t
    assert PositionSampler.from_spec("pose:target=512").num_chunks == 2
    c = PositionSampler.from_spec("contiguous")
    assert c == PositionSampler.from_spec(None) == PositionSampler() and c.spec == "contiguous"
    assert c.max_position is None and s.max_position == 4096 and t.max_position == 4096
    for bad in (
        "shuffle",
        "randomized",
        "randomized:max=1.5",
        "pose:chunks=2",
        "pose:target=100,max=3",
        "randomized:4096",
        "pose:target=100,chunks=0",
        "contiguous:max=3",
    ):
        with pytest.raises(ExtrapError):
            PositionSampler.from_spec(bad)


def test_sampler_train_and_eval_positions():
    for spec in ("contiguous", "randomized:max=64", "pose:target=64,chunks=2"):
        s = PositionSampler.from_spec(spec)
        p = s.train_positions(4, 16, _g(6))
        assert p.shape == (4, 16) and p.dtype == torch.long and (p.diff(dim=-1) > 0).all() and p.max() < 64
        assert torch.equal(p, s.train_positions(4, 16, _g(6)))
        assert torch.equal(s.eval_positions(16), torch.arange(16))
    assert torch.equal(PositionSampler().train_positions(2, 5), torch.arange(5).expand(2, 5))
    with pytest.raises(ExtrapError):
        PositionSampler.from_spec("randomized:max=8").train_positions(1, 16, _g())
