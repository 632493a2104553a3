"""Men et al.'s least base, found exactly (extrap.theory.least_base), against direct summation of
B(m) = Σ_i cos(m θ_i) on fine scans of bases, and against the grid it replaces (issue 28)."""

import time

import torch

from extrap.positional.rope_scaling import default_inv_freq
from extrap.theory import aggregation as agg
from extrap.theory.least_base import least_base, power_law
from extrap.theory.rope import analyse_rope


def plain(d):
    return lambda bases: default_inv_freq(d, torch.tensor(bases, dtype=torch.float64)[:, None], dtype=torch.float64)


def fails(d, bases, length) -> torch.Tensor:
    """(G,) whether each base has some m < length with B(m) < 0, by direct summation of every cosine."""
    theta = plain(d)(list(bases))  # (G, K)
    m = torch.arange(length, dtype=torch.float64)
    out = []
    for t in theta.split(max(1, 2**22 // (length * theta.shape[1]))):
        b = torch.cos(m[None, :, None] * t[:, None, :]).sum(2)  # (g, L)
        out.append((b < -1e-9).any(1))  # margins of 1e-9 >> the float64 error of these sums (~1e-11)
    return torch.cat(out)


def check_least(d, length, below: float, step: float = 1e-4):
    c, e = power_law(plain(d))
    t = time.perf_counter()
    best = least_base(c, e, length)
    took = time.perf_counter() - t
    assert agg.first_negative(plain(d)([best])[0], length) is None  # it passes (exact signs)
    assert fails(d, [best * (1 - 1e-8)], length).all()  # within 1e-9 of the edge: just below fails
    n = int(below / step)
    scan = [best * (1 - step * k) for k in range(1, n + 1)]  # every base on a 1e-4 scan below it fails
    assert fails(d, scan, length).all()
    return best, took


def test_d128_2048_the_grid_missed_an_island_17_percent_lower():
    best, took = check_least(128, 2048, 0.03)
    grid = agg.min_base_for_length(plain(128), 2048)
    assert grid > 1.15 * best  # issue 28: the 0.96% grid reported a base 17% too high
    assert took < 2.0


def test_d128_4096_agrees_with_men_et_al_table_to_its_two_digits():
    best, took = check_least(128, 4096, 0.02)
    assert 2.65e4 <= best < 2.75e4  # Men et al. 2024's table reads 2.7e4 at 4k (two significant digits)
    assert agg.min_base_for_length(plain(128), 4096) > 1.06 * best  # the grid: 6.6% too high
    assert took < 2.0  # about 0.5 s single-threaded on a shared 2-core machine


def test_small_head_dims_on_a_wide_scan():
    for d, length in ((16, 512), (8, 200)):
        best, _ = check_least(d, length, 0.5)  # every base from best/2 up to it, 1e-4 apart


def test_rope_analysis_reports_the_exact_base_and_falls_back_to_the_grid_where_no_power_law():
    r = analyse_rope("rope", 128, 4096, 2048)
    assert r.men.min_base_for_length == least_base(*power_law(plain(128)), 2048)
    assert r.men.min_base_grid.startswith("exact")
    lin = analyse_rope("rope:scaling=linear,factor=4", 32, 256, 512)  # θ/4: still a power law in the base
    best = lin.men.min_base_for_length
    theta = plain(32)([best, best * (1 - 1e-8)]) / 4
    assert agg.first_negative(theta[0], 512) is None and agg.first_negative(theta[1], 512) is not None
    yarn = analyse_rope("rope:scaling=yarn,factor=4,original_max_position=256", 32, 256, 512)
    assert "grid" in yarn.men.min_base_grid  # not a power law in the base: the grid, said so


def test_theory_rope_huge_inputs_are_one_line_and_exit_2(capsys):
    from extrap.cli import main

    big = str(10**400)
    for args in (["--length", big], ["--train-length", big]):
        assert main(["theory", "rope", "--head-dim", "16", "--train-length", "4096", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "2^64" in err[0] and len(err[0]) < 120
    spec = "rope:scaling=yarn,factor=1e308,original_max_position=4096"
    assert main(["theory", spec, "--head-dim", "16", "--train-length", "4096"]) == 2
    assert "2^64" in capsys.readouterr().err
    assert main(["theory", "rope", "--head-dim", "16", "--train-length", "4096", "--length", str(2**64), "--json"]) == 0
