"""STRING's position frequency f(i) = Σ_s max(|s| - i, 0) (An et al. 2025), by hand and by brute force.

Packed windows of L tokens (what extrap's sampler draws) have L - i pairs at distance i each; arbitrary
sequence lengths (documents, cut into pieces of at most L) are checked against counting every causal
query-key pair (m, n), n <= m, one at a time.
"""

from __future__ import annotations

import json
import random

import pytest

from extrap.cli import main
from extrap.data.position_frequency import (
    PositionFrequency,
    first_below,
    packed_windows,
    position_frequency,
    summary_distances,
)
from extrap.errors import ExtrapError


def _brute(lengths, L):
    out = [0] * L
    for n in lengths:
        pieces = [L] * (n // L) + ([n % L] if n % L else [])
        for p in pieces:
            for m in range(p):  # query m attends keys n <= m: distance m - n
                for k in range(m + 1):
                    out[m - k] += 1
    return out


def test_windows_by_hand():
    # three windows of 8 tokens: 8 pairs at distance 0, 7 at distance 1, ..., 1 at distance 7
    assert position_frequency([8, 8, 8], 8) == [24, 21, 18, 15, 12, 9, 6, 3]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_documents_against_brute_force(seed):
    rng = random.Random(seed)
    lengths = [rng.randint(0, 70) for _ in range(25)]  # some longer than L: cut into pieces of L
    assert position_frequency(lengths, 16) == _brute(lengths, 16)


@pytest.mark.parametrize(
    "L,F,expected",
    [
        (10, 0.5, 6),  # f = 10..1; f(i) < 5 first at i = 6 (f = 4) = ⌊10·0.5⌋ + 1
        (10, 0.25, 8),  # f < 2.5 first at f = 2, i = 8
        (10, 0.95, 1),  # f < 9.5 first at f = 9, i = 1
        (10, 0.05, None),  # f >= 1 > 0.5 everywhere
        (4096, 0.5, 2049),
        (1000, 0.3, 701),  # f < 300 first at f = 299, i = 701 (1000·0.7 is 700.0000000000001 in floats)
    ],
)
def test_first_distance_below_the_fraction(L, F, expected):
    r = packed_windows("x", L, F)
    assert r.below_fraction_at == expected
    assert first_below(position_frequency([L], L), F) == expected  # the general count agrees


def test_summary_grid_and_record():
    assert summary_distances(1024) == (0, 256, 512, 768, 1023) and summary_distances(1) == (0,)
    r = packed_windows("stdlib", 1024, windows=96)
    assert r.frequency == (1024, 768, 512, 256, 1) and r.relative == (1.0, 0.75, 0.5, 0.25, 1 / 1024)
    assert r.sequences == "packed-windows" and PositionFrequency.from_json(json.loads(json.dumps(r.to_json()))) == r


@pytest.mark.parametrize(
    "call",
    [
        lambda: packed_windows("x", 0),
        lambda: packed_windows("x", 8, 0.0),
        lambda: packed_windows("x", 8, 1.0),
        lambda: packed_windows("x", 8, stream_tokens=8),
        lambda: position_frequency([3, -1], 4),
    ],
)
def test_bad_values_raise(call):
    with pytest.raises(ExtrapError):
        call()


def test_cli_on_a_corpus(tiny_text, capsys):
    assert (
        main(["corpus", "position-frequency", tiny_text, "--train-length", "64", "--fraction", "0.25", "--json"]) == 0
    )
    r = json.loads(capsys.readouterr().out)
    assert r["distances"] == [0, 16, 32, 48, 63] and r["frequency"] == [64, 48, 32, 16, 1]
    assert r["below_fraction_at"] == 49 and r["stream_tokens"] > 65  # 64 - i < 16 first at i = 49
    assert main(["corpus", "position-frequency", tiny_text, "--train-length", "64"]) == 0
    assert "smallest i with f(i) < 0.5·f(0): 33" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["stdlib", "--train-length", "0"],
        ["stdlib", "--train-length", "-4"],
        ["stdlib", "--train-length", "8", "--fraction", "0"],
        ["stdlib", "--train-length", "8", "--fraction", "1"],
        ["stdlib", "--train-length", "8", "--fraction", "x"],
        ["no-such-corpus", "--train-length", "8"],
        ["{tiny}", "--train-length", "100000000"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(tiny_text, capsys, argv):
    argv = [a.format(tiny=tiny_text) for a in argv]
    assert main(["corpus", "position-frequency", *argv, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("extrap: error:"), err
