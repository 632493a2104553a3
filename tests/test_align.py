"""004 attention alignment: Algorithm 1, Props. 1-2, per-layer τ, eval --temperature auto, the align CLI."""

import json
import math

import pytest
import torch

import extrap
from extrap.align import (
    DEFAULT_GRID,
    Algorithm1,
    ClosedForms,
    algorithm1,
    aligned_temperature,
    closed_forms,
    segments_of,
)
from extrap.align import report as align_report_module
from extrap.align.formulas import (
    Prop1,
    SoftmaxStat,
    averaged_sorted_logits,
    check_lengths,
    check_mode,
    check_tau,
    log_length_tau,
    logit_row_stats,
    prop1,
    prop1_pmax,
    prop1_roots,
    prop1_tau,
    prop2_tau,
    search_tau,
    sigma_of,
)
from extrap.align.probe import attention_stats, current_temperature, layer_logit_blocks
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.model.attention import dense_probs
from extrap.model.protocol import ModelShape


@pytest.fixture(scope="module")
def alibi_run(tiny_runs):
    """The brief's tiny model (conftest's shared run): ALiBi, smoke preset, 30 steps at L_tr = 32 on real text."""
    return tiny_runs["alibi"]


@pytest.fixture(scope="module")
def loaded(alibi_run):
    from extrap.run import eval_stream

    run = extrap.load(alibi_run)
    return run, eval_stream(run, "validation", 2048)


# ---------------------------------------------------------------------------
# synthetic logits with a known answer
# ---------------------------------------------------------------------------
def test_grid_is_the_papers_and_search_picks_min_abs_difference():
    assert DEFAULT_GRID == (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5)
    f = lambda t: 1.0 / t  # noqa: E731  monotone, S(0.8) = 1.25
    r = search_tau(f, 1.25, refine=False)
    assert r.tau == r.grid_tau == 0.8 and not r.at_grid_edge
    r = search_tau(f, 1.3, refine=False)  # 1/0.75 = 1.333 is closer than 1/0.8 = 1.25
    assert r.tau == 0.75
    r = search_tau(f, 1.3)  # refinement bisects the bracket [0.75, 0.8]
    assert r.grid_tau == 0.75 and abs(r.tau - 1 / 1.3) < 0.05 / 64 and abs(f(r.tau) - 1.3) < 2e-3
    edge = search_tau(f, 5.0)  # needs τ = 0.2 < 0.5: the grid end, flagged
    assert edge.tau == 0.5 and edge.at_grid_edge and not edge.refined


def test_prop2_reproduces_algorithm1_on_gaussian_logits():
    """Assumption 1 holds exactly: l ~ N(0, σ²).  Entropy matching by search agrees with Prop. 2."""
    g = torch.Generator().manual_seed(0)
    for L_tr, L_ex, s_tr, s_ex in [(512, 4096, 1.0, 1.2), (512, 2048, 1.5, 1.5)]:
        l_tr = torch.randn(32, L_tr, generator=g, dtype=torch.float64) * s_tr
        l_ex = torch.randn(32, L_ex, generator=g, dtype=torch.float64) * s_ex
        target = logit_row_stats(l_tr, 1.0).entropy
        found = search_tau(lambda t, rows=l_ex: logit_row_stats(rows, t).entropy, target).tau
        est_tr, est_ex = sigma_of(averaged_sorted_logits(l_tr)), sigma_of(averaged_sorted_logits(l_ex))
        assert est_tr == pytest.approx(s_tr, rel=0.02) and est_ex == pytest.approx(s_ex, rel=0.02)
        assert prop2_tau(L_tr, L_ex, est_tr, est_ex) == pytest.approx(found, abs=0.015)
        closed = s_ex / math.sqrt(s_tr**2 + 2 * math.log(L_ex / L_tr))
        assert prop2_tau(L_tr, L_ex, s_tr, s_ex) == pytest.approx(closed)


def test_prop1_known_root_and_its_coefficients():
    L_tr, L_ex, s_tr, P, tau_star = 512, 4096, 1.0, 0.3, 0.7
    A = math.log(L_ex) + math.log(P)
    B = math.log(L_tr) + math.log(P) + s_tr**2 / 2
    C = B * tau_star - A * tau_star**2  # makes tau_star a root of A τ² - B τ + C
    s_ex = math.sqrt(2 * C)
    roots = prop1_roots(L_tr, L_ex, s_tr, s_ex, P)
    assert roots[0] == pytest.approx(tau_star) and roots[1] == pytest.approx(C / (A * tau_star))
    assert prop1_tau(L_tr, L_ex, s_tr, s_ex, P) == pytest.approx(tau_star)  # the larger root
    # the root is where §6.1's approximate P_max^ex(τ) equals P
    assert prop1_pmax(L_tr, L_ex, s_tr, s_ex, P, tau_star) == pytest.approx(P)
    # L_ex = L_tr with P from Eq. (2): τ = 1 (nothing to align)
    lmax = 4.0
    P2 = math.exp(lmax - math.log(L_tr) - s_tr**2 / 2)
    assert prop1_tau(L_tr, L_tr, s_tr, s_tr, P2) == pytest.approx(1.0)
    assert prop1_tau(512, 4096, 1.0, 10.0, 0.3) is None  # no real root
    assert log_length_tau(512, 4096) == pytest.approx(0.75)
    res = prop1(L_tr, L_ex, s_tr, s_ex, P)
    assert res.status == "root" and res.tau == pytest.approx(tau_star) and res.tau > res.peak_tau


class _Stub:
    """Just enough of a model for closed_forms / aligned_temperature when the layer-0 logits are patched in."""

    shape = ModelShape(n_layer=1, n_head=1, d_model=1, vocab_size=1, pe="stub")

    def temperatures(self):
        return [1.0]

    def set_temperature(self, tau):
        pass


def test_prop1_without_a_root_on_linear_logits_is_explicit(monkeypatch):
    """ALiBi-like linear logits (not Gaussian: Assumption 1 fails), worked by hand.

    L_tr = 4: [3, 1, -1, -3], σ_tr² = 5, l_max = 3; L_ex = 8: [7, 5, ..., -7], σ_ex² = 21.
    P = e^{3 - 5/2} / 4 = e^{0.5} / 4, so A = log 8 + log P = log 2 + 0.5, B = l_max = 3, C = 10.5;
    B² = 9 < 4AC = 42 (log 2 + 0.5) = 50.1: no real root.  The approximate P_max^ex peaks at
    τ = 2C/B = 7 with e^{B²/4C} / 8 = e^{3/14} / 8 = 0.155 < P = 0.412.
    """
    tr, ex = torch.tensor([[3.0, 1, -1, -3]]), torch.arange(7.0, -8.0, -2.0).view(1, -1)
    monkeypatch.setattr(
        align_report_module, "averaged_layer_logits", lambda m, seg, layer=0: {4: tr, 8: ex}[seg.shape[1]][0]
    )
    cf = closed_forms(_Stub(), torch.arange(16), 4, 8, segments=1)
    assert cf.sigma_tr**2 == pytest.approx(5) and cf.sigma_ex**2 == pytest.approx(21)
    assert cf.P == pytest.approx(math.exp(0.5) / 4)
    assert (cf.A, cf.B, cf.C) == pytest.approx((math.log(2) + 0.5, 3.0, 10.5))
    assert cf.prop1 is None and cf.prop1_roots == () and cf.prop1_status == "no real root"
    assert cf.prop1_peak_tau == pytest.approx(7.0) and cf.prop1_peak_pmax == pytest.approx(math.exp(3 / 14) / 8)
    assert "no real root at L_ex=8" in cf.prop1_note and "below P = 0.412" in cf.prop1_note
    with pytest.raises(ExtrapError, match="no real root"):  # an explicit error, never a made-up τ
        aligned_temperature(_Stub(), torch.arange(16), 4, 8, "prop1", segments=1)
    # the softmax itself needs almost no change: linear logits keep their top probability (τ ≈ 1)
    found = search_tau(lambda t: logit_row_stats(ex.double(), t).pmax, logit_row_stats(tr.double(), 1.0).pmax)
    assert found.tau > 0.95


def test_prop1_rejects_a_root_on_the_wrong_branch():
    """A <= 0 (P <= 1/L_ex): the larger root is positive but below 2C/B, where the approximation is not a softmax.

    L_tr = 4, L_ex = 8, σ_tr = 2, σ_ex = 1, P = 0.1: A = log 0.8 < 0, B = log 0.4 + 2 = 1.084, C = 0.5;
    roots (B ± sqrt(B² - 4AC)) / 2A = 0.424 and -5.28; 2C/B = 0.922.
    """
    res = prop1(4, 8, 2.0, 1.0, 0.1)
    assert res.A == pytest.approx(math.log(0.8)) and res.B == pytest.approx(math.log(0.4) + 2)
    assert res.roots == pytest.approx([0.4237, -5.281], abs=1e-3)
    assert res.peak_tau == pytest.approx(0.9225, abs=1e-3)
    assert res.status == "no valid root" and res.tau is None and prop1_tau(4, 8, 2.0, 1.0, 0.1) is None
    assert "no valid root" in res.explain(8)


def test_prop1_matches_algorithm1_on_gaussian_logits_with_a_planted_max():
    """Assumptions 1 and 2 hold by construction (N(0, σ²) entries plus the same l_max at both lengths)."""
    g = torch.Generator().manual_seed(1)
    L_tr, L_ex, s_tr, s_ex, lmax = 512, 4096, 1.0, 1.3, 7.0

    def logits(L, s):
        x = torch.randn(32, L, generator=g, dtype=torch.float64) * s
        x[:, 0] = lmax
        return x

    l_tr, l_ex = logits(L_tr, s_tr), logits(L_ex, s_ex)
    target = logit_row_stats(l_tr, 1.0).pmax
    found = search_tau(lambda t: logit_row_stats(l_ex, t).pmax, target).tau
    P = math.exp(lmax - math.log(L_tr) - s_tr**2 / 2)  # Eq. (2)
    assert prop1_tau(L_tr, L_ex, s_tr, s_ex, P) == pytest.approx(found, abs=0.02)


def test_averaged_sorted_logits_resamples_causal_rows():
    full = torch.tensor([[3.0, 1.0, 2.0, 0.0]])
    assert averaged_sorted_logits(full).tolist() == pytest.approx([1.5, 0.5, -0.5, -1.5])
    # a causal row with 2 valid keys read at 4 quantiles
    row = torch.tensor([[1.0, -1.0, -math.inf, -math.inf]])
    assert averaged_sorted_logits(row).tolist() == pytest.approx([1.0, 0.5, -0.5, -1.0])


# ---------------------------------------------------------------------------
# a tiny trained model
# ---------------------------------------------------------------------------
def test_streamed_stats_match_dense_probabilities_and_logits_match_the_model(loaded):
    run, stream = loaded
    model = run.model
    seg = segments_of(stream, 48, 2)
    st = attention_stats(model, seg, 0.7)
    model.set_temperature(0.7)
    try:
        with torch.no_grad():
            probs = model(seg, return_probs=True).probs
    finally:
        model.set_temperature(1.0)
    for layer, blocks in enumerate(probs):
        p = dense_probs(blocks, 48).double()
        assert st.layers[layer].pmax == pytest.approx(float(p.amax(-1).mean()), rel=1e-6)
        h = -torch.special.xlogy(p, p).sum(-1).mean()
        assert st.layers[layer].entropy == pytest.approx(float(h), rel=1e-6)
    assert current_temperature(model) == [1.0, 1.0]  # probes restore τ
    # layer-0 pre-softmax logits reproduce the model's probabilities at τ = 1
    with torch.no_grad():
        p0 = dense_probs(model(seg, return_probs=True).probs[0], 48)
    s0 = torch.cat(
        [torch.nn.functional.pad(b, (0, 48 - b.shape[-1]), value=-math.inf) for b in layer_logit_blocks(model, seg, 0)],
        dim=2,
    )
    assert torch.allclose(torch.softmax(s0, -1), p0, atol=1e-6)


def test_algorithm1_aligns_pmax_within_0_01(loaded):
    run, stream = loaded
    model, L_tr = run.model, run.train_length
    L_ex = 48  # the 30-step model is nearly uniform: at 2 x L_tr the target needs τ < 0.5
    res = algorithm1(model, stream, L_tr, L_ex, "pmax", segments=4)
    ref = attention_stats(model, segments_of(stream, L_tr, 4), 1.0).pmax
    before = attention_stats(model, segments_of(stream, L_ex, 4), 1.0).pmax
    after = attention_stats(model, segments_of(stream, L_ex, 4), res.tau).pmax
    assert before < ref - 0.02  # dispersed attention (004 Table 1)
    assert abs(after - ref) < 0.01 and res.target == pytest.approx(ref)
    assert 0.5 <= res.tau < 1.0 and [t for t, _ in res.search.curve] == list(DEFAULT_GRID)
    s = [v for _, v in res.search.curve]
    assert all(a < b for a, b in zip(s, s[1:]))  # lowering τ sharpens
    assert aligned_temperature(model, stream, L_tr, L_ex, "pmax", segments=4) == pytest.approx(res.tau)
    assert aligned_temperature(model, stream, L_tr, 16) == 1.0
    # entropy mode lowers H towards L_tr's
    ent = algorithm1(model, stream, L_tr, L_ex, "entropy", segments=4)
    h_after = attention_stats(model, segments_of(stream, L_ex, 4), ent.tau).entropy
    assert abs(h_after - ent.target) < abs(ent.search.curve[0][1] - ent.target)


def test_per_layer_matches_every_layer(loaded):
    run, stream = loaded
    model, L_tr = run.model, run.train_length
    res = algorithm1(model, stream, L_tr, 40, "pmax", segments=2, per_layer=True)
    assert isinstance(res.tau, tuple) and len(res.tau) == len(model.blocks)
    ref = attention_stats(model, segments_of(stream, L_tr, 2), 1.0)
    after = attention_stats(model, segments_of(stream, 40, 2), res.tau)
    for layer in range(len(model.blocks)):
        assert abs(after.layers[layer].pmax - ref.layers[layer].pmax) < 0.005


@pytest.mark.parametrize(
    "mode, per_layer", [("pmax", False), ("entropy", True), ("prop1", False), ("log-length", False)]
)
def test_align_report_records_round_trip_through_json(loaded, mode, per_layer):
    """align_report's record reads back from its JSON unchanged (τ lists, curves, closed forms, before/after)."""
    from extrap.align import AlignReport, AlignSettings, align_report
    from extrap.align.records import AlignRun

    run, stream = loaded
    settings = AlignSettings(run.train_length, (40, 48), mode, per_layer=per_layer, segments=2, grid=(1.0, 0.8, 0.6))
    rep = align_report(run.model, stream, settings)
    assert [r.length for r in rep.lengths] == [40, 48] and rep.grid == (1.0, 0.8, 0.6)
    text = json.loads(json.dumps(rep.to_json()))
    assert AlignReport.from_json(text) == rep
    assert list(text) == ["train_length", "mode", "per_layer", "segments", "grid", "refine", "reference", "lengths"]
    row = rep.lengths[1]
    assert (row.algorithm1 is not None) == (mode in ("pmax", "entropy"))
    if per_layer:
        assert isinstance(row.tau, tuple) and text["lengths"][1]["tau"] == list(row.tau)
        assert [v["layer"] for v in text["lengths"][1]["algorithm1"]["layers"]] == list(range(len(row.tau)))
        brief = row.algorithm1.summary().to_json()  # what the alignment study stores: no curves, no layer numbers
        assert "curve" not in brief["layers"][0] and "layer" not in brief["layers"][0]
        assert Algorithm1.from_json(brief) == row.algorithm1.summary()
    aligned = AlignRun("somewhere", "alibi", "validation", 30, rep)
    assert AlignRun.from_json(json.loads(json.dumps(aligned.to_json()))) == aligned


def test_prop1_and_stats_round_trip():
    from extrap.align import Stats

    p1 = prop1(4, 8, 2.0, 1.0, 0.1)
    assert Prop1.from_json(json.loads(json.dumps(p1.to_json()))) == p1
    assert list(p1.to_json()) == ["tau", "roots", "P", "A", "B", "C", "peak_tau", "peak_pmax", "status"]
    st = Stats(0.5, 1.0, (SoftmaxStat(0.4, 1.1), SoftmaxStat(0.6, 0.9)), rows=12)
    assert st.to_json() == {
        "pmax": 0.5,
        "entropy": 1.0,
        "rows_per_layer": 12,
        "layers": [{"pmax": 0.4, "entropy": 1.1}, {"pmax": 0.6, "entropy": 0.9}],
    }
    assert Stats.from_json(st.to_json()) == st and st.get("pmax", 1) == 0.6
    old = {"prop1": None, "prop1_closest": 0.7, "prop2": 0.5, "surprise": 1}  # an earlier version's, unknown keys
    cf = ClosedForms.from_json(old)
    assert cf.prop1 is None and cf.prop1_status == "no valid root" and cf.tau("prop2") == 0.5


def test_closed_forms_on_the_model(loaded):
    run, stream = loaded
    cf = closed_forms(run.model, stream, 32, 32, segments=2)
    assert cf.sigma_tr == pytest.approx(cf.sigma_ex) and cf.prop2 == pytest.approx(1.0)
    assert cf.log_length == 1.0
    if cf.lmax_tr > cf.sigma_tr**2:
        assert cf.prop1 == pytest.approx(1.0)
    cf = closed_forms(run.model, stream, 32, 64, segments=2)
    assert cf.sigma_tr > 0 and cf.log_length == pytest.approx(math.log(32) / math.log(64))
    for key in ("prop1", "prop2", "P", "A", "B", "C", "lmax_tr", "lmax_ex"):
        assert key in cf.to_json()
    assert ClosedForms.from_json(json.loads(json.dumps(cf.to_json()))) == cf  # the JSON round trip


def test_bad_input_raises():
    with pytest.raises(ExtrapError):
        search_tau(lambda t: t, 1.0, grid=[1.0, -0.5])
    with pytest.raises(ExtrapError):
        check_mode("max")
    with pytest.raises(ExtrapError):
        check_lengths(32, [1], None)
    with pytest.raises(ExtrapError, match="capped"):
        check_lengths(32, [8192], None)
    check_lengths(32, [8192], 8192)  # the cap can be raised
    with pytest.raises(ExtrapError):
        check_tau(True)
    ready = torch.arange(30).reshape(3, 10)  # ready-made segments: the first L tokens of each row
    assert segments_of(ready, 4, 99).tolist() == [[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23]]
    assert segments_of(torch.arange(100), 10, 3)[:, 0].tolist() == [0, 45, 90]
    with pytest.raises(ExtrapError):
        segments_of(torch.arange(5), 10, 1)


# ---------------------------------------------------------------------------
# eval --temperature and the align CLI
# ---------------------------------------------------------------------------
def test_eval_temperature_auto_records_tau(alibi_run, capsys):
    from extrap.evaluate import EvalSettings, evaluate_run

    rep = evaluate_run(extrap.load(alibi_run), EvalSettings(lengths=[32, 48], tokens=256, temperature="auto")).to_json()
    taus = {r["length"]: r["temperature"] for r in rep["results"]}
    assert taus[32] == 1.0 and 0.5 <= taus[48] < 1.0
    assert rep["temperature"]["mode"] == "auto" and rep["temperature"]["tau"]["48"] == taus[48]
    fixed = evaluate_run(
        extrap.load(alibi_run), EvalSettings(lengths=[32, 48], tokens=256, temperature="0.8")
    ).to_json()
    assert [r["temperature"] for r in fixed["results"]] == [0.8, 0.8]
    plain = evaluate_run(extrap.load(alibi_run), EvalSettings(lengths=[32, 48], tokens=256)).to_json()
    assert "temperature" not in plain["results"][0] and plain["results"][0]["loss"] != fixed["results"][0]["loss"]
    assert (
        main(
            [
                "eval",
                str(alibi_run),
                "--lengths",
                "32,48",
                "--tokens",
                "256",
                "--temperature",
                "auto",
                "--align-mode",
                "log-length",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["results"][1]["temperature"] == pytest.approx(math.log(32) / math.log(48))
    assert main(["eval", str(alibi_run), "--temperature", "0"]) == 2
    assert main(["eval", str(alibi_run), "--temperature", "auto", "--align-mode", "nope"]) == 2


def test_align_cli(alibi_run, capsys, monkeypatch):
    import extrap.cli

    if "extrap.commands.align" not in extrap.cli.COMMAND_MODULES:  # until cli.py lists the command
        monkeypatch.setattr(extrap.cli, "COMMAND_MODULES", [*extrap.cli.COMMAND_MODULES, "extrap.commands.align"])
    assert main(["align", str(alibi_run), "--lengths", "40,48", "--segments", "2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["train_length"] == 32 and [r["length"] for r in rep["lengths"]] == [40, 48]
    row = rep["lengths"][1]
    assert set(row) >= {"tau", "algorithm1", "closed_form", "before", "after"}
    assert abs(row["after"]["pmax"] - rep["reference"]["pmax"]) < 0.01
    assert {"prop1", "prop2", "log_length"} <= set(row["closed_form"])
    assert main(["align", str(alibi_run), "--lengths", "48", "--segments", "1", "--per-layer"]) == 0
    assert "layer 1" in capsys.readouterr().out
    assert main(["align", str(alibi_run), "--lengths", "48", "--segments", "1", "--mode", "prop2"]) == 0
    capsys.readouterr()
    assert main(["align", str(alibi_run), "--lengths", "48", "--segments", "1", "--mode", "prop1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["lengths"][0]  # a root, or no τ and the reason
    cf = row["closed_form"]
    assert (row["tau"] is not None) == (cf["prop1_status"] == "root") == (cf["prop1_note"] is None)
    assert row["tau"] is not None or row["note"] == cf["prop1_note"]
    for bad in (
        ["--mode", "median"],
        ["--lengths", "1"],
        ["--grid", "1.0,0"],
        ["--grid", "x"],
        ["--mode", "prop1", "--per-layer"],
        ["--segments", "0"],
        ["--lengths", "9000"],
    ):
        assert main(["align", str(alibi_run), *bad]) == 2, bad
