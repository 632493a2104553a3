"""A scheme with learned bias parameters is analysed at its trained values, layer by layer and head by head.

The study's theory table, its TRF beside the measured ERFs and ``--window auto`` all use the
values the trained model attends with, read as ``extrap theory --checkpoint RUN`` reads them;
the initial values are kept beside them.
"""

from __future__ import annotations

import json
import shutil

import pytest

from extrap.erf import RunErf
from extrap.study.trained import TrainedTheory

EPS = (1e-3, 1e-6)


def train_run(root, pe: str, steps: int = 6):
    """``pe`` trained a few steps with a high learning rate, so that its bias parameters leave their initial values."""
    import sysconfig
    from pathlib import Path

    from extrap.train import build_configs, train

    corpus = root / "corpus"
    corpus.mkdir(exist_ok=True)
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:30]:
        (corpus / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    over = dict(steps=steps, corpus=f"text:{corpus}", train_length=32, lr=0.05, warmup=1)
    m, t = build_configs(pe, "smoke", overrides=over)
    train(root / pe, m, t, progress=False)
    return root / pe


@pytest.fixture(scope="module")
def kerple_run(tmp_path_factory):
    return train_run(tmp_path_factory.mktemp("kerple"), "kerple-log")


def theory_command(run_dir, eps, capsys) -> list[dict]:
    """The rows of ``extrap theory --checkpoint RUN --json``."""
    from extrap.cli import main

    capsys.readouterr()
    assert main(["theory", "--checkpoint", str(run_dir), "--eps", ",".join(map(str, eps)), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["results"]


def study_theory(run_dir) -> TrainedTheory:
    from extrap.study.trained import trained_theory

    return trained_theory(run_dir, "kerple-log", EPS, [64], 32)


def test_study_rows_are_the_theory_commands_rows(kerple_run, capsys):
    """Every layer and head: the study's verdict, TRFs and values are the ones `extrap theory --checkpoint` prints."""
    from extrap import positional
    from extrap.theory import receptive_field

    out = study_theory(kerple_run)
    cli = theory_command(kerple_run, EPS, capsys)
    assert [(r.layer, r.result.head) for r in out.rows] == [(r["layer"], r["head"]) for r in cli]
    assert len(cli) >= 4  # two layers of two heads at least
    init = positional.get("kerple-log").init_values(2)
    for ours, theirs in zip(out.rows, cli):
        assert ours.to_json()["params"] == "trained"
        assert (ours.result.verdict, ours.result.trf, ours.values) == (
            theirs["verdict"],
            theirs["trf"],
            theirs["params"],
        )
        assert ours.initial_values == {k: float(v[ours.result.head]) for k, v in init.items()}
    assert out.trf == max(r["trf"]["0.001"] for r in cli)
    initial = receptive_field("kerple-log", eps=1e-3, reduce="max", num_heads=2).value
    assert out.trf != initial  # training moved the receptive field: the test tells the two apart
    assert TrainedTheory.from_json(out.to_json()).to_json() == out.to_json()  # what the study records reads back


def edited_copy(run_dir, dest, raw_shift: float = 3.0):
    """A copy of the run whose stored r1 (every layer, head 0) is raised by ``raw_shift``: a steeper decay."""
    from safetensors.torch import load_file, save_file

    from extrap.run import RunDir

    shutil.copytree(run_dir, dest)
    (weights,) = RunDir(dest).weight_files()
    state = load_file(str(weights))
    keys = [k for k in state if k.endswith("bias_params.r1")]
    assert keys
    for k in keys:
        state[k][0] += raw_shift
    save_file(state, str(weights))
    return dest


def test_an_edited_checkpoint_changes_the_study_theory(kerple_run, tmp_path, capsys):
    """Raise r1 in the checkpoint: the study's rows and the TRF beside the ERFs follow the file."""
    from extrap.erf import ErfSettings, run_erf

    edited = edited_copy(kerple_run, tmp_path / "edited")
    before, after = study_theory(kerple_run), study_theory(edited)
    assert after.to_json()["rows"] != before.to_json()["rows"] and after.trf < before.trf
    assert [r.result.trf for r in after.rows] == [r["trf"] for r in theory_command(edited, EPS, capsys)]
    measured = run_erf(edited, ErfSettings(kind="grad", length=64, segments=1, trf_source="trained"))
    assert measured.trf == after.trf  # `extrap erf --trf-source trained` reads the same file


def test_auto_window_follows_the_checkpoint(kerple_run, tmp_path, capsys):
    """``extrap eval --window auto``: W is the widest trained head's n(ε) that `extrap theory --checkpoint` prints,
    and an edit of r1 in the checkpoint changes it."""
    import extrap
    from extrap.evaluate import EvalSettings, evaluate_run
    from extrap.theory import WINDOW_AUTO_TRF

    edited = edited_copy(kerple_run, tmp_path / "edited")
    eps = 0.1
    windows = {}
    for name, run in (("before", kerple_run), ("after", edited)):
        rep = evaluate_run(
            extrap.load(run),
            EvalSettings(lengths=[32, 64], protocol="nonoverlapping", tokens=128, window="auto", eps=eps),
        ).to_json()
        widest = max(r["trf"][str(eps)] for r in theory_command(run, [eps], capsys))
        assert WINDOW_AUTO_TRF.reduce == "max" and rep["window"]["size"] == widest, name
        windows[name] = rep["window"]["size"]
    assert windows["after"] < windows["before"]


def test_report_shows_trained_values_beside_the_initial_ones(kerple_run):
    from extrap.experiments.extrapolation.measure import erf_entry, theory_rows
    from extrap.experiments.extrapolation.page import erf_context
    from extrap.experiments.extrapolation.results import RESULTS, ExtrapolationBlock, block
    from extrap.experiments.extrapolation.tables import theory_table
    from extrap.results import StudyResults
    from extrap.theory import receptive_field

    out = study_theory(kerple_run)
    entry = erf_entry("kerple-log", RunErf.from_json({"grad_erf": 9.0, "attn_erf": 7.0}), out, 2)
    initial = receptive_field("kerple-log", eps=1e-3, reduce="max", num_heads=2).value
    assert (entry.trf, entry.trf_initial, entry.trf_params) == (out.trf, initial, "trained")
    plain = erf_entry("type1", RunErf.from_json({"grad_erf": 9.0}), None, 2)  # no learned parameters: the formula's TRF
    assert plain.trf == 608 and plain.trf_params == "initial" and plain.trf_initial is None

    res = StudyResults(pes=["kerple-log"], n_head=2)
    own = ExtrapolationBlock(theory=theory_rows(["kerple-log"], 2, 32, [64], {"kerple-log": out}))
    own.erf["kerple-log"] = entry
    RESULTS.put(res, own)
    assert all(r.trained for r in block(res).model_theory()["kerple-log"])
    body = theory_table(res).rows
    assert [row[1] for row in body][:1] == ["initial"] and "trained, layer 0" in [row[1] for row in body]
    assert any("(initial 1.5)" in row[2] for row in body) and any("(initial 3)" in row[2] for row in body)
    erf = erf_context(res, {}, {})["table"]
    assert "TRF at initial parameters" in erf.headers
    assert erf.rows[0][1] == str(out.trf) and str(initial) in erf.rows[0]


def test_t5_buckets_are_shown_trained_and_initial(tmp_path):
    """T5's learned table: every head's buckets recorded, summarised in the table beside the initial zeros."""
    from extrap.experiments.extrapolation.measure import theory_rows
    from extrap.experiments.extrapolation.results import RESULTS, ExtrapolationBlock
    from extrap.experiments.extrapolation.tables import theory_table
    from extrap.results import StudyResults
    from extrap.study.trained import trained_theory

    run = train_run(tmp_path, "t5", steps=3)
    out = trained_theory(run, "t5", EPS, [64], 32)
    rows = out.rows
    assert rows and all(len(r.values["table"]) == 32 for r in rows)
    assert all(r.initial_values["table"] == [0.0] * 32 for r in rows)
    assert any(max(map(abs, r.values["table"])) > 0 for r in rows)  # the table moved off zero
    assert out.trf is None and out.trf_reason  # its last bucket keeps every distance: no TRF
    res = StudyResults(pes=["t5"], n_head=2)
    RESULTS.put(res, ExtrapolationBlock(theory=theory_rows(["t5"], 2, 32, [64], {"t5": out})))
    cells = [row[2] for row in theory_table(res).rows if row[1].startswith("trained")]
    assert cells and all(c.startswith("table 32 values in [") and "(initial 32 values, all 0)" in c for c in cells)
