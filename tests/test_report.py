"""The study report: claims checklist, figures, HTML, and rendering in headless Chromium."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from extrap import report
from extrap.experiments.extrapolation.claims import sliding_relative
from extrap.experiments.extrapolation.lookup import num_heads, pe_verdict
from extrap.results import StudyResults

L_TR = 128
LENGTHS = [128, 256, 512, 1024, 2048]
PES = ["alibi", "kerple-log", "type1", "type2", "example1", "example2", "sinusoidal"]

# perplexity at each length: flat for convergent RPEs (000 Fig. 3), growing for the
# divergent examples (000 Fig. 4), exploding for sinusoidal
PPL = {
    "alibi": [20.0, 19.9, 19.95, 20.0, 20.05],
    "kerple-log": [19.5, 19.4, 19.45, 19.5, 19.5],
    "type1": [21.0, 20.9, 21.0, 21.1, 21.2],
    "type2": [21.5, 21.4, 21.5, 21.5, 21.6],
    "example1": [21.0, 22.5, 25.0, 29.0, 35.0],
    "example2": [20.8, 21.9, 24.0, 27.0, 31.0],
    "sinusoidal": [22.0, 60.0, 300.0, 900.0, math.inf],
}
THEORY = {  # pe -> (verdict, test, B, {ε: TRF}) per head
    "alibi": [
        ("converges", "ratio", 1.0 / (1 - 2 ** -(k + 1)), {"0.001": 10 * (k + 1), "1e-06": 20 * (k + 1)})
        for k in range(8)
    ],
    "kerple-log": [("converges", "log-scale (Cauchy p-test)", 2.6, {"0.001": 300, "1e-06": 90000})] * 8,
    "type1": [("converges", "log-scale (Cauchy p-test)", 1.6449, {"0.001": 1000, "1e-06": 1000000})] * 8,
    "type2": [("converges", "fast decay", 1.44, {"0.001": 12, "1e-06": 41})] * 8,
    "example1": [("diverges", "log-scale (Cauchy p-test)", None, {"0.001": None, "1e-06": None})] * 8,
    "example2": [("diverges", "Bertrand (ln n)", None, {"0.001": None, "1e-06": None})] * 8,
    "sinusoidal": [("not-applicable", "none", None, {})],
}


def _verdict(ppls, delta=0.02):
    """000 Definition 0.1 over the lengths >= L_tr (the first length is L_tr)."""
    worst = max(abs(p - ppls[0]) / ppls[0] for p in ppls)
    return worst < delta, worst


def _protocol(pe, protocol, scale=1.0):
    ppls = [p * scale for p in PPL[pe]]
    ext, worst = _verdict(ppls)
    rows = [
        {
            "length": L,
            "loss": math.log(p),
            "loss_stderr": 0.004 * L / 128 if math.isfinite(p) else None,  # bands that widen with length
            "ppl": p,
            "bits_per_token": math.log2(p),
            "tokens": 4096,
            "seconds": 0.01 * L / 128,
            "window": None,
        }
        for L, p in zip(LENGTHS, ppls)
    ]
    return {
        "protocol": protocol,
        "train_length": L_TR,
        "delta": 0.02,
        "extrapolates": ext,
        "worst_ratio": worst,
        "results": rows,
        "window": {"mode": "none", "size": None, "reason": "exact attention"},
    }


def _grad_curve(decay, n=255):
    total = sum(decay**k for k in range(n))
    out, run = [], 0.0
    for k in range(n):
        run += decay**k
        out.append(run / total)
    return out


def make_results():
    theory = [
        {
            "pe": pe,
            "head": h,
            "verdict": v,
            "test": test,
            "series_sum": B,
            "trf": trf,
            "explanation": f"{pe}: head {h} <see tail>",
        }
        for pe, heads in THEORY.items()
        for h, (v, test, B, trf) in enumerate(heads)
    ]
    evals = {
        pe: {p: _protocol(pe, p, s) for p, s in (("nonoverlapping", 1.1), ("sliding", 1.0), ("last-token", 0.95))}
        for pe in PES
    }
    erf = {
        pe: {
            "grad_erf": 20.0 + 10 * k,
            "grad_curve": _grad_curve(0.6 + 0.05 * k),
            "attn_erf": 15.0 + 12 * k,
            "trf": 100 * (k + 1),
        }
        for k, pe in enumerate(["type2", "alibi", "kerple-log", "type1"])
    }
    return {
        "preset": "cpu",
        "experiment": "extrapolation",
        "pes": PES,
        "train_length": L_TR,
        "lengths": LENGTHS,
        "delta": 0.02,
        "extrap_version": "0.1.0",
        "command": "extrap study --pes '<script>alert(1)</script>' & co",
        "seed": 0,
        "corpus": "stdlib",
        "corpus_hash": "abc123",
        "created": "2024-01-01T00:00:00",
        "theory": theory,
        "runs": {pe: {"run_dir": f"runs/{pe}", "final_loss": 3.0, "seconds": 12.5, "params": 123456} for pe in PES},
        "eval": evals,
        "erf": erf,
        "spearman": {"grad": 0.8, "attn": 1.0, "n": 4},
        "learning": {  # every model learned: loss at L_tr below 0.8 of the unigram entropy
            "unigram_entropy": 4.5,
            "unigram_tokens": 10**6,
            "max_fraction": 0.8,
            "protocol": "nonoverlapping",
            "loss": {pe: math.log(PPL[pe][0] * 1.1) for pe in PES},
        },
        "timing": {
            "window_sizes": [16, 32, 64, 128],
            "tokens": 2048,
            "rows": [
                {"method": "sliding", "seconds": [0.9, 1.8, 3.5, 7.0], "relative": 31.2},
                {"method": "nonoverlapping", "seconds": [0.03, 0.06, 0.11, 0.22], "relative": 1.0},
                {"method": "cache-window", "seconds": [0.05, 0.08, 0.15, 0.3], "relative": 1.4},
            ],
        },
    }


def typed(results: dict) -> StudyResults:
    """A results.json dict as the report reads it."""
    return StudyResults.from_json(results)


def claims_by_name(results):
    return {c.claim: c for c in report.compute_claims(typed(results))}


CONV, EXAMPLES, SIN = (
    "Convergent RPEs extrapolate",
    "1/n and 1/(n ln n) do not extrapolate",
    "Sinusoidal does not extrapolate",
)
TRF, SPEAR, TIME = (
    "TRF(Type2) < TRF(Type1)",
    "TRF and ERF trends agree",
    "Sliding-window inference is much slower than non-overlapping",
)


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    results = make_results()
    path = report.write_report(typed(results), out)
    return out, path, results


# ---------------------------------------------------------------------------
# claims
# ---------------------------------------------------------------------------
def test_claims_reproduced_on_consistent_data():
    claims = report.compute_claims(typed(make_results()))
    assert [c.ok for c in claims] == [True] * 6, claims
    by = {c.claim: c for c in claims}
    assert "alibi" in by[CONV].evidence and "last-token" in by[CONV].evidence
    assert "31.20×" in by[TIME].evidence and "44.35" in by[TIME].evidence
    assert "ε=1e-06: Type1 1000000, Type2 41" in by[TRF].evidence and "widest head" in by[TRF].evidence
    assert "n = 4" in by[SPEAR].evidence and "type2, alibi, kerple-log, type1" in by[SPEAR].evidence
    assert "widest head, ε = 0.001" in by[SPEAR].evidence  # an unlabelled TRF is read as the old study's


def test_example2_that_extrapolates_refutes_the_claim():
    r = make_results()
    r["eval"]["example2"]["last-token"]["extrapolates"] = True
    assert claims_by_name(r)[EXAMPLES].ok is False


def test_convergent_pe_that_fails_refutes_the_claim():
    r = make_results()
    r["eval"]["type2"]["last-token"]["extrapolates"] = False
    c = claims_by_name(r)[CONV]
    assert c.ok is False and "type2: does not extrapolate" in c.evidence


def test_verdict_falls_back_to_nonoverlapping():
    r = make_results()
    for pe in PES:
        del r["eval"][pe]["last-token"]
    assert pe_verdict(typed(r), "alibi")[2] == "nonoverlapping"
    assert claims_by_name(r)[CONV].ok is True


def test_claims_refuted():
    r = make_results()
    r["eval"]["sinusoidal"]["last-token"]["extrapolates"] = True
    r["theory"] = [
        dict(row, trf={"0.001": 5000, "1e-06": 10**7}) if row["pe"] == "type2" else row for row in r["theory"]
    ]
    r["spearman"] = {"grad": 0.2, "attn": 0.9, "n": 5}  # judged on the gradient ERF when present
    r["timing"]["rows"][0]["relative"] = 4.0
    by = claims_by_name(r)
    assert [by[k].ok for k in (SIN, TRF, SPEAR, TIME)] == [False, False, False, False]


def test_claims_none_when_data_missing():
    by = claims_by_name({})
    assert all(c.ok is None for name, c in by.items() if name != TRF)
    assert all(c.evidence for c in by.values())
    r = make_results()
    del r["eval"]["example2"]
    r["spearman"] = {"grad": 1.0, "attn": None, "n": 2}
    by = claims_by_name(r)
    assert by[EXAMPLES].ok is None and "example2: not evaluated" in by[EXAMPLES].evidence
    assert by[SPEAR].ok is None  # two PEs always rank perfectly


def test_the_trf_claim_needs_only_the_formulas():
    """TRF(Type2) < TRF(Type1) is decided without type1 and type2 in the study (000 Theorem 0.5)."""
    r = make_results()
    r["theory"] = [row for row in r["theory"] if row["pe"] not in ("type1", "type2")]
    r["n_head"] = 4
    c = claims_by_name(r)[TRF]
    assert c.ok is True and "ε=0.001: Type1 608, Type2 15" in c.evidence and "from the formulas" in c.evidence
    assert "ε=1e-06: Type1 607927, Type2 48" in c.evidence


def test_timing_ratio_recomputed_from_seconds():
    r = make_results()
    del r["timing"]["rows"][0]["relative"]
    assert sliding_relative(typed(r)) == pytest.approx(sum([0.9, 1.8, 3.5, 7.0]) / sum([0.03, 0.06, 0.11, 0.22]))


# ---------------------------------------------------------------------------
# figures and HTML
# ---------------------------------------------------------------------------
def test_heatmap_values_come_from_the_registry():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from extrap.theory import plots

    fig, ax = plt.subplots()
    plots.heatmap("type1", ax=ax, size=8, num_heads=8)
    grid = ax.images[0].get_array()
    assert grid[5, 0] == pytest.approx(1 / 36)  # 000 Type1: b_n = 1/n^2 with n = t + 1
    assert np.ma.is_masked(grid[0, 5]) or np.isnan(grid[0, 5])  # causal: no weight on future keys
    plt.close(fig)


def test_theory_plots_are_called_when_present(tmp_path, monkeypatch):
    """Figures of the theory (000 Figs. 6-7) are drawn by extrap.theory.plots when it provides them."""
    import sys
    import types

    import extrap.theory

    calls = []
    fake = types.ModuleType("extrap.theory.plots")
    fake.heatmap = lambda spec, ax, **kw: calls.append(("heatmap", spec, kw)) or ax.plot([0, 1])
    fake.trf_curves = lambda specs, ax, **kw: calls.append(("trf_curves", tuple(specs), kw)) or ax.plot([0, 1])
    monkeypatch.setitem(sys.modules, "extrap.theory.plots", fake)
    monkeypatch.setattr(extrap.theory, "plots", fake, raising=False)
    r = {k: v for k, v in make_results().items() if k in ("pes", "theory")}
    r["pes"] = ["type1", "type2", "example1"]
    r["theory"] = [row for row in r["theory"] if row["pe"] in r["pes"]]
    notes = {}
    figs = report.write_figures(typed(r), tmp_path, notes)
    assert set(figs) == {"heatmaps", "trf_curves"}
    assert [c[1] for c in calls if c[0] == "heatmap"] == ["type1", "type2", "example1"]
    assert ("trf_curves", ("type1", "type2"), {"num_heads": 8, "head": None}) in calls  # convergent PEs only
    assert "results.json" not in notes["trf_curves"] and "registry" not in notes["heatmaps"]  # not the fallback


def test_learned_pe_heatmap_uses_the_trained_run(tmp_path, tiny_text):
    """A learned PE's heatmap shows layer 0 of its trained model; heads come from the run's config."""
    from extrap.train import build_configs, train

    m, t = build_configs("kerple-log", "smoke", overrides=dict(steps=2, corpus=tiny_text, train_length=32))
    train(tmp_path / "runs" / "kerple-log", m, t, progress=False)
    r = {"pes": ["kerple-log", "t5"], "runs": {"kerple-log": {"run_dir": "runs/kerple-log"}}}
    notes = {}
    assert num_heads(typed(r), tmp_path) == m.n_head
    assert "heatmaps" in report.write_figures(typed(r), tmp_path, notes)
    assert "kerple-log: trained values of layer 0" in notes["heatmaps"]
    assert "t5: initial values" in notes["heatmaps"] and f"of {m.n_head}" in notes["heatmaps"]


def test_report_files(full_report):
    out, path, _ = full_report
    assert path == out / "report.html"
    for name in [
        "ppl_nonoverlapping",
        "ppl_sliding",
        "ppl_last-token",
        "heatmaps",
        "trf_curves",
        "trf_erf",
        "grad_curves",
    ]:
        for ext in ("png", "svg"):
            f = out / "figures" / f"{name}.{ext}"
            assert f.is_file() and f.stat().st_size > 500, f
    assert (out / "figures" / "heatmaps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_html_content(full_report):
    out, path, _ = full_report
    text = path.read_text(encoding="utf-8")
    assert text.index("Claims checklist") < text.index("Theory (000")  # claims come first
    assert text.count("✔") >= 6 and "✘" not in text.split("<tbody>")[1].split("</tbody>")[0]
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;see tail&gt;" in text
    assert 'src="figures/ppl_sliding.png"' in text and 'alt="' in text
    assert "44.35" in text and "abc123" in text
    assert "http://" not in text and "https://" not in text  # self-contained
    assert "0–7" in text  # identical Type1 heads collapsed into one row


def test_report_is_navigable(full_report):
    """Contents first, then the claims linking to what decides them, then the main figure; per-PE tables folded."""
    import html
    import re

    _, path, _ = full_report
    text = path.read_text(encoding="utf-8")
    assert text.index('<nav id="toc"') < text.index('id="claims"') < text.index('id="main-figure"')
    assert text.index('id="main-figure"') < text.index('id="theory"')
    ids = set(re.findall(r' id="([^"]+)"', text))
    links = re.findall(r'href="#([^"]+)"', text)
    assert set(links) <= ids and {"claims", "main-figure", "theory", "erf", "timing"} <= set(links)
    claims = text.split('<table class="claims">')[1].split("</table>")[0]
    decided = re.findall(r'<td>([^<]*)</td><td>[^<]*</td><td>[^<]*</td><td><a href="#([^"]+)">', claims)
    assert {html.unescape(claim): anchor for claim, anchor in decided} == {
        CONV: "main-figure",
        EXAMPLES: "main-figure",
        SIN: "main-figure",
        TRF: "theory",
        SPEAR: "erf",
        TIME: "timing",
    }
    assert (
        text.count("<details ") == len(THEORY)
        and "<summary>type1: converges; TRF at ε=0.001, widest head: 1000" in text
    )
    main = text.split('id="main-figure"')[1].split("</section>")[0]
    assert 'src="figures/ppl_last-token.png"' in main and "paired standard errors" in main
    assert 'href="#main-figure">at the top' in text  # the last-token table points to it instead of a second copy


def test_main_figure_draws_the_change_against_l_tr_beside_perplexity_lines():
    from extrap.experiments.extrapolation import figures

    fig = figures.ppl_figure(typed(make_results()), "last-token")
    change, ppl = fig.axes
    assert change.get_yscale() == "symlog" and ppl.get_yscale() == "log"  # sinusoidal spans decades
    labels = [ln.get_label() for ln in ppl.lines if not ln.get_label().startswith("_")]
    assert labels == list(PPL) and not ppl.collections  # lines, no bands


def test_report_writes_valid_json_roundtrip(tmp_path):
    """results.json as the study writes it (NaN / inf from a failed length) renders."""
    full = make_results()
    r = {k: full[k] for k in ("preset", "train_length", "lengths", "delta")}
    r["pes"] = ["sinusoidal"]
    r["eval"] = {"sinusoidal": full["eval"]["sinusoidal"]}
    r["eval"]["sinusoidal"]["nonoverlapping"]["results"][-1].update(
        loss=math.nan, ppl=math.inf, error="CUDA out of memory"
    )
    (tmp_path / "results.json").write_text(json.dumps(r))
    path = report.write_report(report.load_results(tmp_path), tmp_path)
    assert "CUDA out of memory" in path.read_text(encoding="utf-8")
    assert (tmp_path / "figures" / "ppl_nonoverlapping.png").is_file()


def test_partial_results_render(tmp_path):
    r = make_results()
    for key in ("eval", "erf", "spearman", "timing"):
        del r[key]
    r["pes"] = ["type1", "example1", "sinusoidal"]
    r["theory"] = [row for row in r["theory"] if row["pe"] in r["pes"]]
    del r["runs"]["example1"]
    r["runs"]["sinusoidal"] = {"error": "training diverged <nan>"}
    path = report.write_report(typed(r), tmp_path)
    text = path.read_text(encoding="utf-8")
    assert "Missing" in text and "no evaluation section" in text and "no training run for example1" in text
    assert "runs sinusoidal: training diverged &lt;nan&gt;" in text
    assert (tmp_path / "figures" / "heatmaps.png").is_file()
    assert not (tmp_path / "figures" / "ppl_sliding.png").exists()
    empty = report.write_report(typed({}), tmp_path / "empty")
    assert "Claims checklist" in empty.read_text(encoding="utf-8")


def test_alibi_slopes_section(tmp_path):
    variants = [("alibi:shift=2", "shift", "Δ=2"), ("alibi:h=0", "same-h", "h=0"), ("window:40", "window", "w=40")]
    r = {
        "experiment": "alibi-slopes",
        "train_length": L_TR,
        "pes": [pe for pe, _, _ in variants],
        "slopes": {"variants": [{"pe": pe, "group": g, "label": lab} for pe, g, lab in variants]},
        "eval": {pe: {"last-token": _protocol("alibi", "last-token")} for pe, _, _ in variants},
    }
    text = report.write_report(typed(r), tmp_path).read_text(encoding="utf-8")
    assert "003 Table 1" in text and "94.4" in text and "Δ=2" in text
    assert "timing" not in text.split('id="missing"')[1].split("</section>")[0]  # the experiment never times
    assert 'id="timing"' not in text and 'href="#slopes-shift">ALiBi slopes: shift' in text
    assert (tmp_path / "figures" / "slopes_same-h.svg").is_file()


# ---------------------------------------------------------------------------
# results.json: the schema between the study and the report
# ---------------------------------------------------------------------------
def test_results_json_of_an_earlier_version_loads(tmp_path):
    """A TRF written before the labels existed is read as what it was: the widest head at ε = 1e-3."""
    old = make_results()  # its erf entries carry "trf" without "trf_eps" / "trf_reduce"
    (tmp_path / "results.json").write_text(json.dumps(old))
    from extrap.experiments.extrapolation.results import block

    res = report.load_results(tmp_path)
    own = block(res)
    assert all((e.trf_eps, e.trf_reduce) == (1e-3, "max") for e in own.erf.values())
    assert (own.spearman.trf_eps, own.spearman.trf_reduce) == (1e-3, "max")
    assert res.to_json()["erf"]["alibi"] == old["erf"]["alibi"]  # the experiment's block is written back as it was
    text = report.write_report(res, tmp_path).read_text(encoding="utf-8")
    assert "TRF: widest head, ε = 0.001" in text and "TRF (widest head, ε = 0.001) beside" in text


def test_results_keep_what_they_do_not_declare():
    r = make_results()
    r["future_section"] = {"x": [1, 2]}
    r["eval"]["alibi"]["sliding"]["future_key"] = {"y": 3}  # an eval report's own keys are typed (EvalReport)
    d = typed(r).to_json()
    assert d["future_section"] == {"x": [1, 2]} and d["eval"]["alibi"]["sliding"]["future_key"] == {"y": 3}
    assert typed(json.loads(json.dumps(d))) == typed(r)


def test_mixed_trf_settings_are_shown_per_row(tmp_path):
    r = make_results()
    r["erf"]["alibi"].update(trf_eps=0.01, trf_reduce="median")
    text = report.write_report(typed(r), tmp_path).read_text(encoding="utf-8")
    assert "TRF taken as" in text and "median over heads, ε = 0.01" in text and "widest head, ε = 0.001" in text


def test_load_results_refuses_what_is_not_results(tmp_path):
    from extrap.errors import ExtrapError

    with pytest.raises(ExtrapError, match="cannot read"):
        report.load_results(tmp_path)
    (tmp_path / "results.json").write_text("[1, 2]")
    with pytest.raises(ExtrapError, match="JSON object"):
        report.load_results(tmp_path / "results.json")


def test_templates_are_package_files():
    from importlib.resources import files

    names = {p.name for p in files("extrap.report").joinpath("templates").iterdir()}
    assert {"report.html.j2", "runs.html.j2", "macros.html.j2"} <= names  # the page shell's
    for package, fragment in (("extrapolation", "extrapolation.html.j2"), ("alignment", "alignment.html.j2")):
        assert files(f"extrap.experiments.{package}").joinpath(fragment).is_file()  # each experiment's own
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"experiments/*/*.j2"' in pyproject  # installed with the package


# ---------------------------------------------------------------------------
# headless Chromium: the report loads with every image
# ---------------------------------------------------------------------------
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium(tmp_path, *args):
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _page_checks(tmp_path, path, width: int = 1200) -> str:
    """The attributes the page's own check (templates/image_check.js.j2) sets on <body>, in a headless Chromium."""
    proc = _chromium(tmp_path, "--virtual-time-budget=5000", f"--window-size={width},2000", "--dump-dom", path.as_uri())
    body = next((line for line in proc.stdout.splitlines() if "<body" in line), "")
    assert "data-images" in body, (proc.stdout[-2000:], proc.stderr[-2000:])
    return body


def test_chromium_loads_every_image(full_report, tmp_path):
    """Every figure loads, every in-page link has its target, and the page is no wider than the window,
    also with every per-PE table opened."""
    out, path, _ = full_report
    body = _page_checks(tmp_path, path)
    assert 'data-images="ok"' in body and 'data-anchors="ok"' in body and 'data-overflow="ok"' in body, body
    opened = out / "opened.html"
    opened.write_text(path.read_text(encoding="utf-8").replace("<details ", "<details open "), encoding="utf-8")
    for width in (1200, 800):
        body = _page_checks(tmp_path, opened, width)
        assert 'data-overflow="ok"' in body and 'data-anchors="ok"' in body, (width, body)
    shot = tmp_path / "shot.png"
    proc = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,2000", path.as_uri())
    assert shot.is_file() and shot.stat().st_size > 1000, proc.stderr[-2000:]


def test_chromium_flags_lost_anchors_and_overflow(full_report, tmp_path):
    """The in-page checks really detect a link without a target and a page wider than the window."""
    out, path, _ = full_report
    text = path.read_text(encoding="utf-8").replace('id="erf"', 'id="erf-gone"')
    wide = out / "wide.html"
    wide.write_text(text.replace("</body>", '<div style="width:3000px">x</div></body>'), encoding="utf-8")
    body = _page_checks(tmp_path, wide)
    assert 'data-anchors="missing:erf' in body and 'data-overflow="wide:' in body, body


def test_chromium_flags_broken_image(full_report, tmp_path):
    """The in-page check really detects a missing figure (so 'ok' above means something)."""
    out, path, _ = full_report
    broken = out / "broken.html"
    broken.write_text(path.read_text(encoding="utf-8").replace("figures/heatmaps.png", "figures/nope.png"))
    assert 'data-images="broken:1"' in _page_checks(tmp_path, broken)


def test_alibi_slope_claims_follow_003_table_1():
    def ev(ok, w):
        return {"last-token": {"extrapolates": ok, "worst_ratio": w}}

    variants = [
        {"pe": "a", "group": "shift", "label": "Δ=0"},
        {"pe": "b", "group": "shift", "label": "Δ=6"},
        {"pe": "c", "group": "window", "label": "w=40"},
        {"pe": "d", "group": "window", "label": "w=320"},
    ]
    r = {
        "experiment": "alibi-slopes",
        "slopes": {"variants": variants},
        "eval": {"a": ev(True, 0.001), "b": ev(False, 0.2), "c": ev(True, 0.0), "d": ev(True, 0.01)},
        "learning": {"unigram_entropy": 4.0, "max_fraction": 0.8, "loss": dict.fromkeys("abcd", 2.0)},
    }
    claims = {c.claim.split()[0]: c.ok for c in report.compute_claims(typed(r))}
    assert claims["Shifting"] is True  # mild shift extrapolates, extreme shift does not
    assert claims["Windowed"] is False  # the largest window still extrapolates here: not reproduced
    assert claims["One"] is None  # no same-h variants evaluated
