"""Issue 28, "error bars at every length": every evaluated length above L_tr records the verdict's |Δppl|/ppl and
its standard error (``ratio``, ``ratio_stderr``, ``ratio_paired`` in the eval JSON), checked against numpy on the
per-token losses of a tiny real evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import extrap
from extrap.evaluate import EvalSettings, evaluate_run
from extrap.results import EvalReport

L_TR = 32  # the tiny runs' training length


def batch_means_se(d: np.ndarray, independent: bool) -> float:
    """Standard error of mean(d) by batch means (evaluate.stats' rule: blocks of min(1024, n // 8) tokens,
    each token its own block when the targets are far apart), written here from that rule."""
    n = d.size
    block = 1 if independent else max(1, min(1024, n // 8))
    k = n // block
    means = d[: k * block].reshape(k, block).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(k))


@pytest.mark.parametrize(
    "settings",
    [
        EvalSettings(lengths=(32, 64, 128), tokens=1024),  # blocks of 128 tokens
        EvalSettings(lengths=(32, 64, 128), protocol="last-token", targets=24),  # every target its own block
    ],
    ids=["nonoverlapping", "last-token"],
)
def test_every_length_above_l_tr_records_the_paired_ratio_and_its_standard_error(tiny_runs, settings):
    rep = evaluate_run(extrap.load(tiny_runs["alibi"]), settings)
    ref = rep.result_at(L_TR)
    assert ref.ratio is None and "ratio" not in ref.to_json()  # L_tr is the reference, not compared
    above = [r for r in rep.results if r.length > L_TR]
    assert [r.length for r in above] == [64, 128]
    a = ref.nll.double().numpy()
    for r in above:
        b = r.nll.double().numpy()
        d = b.mean() - a.mean()  # the two lengths' mean losses, over the same scored tokens
        se = math.exp(d) * batch_means_se(b - a, settings.protocol == "last-token")  # the delta method
        assert r.ratio_paired is True
        assert r.ratio == pytest.approx(abs(math.expm1(d)), rel=1e-9, abs=1e-15)
        assert r.ratio == pytest.approx(abs(r.ppl / ref.ppl - 1), rel=1e-9, abs=1e-15)
        assert r.ratio_stderr == pytest.approx(se, rel=1e-9)
        # far below the unpaired sqrt(se_L^2 + se_ref^2): the same targets' losses move together
        assert r.ratio_stderr < math.exp(d) * math.hypot(r.stderr, ref.stderr)
        row = r.to_json()
        assert (row["ratio"], row["ratio_stderr"], row["ratio_paired"]) == (r.ratio, r.ratio_stderr, True)
    worst = max(above, key=lambda r: r.ratio)
    assert (rep.worst_ratio, rep.worst_ratio_stderr) == (worst.ratio, worst.ratio_stderr)
    back = EvalReport.from_json(rep.to_json())
    assert [(r.ratio, r.ratio_stderr, r.ratio_paired) for r in back.results] == [
        (r.ratio, r.ratio_stderr, r.ratio_paired) for r in rep.results
    ]


def test_a_report_of_an_earlier_version_reads_without_the_per_length_keys():
    old = {
        "train_length": 32,
        "worst_ratio": 0.1,
        "worst_ratio_stderr": 0.01,
        "results": [{"length": 32, "loss": 4.0, "ppl": math.exp(4.0)}, {"length": 64, "loss": 4.1}],
    }
    rep = EvalReport.from_json(old)
    assert [(r.ratio, r.ratio_stderr, r.ratio_paired) for r in rep.results] == [(None, None, None)] * 2
    assert all("ratio" not in r.to_json() for r in rep.results)
