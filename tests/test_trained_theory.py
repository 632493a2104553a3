"""A scheme with learned bias parameters is analysed at its trained values, layer by layer and head by head.

The study's theory table, its TRF beside the measured ERFs and ``--window auto`` all use the
values the trained model attends with; the initial values are kept beside them.
"""

from __future__ import annotations

import pytest

import extrap
from extrap.report.sections import erf_context, theory_table
from extrap.results import StudyResults
from extrap.study.extrapolation import THEORY_EPS, erf_entry, theory_rows
from extrap.theory import analyse, receptive_field


@pytest.fixture(scope="module")
def kerple_run(tmp_path_factory):
    """KERPLE-log trained a few steps with a high learning rate, so that r1 and r2 move off their initial values."""
    import sysconfig
    from pathlib import Path

    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("kerple")
    corpus = root / "corpus"
    corpus.mkdir()
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:30]:
        (corpus / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    over = dict(steps=6, corpus=f"text:{corpus}", train_length=32, lr=0.05, warmup=1)
    m, t = build_configs("kerple-log", "smoke", overrides=over)
    train(root / "run", m, t, progress=False)
    return extrap.load(root / "run")


def test_trained_rows_and_trf(kerple_run):
    from extrap.study.trained import trained_theory

    run = kerple_run
    H, layers = run.model.shape.n_head, run.model.bias_values()
    out = trained_theory(run, "kerple-log", THEORY_EPS, [64], 32)
    rows = out["rows"]
    assert [(r["layer"], r["head"]) for r in rows] == [(k, h) for k in range(len(layers)) for h in range(H)]
    init = run.model.scheme.init_values(H)
    for r in rows:
        vals = {k: v.detach().double() for k, v in layers[r["layer"]].items()}
        assert r["params"] == "trained"
        assert r["values"] == pytest.approx({k: float(v[r["head"]]) for k, v in vals.items()})
        assert r["initial_values"] == {k: float(v[r["head"]]) for k, v in init.items()}
        assert r["trf"] == analyse("kerple-log", H, vals, eps=THEORY_EPS, lengths=(), heads=[r["head"]])[0].trf
    trained = receptive_field("kerple-log", layers, eps=1e-3, reduce="max", num_heads=H).value
    initial = receptive_field("kerple-log", eps=1e-3, reduce="max", num_heads=H).value
    assert out["trf"] == trained == max(r["trf"]["0.001"] for r in rows)
    assert trained != initial  # training moved the receptive field: the test can tell the two apart

    entry = erf_entry("kerple-log", {"erf": {"grad_erf": 9.0, "attn_erf": 7.0}, "theory": out}, H)
    assert (entry.trf, entry.trf_initial, entry.trf_params) == (trained, initial, "trained")
    plain = erf_entry("type1", {"erf": {"grad_erf": 9.0}}, H)  # no learned parameters: the formula's TRF
    assert plain.trf == 608 and plain.trf_params == "initial" and plain.trf_initial is None

    res = StudyResults(
        pes=["kerple-log"],
        n_head=H,
        theory=theory_rows(["kerple-log"], H, 32, [64], {"kerple-log": {"theory": out}}),
        erf={"kerple-log": entry},
    )
    assert all(r.trained for r in res.model_theory()["kerple-log"])
    body = theory_table(res).rows
    assert [row[1] for row in body][:1] == ["initial"] and "trained, layer 0" in [row[1] for row in body]
    assert any("(initial 1.5)" in row[2] for row in body)
    erf = erf_context(res, {}, {})["table"]
    assert "TRF at initial parameters" in erf.headers
    assert erf.rows[0][1] == str(trained) and str(initial) in erf.rows[0]


def test_window_auto_reads_the_trained_values(kerple_run):
    """``extrap eval --window auto``: the window is the trained model's TRF over every layer and head."""
    from extrap.evaluate import evaluate_run
    from extrap.theory import WINDOW_AUTO_TRF

    run = kerple_run
    eps = 0.1
    rep = evaluate_run(run.path, lengths=[32, 64], protocol="nonoverlapping", tokens=128, window="auto", eps=eps)
    H = run.model.shape.n_head
    trained = receptive_field(run.model.scheme, run.model.bias_values(), eps=eps, reduce=WINDOW_AUTO_TRF.reduce)
    initial = receptive_field("kerple-log", eps=eps, reduce=WINDOW_AUTO_TRF.reduce, num_heads=H)
    assert rep["window"]["size"] == trained.value != initial.value
