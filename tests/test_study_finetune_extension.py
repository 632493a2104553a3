"""`extrap study --experiment finetune-extension`: the smoke study end to end, its records, README block and page,
the cpu preset's plan (every method spec parsed, the budget) and bad input refused before anything is written."""

from __future__ import annotations

import pytest

from extrap.cli import main
from extrap.experiments.finetune_extension import readme as ft_readme
from extrap.experiments.finetune_extension.about import METHODS
from extrap.experiments.finetune_extension.claims import goal_verdict
from extrap.experiments.finetune_extension.plan import plan_job
from extrap.experiments.finetune_extension.results import RESULTS, FinetuneBlock
from extrap.report import readme
from extrap.results import load_results
from extrap.study import run_study
from extrap.study.plan import StudyRequest


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("ft") / "s"
    run_study(out, preset="smoke", experiment="finetune-extension", jobs=1, device="cpu",
              methods=["pi", "lm-infinite"])  # fmt: skip
    return out


def test_smoke_study_end_to_end(smoke):
    res = load_results(smoke)
    b = RESULTS.of(res)
    assert res.experiment == "finetune-extension" and b.pe == "rope" and b.lengths == (128, 256)
    assert list(b.methods) == ["pi", "lm-infinite"] and b.finetune_length == 512
    pi, lmi = b.methods["pi"], b.methods["lm-infinite"]
    assert pi.kind == "finetune" and pi.train_length == 512 and pi.train_loss is not None and not pi.approximate
    assert lmi.kind == "base" and lmi.approximate and lmi.as_run == "base + lm-infinite:global=10,local=128"
    for m in (pi, lmi):
        assert [r.length for r in m.ppl] == [128, 256] and all(r.ppl > 1 for r in m.ppl)
        assert [p.length for p in m.passkey] == [128, 256]
        assert {t.task for t in m.ruler} == {"niah_single", "vt"} and [r.length for r in m.longppl] == [128, 256]
    assert lmi.predicted_length == 128 and lmi.basis == "distance"  # local = L_tr: usable up to L_tr
    assert FinetuneBlock.from_json(b.to_json()) == b  # results.json round trip
    assert len(res.claims) == 3 and all(c.ok is None for c in res.claims)  # 2 lengths: none measurable
    html = (smoke / "report.html").read_text()
    assert 'id="finetune-extension"' in html and "LCEG Table 2 layout" in html and "Goal (" in html


def test_the_readme_renders_the_block(smoke, tmp_path):
    md = tmp_path / "README.md"
    md.write_text(f"x\n{ft_readme.BEGIN}\nold\n{ft_readme.END}\ny\n")
    assert readme.main([str(smoke / "results.json"), str(md)]) == 0
    text = md.read_text()
    assert "old" not in text and "| pi | exact |" in text and "| lm-infinite | approximate |" in text


def test_the_cpu_plan_parses_every_method_and_spends_one_budget(tmp_path):
    job, heads = plan_job(StudyRequest(tmp_path / "x", preset="cpu", experiment="finetune-extension"))
    assert [m.name for m in job.methods] == list(METHODS) and heads == 4
    tuned = {m.name: m for m in job.methods if m.kind == "finetune"}
    base_tokens = 2000 * 16 * 128  # rope-base's cpu model: 2000 steps of 16 x 128 tokens
    for m in tuned.values():  # 40% of the base's tokens each: 200 steps at 512, PoSE 800 at 128
        assert m.steps * 16 * m.train_length == pytest.approx(0.4 * base_tokens, rel=0.01)
    assert tuned["rope-ft"].steps == 200 and tuned["pose"].steps == 800
    assert tuned["pi"].pe == "rope:scaling=linear,factor=4,original_max_position=128"
    assert tuned["abf"].pe == "rope:base=640000" and tuned["pose"].positions == "pose:target=2048"
    assert tuned["s2-attn"].attention == "s2:ratio=0.5" and not (tmp_path / "x").exists()


def test_the_fine_tunes_warm_up_then_decay(smoke):
    """A warmup as long as the fine-tune would end it at its peak rate: 5% of its steps (at least 1)."""
    import json

    cfg = json.loads((smoke / "runs" / "finetune-pi" / "config.json").read_text())["train"]
    assert cfg["warmup"] == max(1, round(0.05 * cfg["steps"]))  # the old rule: min(base warmup 5, steps - 1)


@pytest.mark.parametrize(
    ("acc", "budget", "length", "said"),
    [(0.95, 0.1, 512, "met"), (0.5, 0.1, 512, "not met"), (0.95, 0.4, 512, "but not met"),
     (0.95, 0.1, 1024, "but not met"), (0.95, None, 512, "but not met")],
)  # fmt: skip
def test_the_goal_is_met_only_within_its_budget_and_length(acc, budget, length, said):
    """1.0 at L_tr = 128: 0.95 at 16 × L_tr holds the 0.9 ×; the budget (≤ 0.1) and length (≤ 4 × L_tr) must too."""
    verdict = goal_verdict(acc, 1.0, budget, length, 128)
    assert verdict == said if said in ("met", "not met") else said in verdict


@pytest.mark.parametrize("bad", [["--methods", "pi,nope"], ["--preset", "huge"]])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, bad):
    out = tmp_path / "o"
    argv = ["study", "--experiment", "finetune-extension", "--preset", "smoke", "--out", str(out), *bad]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize(
    ("experiment", "flag", "said"),
    [("alibi-slopes", ["--pe", "rope"], "PEs are not chosen"), ("finetune-extension", ["--pe", "rope"], "not chosen")],
)
def test_a_pe_list_the_experiment_does_not_take_is_refused(tmp_path, capsys, experiment, flag, said):
    """alibi-slopes trains its slope variants and finetune-extension one base: a --pe was silently dropped."""
    out = tmp_path / "o"
    assert main(["study", "--experiment", experiment, "--preset", "smoke", "--out", str(out), *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and not out.exists()


def test_the_finetune_study_takes_delta(tmp_path):
    """δ sets the measured break of every method (its PPL rows): --delta is honoured, not refused."""
    from extrap.experiments import registry

    assert "delta" in registry.get("finetune-extension").options
    job, _ = plan_job(StudyRequest(tmp_path / "x", preset="cpu", experiment="finetune-extension", delta=0.05))
    assert job.training.delta == 0.05


def test_claim_a_of_the_committed_cpu_study_is_scipys_spearman_of_its_table():
    """The committed cpu result: ρ (ties averaged) of PPL against passkey over the exact methods at 4 × and 8 × L_tr
    equals scipy's, the stored claims are what the claims code gives for the stored data, and (a) is judged at 4 ×."""
    from pathlib import Path

    from scipy.stats import spearmanr

    from extrap.experiments.finetune_extension.claims import claim_a
    from extrap.report import compute_claims

    path = Path(__file__).resolve().parents[1] / "docs" / "study_finetune_extension"
    if not (path / "results.json").is_file():
        pytest.skip("no committed finetune-extension results")
    res = load_results(path)
    b = RESULTS.of(res)
    said = claim_a(res).evidence
    for L in (4 * b.train_length, 8 * b.train_length):
        ex = [m for m in b.methods.values() if not m.approximate]
        rho = spearmanr([m.ppl_at(L) for m in ex], [m.passkey_at(L) for m in ex]).statistic
        assert f"ρ = {rho:.2f} over {len(ex)} exact methods at {L}" in said
    assert [(c.claim, c.ok, c.evidence) for c in compute_claims(res)] == [
        (c.claim, c.ok, c.evidence) for c in res.claims
    ]
