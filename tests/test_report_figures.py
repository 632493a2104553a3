"""Every figure says what the data say: captions, colour bars, legends and curve order are checked on the drawing."""

from __future__ import annotations

import dataclasses
import math

import pytest

from extrap.experiments.extrapolation import figures, shapes
from extrap.plotting import new_figure
from extrap.results import StudyResults
from extrap.theory import plots, receptive_field


def luma(rgba) -> float:
    """Rec. 709 luma of an sRGB colour: how bright it looks."""
    return 0.2126 * rgba[0] + 0.7152 * rgba[1] + 0.0722 * rgba[2]


def image_direction(im) -> str:
    """ "brighter" when the image's largest value is drawn lighter than its smallest, else "darker"."""
    arr = im.get_array()
    hi, lo = float(arr.max()), float(arr.min())
    assert hi > lo
    return "brighter" if luma(im.cmap(im.norm(hi))) > luma(im.cmap(im.norm(lo))) else "darker"


OPPOSITE = {"brighter": "darker", "darker": "brighter"}


def test_heatmap_caption_says_what_the_colours_show():
    """The report's caption: the colour drawn for the most weight is as bright or dark as the caption says."""
    res = StudyResults.from_json({"pes": ["type1", "alibi"], "n_head": 8})
    notes = {}
    fig = shapes.heatmaps_figure(res, notes)
    images = [im for ax in fig.axes for im in ax.images]
    assert len(images) == 2
    for im in images:
        way = image_direction(im)
        assert f"{way} = more weight" in notes["heatmaps"], notes["heatmaps"]
        assert f"{OPPOSITE[way]} = more weight" not in notes["heatmaps"]
    grid = images[0].get_array()  # type1: the weight falls with distance, the diagonal holds the most
    assert float(grid[5, 5]) == float(grid.max()) > float(grid[5, 0])


def test_theory_heatmap_colour_bar_says_what_the_colours_show():
    fig = new_figure()
    ax = fig.add_subplot()
    plots.heatmap("type2", ax=ax, size=16, num_heads=1)
    bar_label = fig.axes[1].get_ylabel()
    way = image_direction(ax.images[0])
    assert f"{way} = more weight" in bar_label and "exp(r(i - j))" in bar_label


def drawn_curves(ax) -> dict[str, dict[float, float]]:
    return {ln.get_label(): dict(zip(ln.get_xdata(), ln.get_ydata())) for ln in ax.lines}


@pytest.mark.parametrize("normalise", [False, True])
def test_trf_curves_are_ordered_as_the_trfs(normalise):
    """At every ε the higher curve is the larger TRF (000 Fig. 6: Type1's TRF is larger than Type2's)."""
    pes, grid = ["type1", "type2", "alibi"], [1e-1, 1e-2, 1e-3, 1e-5]
    fig = new_figure()
    ax = fig.add_subplot()
    plots.trf_curves(pes, ax=ax, eps_grid=grid, head=None, num_heads=8, normalise=normalise)
    drawn = drawn_curves(ax)
    for eps in grid:
        trf = {pe: receptive_field(pe, eps=eps, reduce="max", num_heads=8).value for pe in pes}
        assert len(set(trf.values())) == 3
        assert sorted(pes, key=lambda pe: drawn[pe][eps]) == sorted(pes, key=trf.get), (eps, trf, drawn)
        if not normalise:
            assert {pe: drawn[pe][eps] for pe in pes} == trf  # in tokens
    assert ("tokens" in ax.get_ylabel()) != normalise and "widest head" in ax.get_title()


def test_trf_curves_default_draws_type1_above_type2(tmp_path):
    """``extrap theory --plot``'s call: Type1 above Type2 at every ε, as its TRF is."""
    fig = new_figure()
    ax = fig.add_subplot()
    plots.trf_curves(["type1", "type2"], ax=ax, num_heads=8)
    drawn = drawn_curves(ax)
    assert drawn["type1"].keys() == drawn["type2"].keys()
    assert all(drawn["type1"][e] > drawn["type2"][e] for e in drawn["type1"])
    from extrap.cli import main

    assert main(["theory", "type1", "type2", "--plot", str(tmp_path)]) == 0
    assert (tmp_path / "trf_curves.svg").is_file()


def test_report_trf_curves_follow_the_trfs():
    rows = [{"pe": pe, "head": 0, "verdict": "converges", "trf": {}} for pe in ("type1", "type2", "alibi")]
    res = StudyResults.from_json({"theory": rows, "n_head": 8})
    notes = {}
    fig = shapes.trf_curves_figure(res, notes)
    drawn = drawn_curves(fig.axes[0])
    for eps in (1e-2, 1e-4):
        ours = sorted(drawn, key=lambda pe: drawn[pe][eps])
        trf = {pe: receptive_field(pe, eps=eps, reduce="max", num_heads=8).value for pe in drawn}
        assert ours == sorted(drawn, key=trf.get)
    assert "higher curve is a larger TRF" in notes["trf_curves"] and "tokens" in notes["trf_curves"]


def ppl_results(n: int, untrained: str | None = None) -> StudyResults:
    pes = [f"window:{k + 1}" for k in range(n)]
    rows = [{"length": L, "ppl": 10.0 + k + L / 1000} for k, L in enumerate((64, 128, 256))]
    d = {
        "pes": pes,
        "train_length": 64,
        "eval": {pe: {"last-token": {"results": rows}} for pe in pes},
        "learning": {"unigram_entropy": 3.0, "max_fraction": 0.8, "loss": dict.fromkeys(pes, 2.0)},
    }
    if untrained:
        d["learning"]["loss"][untrained] = 3.5
    return StudyResults.from_json(d)


def curves_of(ax):
    return [ln for ln in ax.lines if not ln.get_label().startswith("_")]


def test_ppl_legend_matches_its_curves_beyond_ten_pes():
    """17 ALiBi-slope variants: every curve has its own colour and style, and the legend shows the same."""
    fig = figures.ppl_figure(ppl_results(17, untrained="window:3"), "last-token")
    ax = fig.axes[-1]  # the perplexity panel holds the legend of both
    lines = curves_of(ax)
    assert len(lines) == 17
    styles = [(ln.get_color(), ln.get_linestyle()) for ln in lines]
    assert len(set(styles)) == 17
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [ln.get_label() for ln in lines]
    assert [(h.get_color(), h.get_linestyle()) for h in legend.legend_handles] == styles
    assert "window:3 (did not learn)" in [ln.get_label() for ln in lines]
    assert "per token" in ax.get_ylabel() and "tokens" in ax.get_xlabel()


def test_trf_erf_bars_say_why_a_bar_is_missing():
    res = StudyResults.from_json(
        {
            "pes": ["type1", "example1"],
            "erf": {"type1": {"trf": 608, "grad_erf": 20.0}, "example1": {"trf": None, "grad_erf": 30.0}},
            "learning": {"unigram_entropy": 3.0, "max_fraction": 0.8, "loss": {"type1": 2.0, "example1": 2.9}},
        }
    )
    notes = {}
    fig = figures.trf_erf_figure(res, notes)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["type1", "example1\nno TRF\ndid not learn"]
    assert "initial parameters" in notes["trf_erf"] and "its own largest value" in notes["trf_erf"]


def test_gradient_curve_plot_without_an_erf_and_beyond_ten_runs(tmp_path, monkeypatch):
    """``extrap erf --plot``: a run with no gradient ERF is drawn and labelled, and 12 runs stay distinguishable."""
    import extrap.plotting

    drawn = []
    real = extrap.plotting.save_figure
    monkeypatch.setattr(extrap.plotting, "save_figure", lambda fig, *a, **k: drawn.append(fig) or real(fig, *a, **k))
    from extrap.erf import RunErf, plot_gradient_curves

    rows = [
        RunErf.from_json(
            {
                "pe": f"pe{k}",
                "run": f"runs/pe{k}",
                "grad_curve": [min(1.0, (j + 1) / (k + 4)) for j in range(32)],
                "grad_erf": None if k == 0 else float(k + 3),
                "threshold": 0.99,
                "train_length": 16,
                "length": 32,
            }
        )
        for k in range(12)
    ]
    paths = plot_gradient_curves(rows, tmp_path)
    assert all(p.is_file() for p in paths)
    ax = drawn[0].axes[0]
    lines = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
    assert lines[0].get_label() == "pe0 (ERF none)" and lines[1].get_label() == "pe1 (ERF 4.0 tokens)"
    assert len({(ln.get_color(), ln.get_linestyle()) for ln in lines}) == 12
    assert not math.isnan(lines[1].get_ydata()[0])


def test_theory_curves_stay_distinguishable_beyond_ten_schemes(tmp_path):
    """``extrap theory --plot`` with 12 PEs: TRF curves and partial sums keep one style per PE, legend included."""
    specs = [f"window:{w}" for w in range(2, 14)]
    fig = new_figure()
    ax = fig.add_subplot()
    plots.trf_curves(specs, ax=ax, eps_grid=[1e-2, 1e-3], num_heads=1)
    styles = [(ln.get_color(), ln.get_linestyle()) for ln in ax.lines]
    assert len(set(styles)) == 12
    assert [(h.get_color(), h.get_linestyle()) for h in ax.get_legend().legend_handles] == styles
    assert len({ln.get_label() for ln in ax.lines}) == 12


def test_partial_sums_legend_gives_each_verdict(monkeypatch):
    """``extrap theory --plot``'s partial sums: sandwich diverges yet looks flat up to 10^4, so the legend says which
    series converge (with their B, where the converging curves flatten) and which diverge."""
    from extrap.theory import analyse

    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, *a, **k: drawn.append(fig) or [])
    plots.partial_sums_plot(["type1", "alibi", "sandwich", "example1"], None, max_length=4096, num_heads=8)
    ax = drawn[0].axes[0]
    labels = {ln.get_label().split(" ")[0]: ln for ln in ax.lines}
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [ln.get_label() for ln in ax.lines]
    for pe, ln in labels.items():
        r = analyse(pe, 8, eps=(), lengths=(), heads=[0])[0]
        assert f"({r.verdict}" in ln.get_label(), ln.get_label()
        if r.verdict == "converges":  # the curve flattens out at the B its legend gives
            B = float(ln.get_label().split("B = ")[1].rstrip(")"))
            assert ln.get_ydata()[-1] == pytest.approx(B, rel=1e-2) and B == pytest.approx(float(r.series_sum), 1e-3)
    assert "diverges" in labels["sandwich"].get_label() and "tokens" in ax.get_xlabel()
    assert "before the softmax" in ax.get_title()


def alignment_results(acc_at_tr: float) -> StudyResults:
    lengths = ["96", "192", "384"]
    same = dict.fromkeys(lengths, acc_at_tr)  # every setting scores the same: the curves lie on top of each other
    model = {"accuracy": {st: dict(same) for st in ("none", "pmax", "entropy", "pmax-layer")}}
    block = {"train_length": 96, "lengths": [96, 192, 384], "models": {"alibi": model}}
    return StudyResults.from_json({"experiment": "alignment", "alignment": {"passkey": block}})


@pytest.mark.parametrize("acc", [0.0, 0.9])
def test_alignment_accuracy_curves_stay_visible_on_top_of_each_other(acc):
    """Four settings with the same accuracy: each keeps its own marker and line style, the legend shows the same,
    and a model that does not retrieve at L_tr is marked on its panel."""
    from extrap.experiments.alignment.figures import CAPTIONS, accuracy_figure

    fig = accuracy_figure(alignment_results(acc))
    ax = fig.axes[0]
    lines = curves_of(ax)
    assert len(lines) == 4
    styles = [(ln.get_marker(), ln.get_linestyle(), ln.get_color()) for ln in lines]
    assert len({s[0] for s in styles}) == len({s[1] for s in styles}) == 4
    handles = ax.get_legend().legend_handles
    assert [(h.get_marker(), h.get_linestyle(), h.get_color()) for h in handles] == styles
    assert ("did not learn the task" in ax.get_title()) == (acc < 0.2)
    assert "did not learn the task" in CAPTIONS["alignment_accuracy"] and "tokens" in CAPTIONS["alignment_accuracy"]


def test_gradient_curves_caption_names_the_length_and_the_models_that_did_not_learn():
    curve = [min(1.0, (k + 1) / 40) for k in range(255)]
    res = StudyResults.from_json(
        {
            "pes": ["alibi", "type1"],
            "train_length": 64,
            "erf": {"alibi": {"grad_curve": curve}, "type1": {"grad_curve": curve}},
            "learning": {"unigram_entropy": 3.0, "max_fraction": 0.8, "loss": {"alibi": 2.0, "type1": 2.9}},
        }
    )
    notes = {}
    ax = figures.grad_curves_figure(res, notes).axes[0]
    assert "L_ex = 256 from the 255 before it" in notes["grad_curves"] and "0.99" in notes["grad_curves"]
    assert [ln.get_label() for ln in curves_of(ax)] == ["alibi", "type1 (did not learn)"]
    assert "fraction" in ax.get_ylabel() and "tokens" in ax.get_xlabel()


def test_ppl_table_marks_the_verdict_of_a_model_that_did_not_learn():
    """000 Definition 0.1 says 'extrapolates' of a flat curve: the table adds that an untrained model did not learn."""
    from extrap.experiments.extrapolation.tables import ppl_table

    res = ppl_results(2, untrained="window:2")
    for pe in ("window:1", "window:2"):  # the reports are frozen records
        res.eval[pe]["last-token"] = dataclasses.replace(res.eval[pe]["last-token"], extrapolates=True)
    rows = {row[0]: row for row in ppl_table(res, "last-token").rows}
    assert rows["window:1"][-2] == "yes"
    cell = rows["window:2"][-2]
    assert cell.text == "yes, but did not learn" and "unigram entropy" in cell.title


def test_t5_bias_is_drawn_against_distance_with_whole_head_ticks(tmp_path, monkeypatch):
    """``extrap theory --checkpoint hf:T5 --plot``: bias per distance t = i - j (not per bucket), heads 0, 1, 2."""
    transformers = pytest.importorskip("transformers")
    import torch

    import extrap.plotting
    from extrap.hf import plot_t5_tables
    from extrap.hf.theory import t5_bias_by_distance, t5_tables

    cfg = transformers.T5Config(vocab_size=50, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=3)
    transformers.T5ForConditionalGeneration(cfg).save_pretrained(tmp_path / "t5")
    enc = next(t for t in t5_tables(tmp_path / "t5") if t["part"] == "encoder")
    ts, bias = t5_bias_by_distance(enc)
    assert ts[0] == -256 and ts[-1] == 256 and bias.shape == (3, 513)
    assert torch.equal(bias[:, 256 + 5], enc["table"][:, 5])  # exact buckets for small past distances
    assert torch.equal(bias[:, -1], bias[:, -2])  # beyond max_distance: one bucket
    drawn = []
    real = extrap.plotting.save_figure
    monkeypatch.setattr(extrap.plotting, "save_figure", lambda fig, *a, **k: drawn.append(fig) or real(fig, *a, **k))
    files = plot_t5_tables(tmp_path / "t5", tmp_path / "figs")
    assert {p.name for p in files} >= {"t5_encoder_buckets.png", "t5_decoder_buckets.svg"}
    ax = drawn[0].axes[0]
    assert "distance t = i − j" in ax.get_xlabel() and ax.get_xscale() == "symlog"
    ticks = [t for t in ax.get_yticks() if -0.5 <= t <= 2.5]
    assert ticks and all(float(t).is_integer() for t in ticks)
