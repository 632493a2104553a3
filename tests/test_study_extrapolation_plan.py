"""Experiments extrapolation and alibi-slopes, planned through their specs: the jobs and the checks before training."""

from __future__ import annotations

import pytest

from extrap.errors import ExtrapError
from extrap.experiments import registry
from extrap.experiments.extrapolation.about import DEFAULT_PES
from extrap.experiments.extrapolation.plan import slope_variants
from extrap.experiments.extrapolation.presets import PAPER_SLOPES
from extrap.study.plan import StudyRequest


def plan(tmp_path, experiment: str, **kw):
    request = StudyRequest(out=tmp_path / "study", preset="smoke", experiment=experiment, resume=False, **kw)
    return registry.get(experiment).plan(request)


def test_extrapolation_plans_one_job_per_default_pe(tmp_path):
    exp = plan(tmp_path, "extrapolation")
    assert [j.name for j in exp.jobs] == list(DEFAULT_PES)
    job = exp.jobs[0].args
    assert job.run_dir == str(tmp_path / "study" / "runs" / "alibi") and job.multiples == (1, 2, 4, 8, 16)
    assert "10 PEs, preset smoke, L_tr=64" in exp.headline


def test_alibi_slopes_plans_003_table1_with_windows_scaled_to_l_tr(tmp_path):
    """The smoke preset's variants (Δ 0 and 6, h = 2, w 40 and 320 at L_tr = 512) at the smoke L_tr of 64."""
    exp = plan(tmp_path, "alibi-slopes")
    assert [j.name for j in exp.jobs] == ["alibi", "alibi:shift=6", "alibi:h=2", "window:5", "window:40"]
    with pytest.raises(ExtrapError, match="PEs are not chosen"):  # the variants are the models: a list was dropped
        plan(tmp_path, "alibi-slopes", pes=["rope"])


def test_slope_variants_label_each_group():
    variants = slope_variants(512, PAPER_SLOPES)  # the paper's own L_tr: windows unscaled
    assert [v.label for v in variants if v.group == "window"] == [f"w={w}→{w}" for w in PAPER_SLOPES.window]
    assert [v.pe for v in variants if v.group == "shift"][:2] == ["alibi:shift=-3", "alibi"]  # Δ = 0 is plain ALiBi
    assert {v.group for v in variants} == {"shift", "same-h", "window"}


@pytest.mark.parametrize(
    ("kw", "words"), [({"preset": "huge"}, "unknown preset 'huge'"), ({"pes": ["nosuch"]}, "nosuch")]
)
def test_bad_preset_or_pe_is_refused_before_training(tmp_path, kw, words):
    request = StudyRequest(**{"out": tmp_path / "s", "preset": "smoke", "resume": False, **kw})
    with pytest.raises(ExtrapError, match=words):
        registry.get("extrapolation").plan(request)
    assert not (tmp_path / "s").exists()
