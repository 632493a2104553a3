"""Empirical receptive fields: gradient ERF (003 §5.1), attention n_emp (000), TRF vs ERF, ``extrap erf``."""

import json
import math
import sysconfig
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from extrap import positional
from extrap.cli import main
from extrap.erf import (
    ATTN_EPS,
    ATTN_MAX_LENGTH,
    ErfReport,
    ErfSettings,
    RankCorrelation,
    RunErf,
    attention_erf,
    attention_n_emp,
    compare_trf_erf,
    cumulative_from_recent,
    erf_from_curve,
    gradient_erf,
    gradient_norms,
    run_erf,
    spearman,
    spearman_table,
)
from extrap.errors import ExtrapError
from extrap.model import GPT, ModelConfig
from extrap.theory import ERF_TRF, STUDY_TRF, receptive_field


# ---------------------------------------------------------------------------
# fixtures: tiny trained runs shared by the module (training is ~0.2 s each)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """window:4 (2 layers), window:1 (1 layer), window:2 (2 layers) and alibi runs, 20 smoke steps each."""
    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("erf")
    corpus = root / "corpus"  # the same stdlib text as conftest's tiny_text, built once for the module
    corpus.mkdir()
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:60]:
        (corpus / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    out = {}
    for name, pe, n_layer in (
        ("w4", "window:4", 2),
        ("w1", "window:1", 1),
        ("w2", "window:2", 2),
        ("alibi", "alibi", 2),
    ):
        m, t = build_configs(pe, "smoke", overrides=dict(steps=20, corpus=f"text:{corpus}", n_layer=n_layer))
        train(root / name, m, t, progress=False)
        out[name] = str(root / name)
    return out


def tiny_model(pe: str, n_layer: int, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(ModelConfig(vocab_size=50, n_layer=n_layer, d_model=32, n_head=2, pe=pe, attn_block=16)).eval()


# ---------------------------------------------------------------------------
# gradient ERF
# ---------------------------------------------------------------------------
def test_curve_and_erf_by_hand():
    norms = torch.tensor([0.004, 0.004, 0.492, 0.5], dtype=torch.float64)  # oldest -> newest
    curve = cumulative_from_recent(norms)
    assert torch.allclose(curve, torch.tensor([0.5, 0.992, 0.996, 1.0], dtype=torch.float64))
    assert curve[-1] == 1.0
    assert int(erf_from_curve(curve, 0.99)) == 2
    assert int(erf_from_curve(curve, 0.995)) == 3
    assert int(erf_from_curve(curve, 0.999)) == 4
    assert int(erf_from_curve(curve, 0.4)) == 1
    assert int(erf_from_curve(curve, 0.5)) == 2  # strictly greater, as in 003


@pytest.mark.parametrize("W,R", [(1, 1), (1, 2), (3, 1), (4, 2), (3, 3)])
def test_window_gradient_support_is_exact(W, R):
    """An R-layer window:W model sees exactly (W-1)R + 1 context tokens (003 §5: TRF <= wR)."""
    model = tiny_model(f"window:{W}", R)
    ctx = torch.randint(0, 50, (3, 20), generator=torch.Generator().manual_seed(1))
    norms = gradient_norms(model, ctx, torch.tensor([1, 2, 3]))
    support = (W - 1) * R + 1
    assert torch.all(norms[:, :-support] == 0)  # masked keys get exactly zero gradient
    assert torch.all(norms[:, -support] > 0)  # and the farthest visible token does matter
    curve = cumulative_from_recent(norms)
    assert torch.all(curve[:, support - 1 :] == 1.0)
    if support > 1:
        assert torch.all(curve[:, support - 2] < 1.0)
    erf = erf_from_curve(curve, 0.99)
    assert torch.all(erf <= support) and torch.all(erf <= W * R)


def test_last_token_only_model_has_erf_one():
    """window:1 with one layer: the prediction depends on the last context token alone."""
    model = tiny_model("window:1", 1)
    stream = torch.randint(0, 50, (500,), generator=torch.Generator().manual_seed(2))
    g = gradient_erf(model, stream, length=30, segments=5, batch=2)
    assert g.per_segment == (1,) * 5 and g.erf == 1.0 and g.erf_of_mean_curve == 1
    assert len(g.curve) == 29 and g.curve == (1.0,) * 29


def test_gradient_erf_argument_checks():
    model = tiny_model("nope", 1)
    stream = torch.randint(0, 50, (100,))
    for bad in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ExtrapError):
            gradient_erf(model, stream, 10, threshold=bad)
    with pytest.raises(ExtrapError):
        gradient_erf(model, stream, 1)
    with pytest.raises(ExtrapError):
        gradient_erf(model, stream, 200)  # longer than the stream


def test_segment_starts_deterministic_and_in_range():
    from extrap.data import segment_starts

    s = segment_starts(1000, 100, 8)
    assert s == segment_starts(1000, 100, 8)
    assert s[0] == 0 and s[-1] == 900 and all(a < b for a, b in zip(s, s[1:]))
    assert segment_starts(100, 100, 3) == [0, 0, 0]
    with pytest.raises(ExtrapError):
        segment_starts(99, 100, 1)


# ---------------------------------------------------------------------------
# attention ERF
# ---------------------------------------------------------------------------
def test_n_emp_uniform_attention_by_hand():
    """Uniform attention over i+1 keys: C_i(j) = j/(i+1), so n_emp = floor((1-eps)(i+1)) + 1."""
    L, eps = 9, 0.3
    p = torch.zeros(L, L)
    for i in range(L):
        p[i, : i + 1] = 1.0 / (i + 1)
    n = attention_n_emp(p, eps)
    assert n.tolist() == [math.floor(0.7 * (i + 1)) + 1 for i in range(L)]
    assert attention_n_emp(p, eps, first_query=4).tolist() == n[4:].tolist()


def test_n_emp_one_hot_distance():
    """All mass at distance d: the window must reach back d tokens, n_emp = d + 1."""
    L, d = 12, 3
    p = torch.zeros(2, L, L)
    for i in range(L):
        p[:, i, max(0, i - d)] = 1.0
    n = attention_n_emp(p, 0.01, first_query=d)
    assert torch.all(n == d + 1) and n.shape == (2, L - d)


@pytest.mark.parametrize("W,R", [(1, 1), (3, 2)])
def test_window_attention_erf_at_most_w(W, R):
    model = tiny_model(f"window:{W}", R)
    stream = torch.randint(0, 50, (300,), generator=torch.Generator().manual_seed(3))
    a = attention_erf(model, stream, length=40, segments=2, eps=1e-3, first_query=0)
    assert len(a.per_layer_head) == R and len(a.per_layer_head[0]) == 2
    assert all(v <= W for row in a.per_layer_head for v in row)
    assert all(v <= W for row in a.per_layer_head_mean for v in row)
    assert a.summary <= W and a.max_head <= W
    if W == 1:
        assert a.summary == 1.0


def test_attention_length_cap():
    with pytest.raises(ExtrapError, match="dense"):
        attention_erf(tiny_model("nope", 1), torch.zeros(10, dtype=torch.long), ATTN_MAX_LENGTH + 1)


# ---------------------------------------------------------------------------
# Spearman and TRF
# ---------------------------------------------------------------------------
def test_erf_trf_setting_alibi_closed_form():
    """b_t = exp(-m t): the tail drops below B eps once exp(-m j) < eps, so n = floor(ln(1/eps) / m) + 1."""
    eps = 0.01
    slopes = [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]  # ALiBi, 4 heads
    expected = [math.floor(math.log(1 / eps) / m) + 1 for m in slopes]
    assert receptive_field("alibi", eps=eps, reduce="none", num_heads=4).values == expected
    assert receptive_field("alibi", eps=eps, reduce="median", num_heads=4).value == (expected[1] + expected[2]) / 2
    vals = positional.get("alibi").init_values(4)  # per layer, as --trf-source trained passes them
    assert receptive_field("alibi", [vals, vals], eps=eps, reduce="mean").value == sum(expected) / 4


def test_spearman_known_rankings():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 45]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks x = 1, 2.5, 2.5, 4 and y = 1, 3, 2, 4: cov 4.5, var 4.5 and 5
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # a constant ranking
    assert spearman([1], [2]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_attention_erf_of_pure_bias_matches_the_series():
    """With q = k = 0 the attention is softmax(r): n_emp is 000's partial-sum criterion on exp(r) itself."""
    model = tiny_model("alibi", 1)
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight.zero_()
    L, eps, first = 256, 0.01, 128
    stream = torch.randint(0, 50, (600,), generator=torch.Generator().manual_seed(5))
    a = attention_erf(model, stream, length=L, segments=2, eps=eps, first_query=first)
    for h, m in enumerate([2.0**-4, 2.0**-8]):  # ALiBi slopes for 2 heads
        b = torch.exp(-m * torch.arange(L, dtype=torch.float64))
        ref = []
        for i in range(first, L):
            part = b[: i + 1].cumsum(0)
            ref.append(int((part > part[-1] * (1 - eps)).nonzero()[0]) + 1)
        assert a.per_layer_head[0][h] == torch.tensor(ref, dtype=torch.float64).median().item()
        assert a.per_layer_head_mean[0][h] == pytest.approx(sum(ref) / len(ref))
    # far enough from the start, the steep head already sits at its TRF (000 Eq. 22): floor(16 ln 100) + 1 = 74
    assert (
        a.per_layer_head[0][0]
        == math.floor(math.log(1 / eps) * 16) + 1
        == receptive_field("alibi", eps=eps, num_heads=2).values[0]
    )


# ---------------------------------------------------------------------------
# runs, comparison, CLI
# ---------------------------------------------------------------------------
def test_trained_window_run(runs):
    row = run_erf(runs["w4"], ErfSettings(length=48, segments=4, eps=1e-3))
    bound = (4 - 1) * 2 + 1
    assert row.grad.erf <= bound and max(row.grad.per_segment) <= bound <= 4 * 2
    assert row.grad.curve[bound - 1] == 1.0 and len(row.grad.curve) == 47
    assert all(v <= 4 for r in row.attn.per_layer_head for v in r)
    assert row.trf == 4 and row.pe == "window:4" and row.provenance["corpus_hash"]
    assert RunErf.from_json(row.to_json()) == row  # the record and its JSON say the same


def test_compare_trf_erf_ranks_windows(runs):
    res = compare_trf_erf(
        [runs["w1"], runs["w2"], runs["w4"], runs["alibi"]], ErfSettings(eps=0.01, length=40, segments=2)
    )
    rows = res.runs
    assert [r.trf for r in rows[:3]] == [1, 2, 4]
    assert [r.grad.erf for r in rows[:3]] == sorted(r.grad.erf for r in rows[:3])
    windows = spearman_table(rows[:3])
    assert windows.grad == RankCorrelation(rho=pytest.approx(1.0), n=3)
    assert windows.attn.n == 3
    assert res.spearman.grad.n >= 3  # alibi joins once the theory engine gives it a TRF
    assert ErfReport.from_json(res.to_json()) == res


def test_cli_json_schema(runs, capsys, tmp_path):
    rc = main(
        [
            "erf",
            runs["w4"],
            runs["w1"],
            "--json",
            "--length",
            "32",
            "--segments",
            "2",
            "--plot",
            str(tmp_path / "plots"),
        ]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"runs", "spearman", "plots"}
    assert len(data["runs"]) == 2
    for r in data["runs"]:
        assert set(r) >= {"run", "pe", "length", "grad_erf", "grad_curve", "attn_erf", "trf", "seed", "corpus_hash"}
        assert set(r["attn_erf"]) >= {"summary", "per_layer_head"}
        assert r["length"] == 32 and len(r["grad_curve"]) == 31
    assert set(data["spearman"]) == {"grad", "attn"}
    for r in data["runs"]:  # the TRF names its eps and reduction: the default, the study's constant
        assert (r["trf_eps"], r["trf_reduce"]) == (STUDY_TRF.eps, STUDY_TRF.reduce)
        assert r["eps"] == r["attn_erf"]["eps"] == ATTN_EPS  # the attention ERF keeps its own eps
    assert (tmp_path / "plots" / "grad_erf.png").stat().st_size > 0
    assert (tmp_path / "plots" / "grad_erf.svg").stat().st_size > 0


def test_cli_text_table(runs, capsys):
    assert (
        main(
            [
                "erf",
                runs["w1"],
                runs["w2"],
                runs["alibi"],
                "--length",
                "24",
                "--segments",
                "1",
                "--kind",
                "grad",
                "--trf-source",
                "trained",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "window:1" in out and "trained bias parameters" in out
    setting = f"TRF(eps={STUDY_TRF.eps:g}, {STUDY_TRF.reduce})"  # the one reported TRF setting, printed
    assert out.splitlines()[0].rstrip().endswith(setting) and f"Spearman({setting}, grad ERF)" in out
    assert f"n_the(eps={STUDY_TRF.eps:g})" in out and f"{STUDY_TRF.reduce} over heads and layers" in out


@pytest.mark.parametrize(
    "extra",
    [
        ["--threshold", "1.5"],
        ["--threshold", "0"],
        ["--eps", "0"],
        ["--trf-eps", "1"],
        ["--kind", "both-ish"],
        ["--length", "1"],
        ["--split", "train"],
        ["--segments", "0"],
        ["--trf-source", "learned"],
        ["--trf-reduce", "sum"],
    ],
)
def test_cli_bad_arguments_exit_2(runs, capsys, extra):
    assert main(["erf", runs["w1"], *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("extrap: error:") and len(err.strip().splitlines()) == 1


def test_cli_missing_run_dir(tmp_path, capsys):
    assert main(["erf", str(tmp_path / "nope"), "--length", "16"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_erf_and_study_report_the_same_trf_setting(capsys):
    """One documented default: erf's --trf-eps / --trf-reduce and the study read the same constant."""
    import inspect

    from extrap.cli import build_parser

    assert ERF_TRF is STUDY_TRF
    assert inspect.signature(run_erf).parameters["settings"].default == ErfSettings()
    defaults = ErfSettings()
    assert (defaults.trf_eps, defaults.trf_reduce) == (STUDY_TRF.eps, STUDY_TRF.reduce)
    assert defaults.eps == ATTN_EPS == 1e-2  # n_emp's eps is its own setting
    with pytest.raises(SystemExit):
        build_parser().parse_args(["erf", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"default {STUDY_TRF.eps:g}" in help_text and f"default {STUDY_TRF.reduce}" in help_text


def test_cli_trf_eps_is_separate_from_the_attention_eps(runs, capsys):
    argv = ["erf", runs["alibi"], "--length", "24", "--segments", "1", "--kind", "attn", "--json"]
    assert main([*argv, "--eps", "0.05", "--trf-eps", "1e-2", "--trf-reduce", "median"]) == 0
    row = json.loads(capsys.readouterr().out)["runs"][0]
    assert row["eps"] == row["attn_erf"]["eps"] == 0.05
    assert (row["trf_eps"], row["trf_reduce"]) == (1e-2, "median")
    assert row["trf"] == receptive_field("alibi", eps=1e-2, reduce="median", num_heads=2).value


def test_a_trf_without_a_number_is_null_in_strict_json(runs, capsys, monkeypatch):
    """A divergent TRF (infinite) and a NaN measurement are written as null, never Infinity or NaN."""
    from types import SimpleNamespace

    from extrap.erf import runs as erf_runs

    monkeypatch.setattr(
        erf_runs, "_run_trf", lambda *a: SimpleNamespace(value=math.inf, reason="head 0: the series diverges")
    )
    real = erf_runs.gradient_erf

    def nan_curve(*a, **k):
        g = real(*a, **k)
        return replace(g, curve=(math.nan, *g.curve[1:]))

    monkeypatch.setattr(erf_runs, "gradient_erf", nan_curve)
    assert main(["erf", runs["w1"], "--length", "16", "--segments", "1", "--kind", "grad", "--json"]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    row = json.loads(text)["runs"][0]
    assert row["trf"] is None and row["trf_reason"] == "head 0: the series diverges" and row["grad_curve"][0] is None
    assert main(["erf", runs["w1"], "--length", "16", "--segments", "1", "--kind", "grad"]) == 0
    assert "TRF(eps=0.001, max)" in capsys.readouterr().out
