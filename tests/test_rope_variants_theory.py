"""extrap theory rope on the variants: p-RoPE, partial rotary, Resonance, xPos's decay, LongRoPE configs.

Men et al.'s B(m) is checked against a brute-force sum in Python floats over the effective frequencies, the
non-rotating pairs counted as cos(0) = 1 and xPos's terms weighted by ζ_i^(m/scale_base) with
ζ_i = (2i/d + γ)/(1 + γ) written out here (Sun et al. 2023, Eq. 11).  Liu et al.'s numbers and the verdict
are worked by hand in the comments.
"""

from __future__ import annotations

import json
import math

import pytest

from extrap.cli import main
from extrap.theory.rope import analyse_rope
from extrap.theory.rope_records import RopeTheory

TWO_PI = 2 * math.pi
CAP = 20000  # distances searched for the first negative B(m): the brute force below walks them all


def _theta(d: int, base: float = 10000.0) -> list[float]:
    return [base ** (-2 * i / d) for i in range(d // 2)]


def _first_negative(thetas, weights=None, cap: int = CAP):
    """The first m with Σ_i w_i(m) cos(m θ_i) < 0, one distance at a time in Python floats."""
    weights = weights or [lambda m: 1.0] * len(thetas)
    for m in range(cap):
        if math.fsum(w(m) * math.cos(m * t) for t, w in zip(thetas, weights)) < 0:
            return m
    return None


def test_p_rope_aggregation_counts_the_dropped_pairs_as_ones():
    # d = 32: int(0.625·32 // 2) = 10 pairs rotate, 6 add cos(0) = 1
    thetas = _theta(32)[:10] + [0.0] * 6
    r = analyse_rope("rope:p=0.625", 32, 256, 1024, aggregation_cap=CAP)
    assert [p.theta for p in r.pairs] == pytest.approx(thetas, rel=1e-15)
    assert r.men.identity_pairs == 6 and "cos(0) = 1" in r.men.aggregation_terms
    assert r.men.aggregation_first_negative == _first_negative(thetas)
    plain = analyse_rope("rope", 32, 256, 1024, aggregation_cap=CAP).men.aggregation_first_negative
    assert plain == _first_negative(_theta(32)) and plain != r.men.aggregation_first_negative


def test_p_rope_dropped_pairs_never_leave_training():
    # p = 0.5 at d = 32: pairs 0..7 rotate, θ_7 = 10^(-7/4) has period 2π·56.23 = 353.3 > 255: the limit is 256
    r = analyse_rope("rope:p=0.5", 32, 256, 4096)
    assert (r.in_distribution_length, r.limiting_pair, r.decided_by) == (256, 7, "rotation-angles")
    for p in r.pairs[8:]:
        assert (p.theta, p.period, p.train_angle, p.beyond_training) == (0.0, None, 0.0, False)
    # p = 0.25: pairs 0..3, periods up to 2π·10^(3/4) = 35.3 < 255: every rotating pair turned a full period;
    # Liu's critical pair (d_extra = 2⌈16·ln(256/2π)/ln 10^4⌉ = 2⌈6.44⌉ = 14, pair 7) does not rotate: no bound
    r = analyse_rope("rope:p=0.25", 32, 256, 4096)
    assert (r.in_distribution_length, r.decided_by, r.liu.critical_dim) == (None, "full-periods", 14)
    assert r.liu.extrapolation_bound is None and "do not rotate" in r.liu.liu_note


def test_partial_rotary_liu_over_the_rotary_dimension_and_b_by_brute_force():
    # partial 0.75 at d = 32: r = 24, θ_i = 10^4^(-2i/24) for 12 pairs, then 4 pairs with θ = 0
    thetas = _theta(24) + [0.0] * 4
    r = analyse_rope("rope:partial=0.75", 32, 256, 1024, aggregation_cap=CAP)
    assert r.rotary_dim == 24 and [p.theta for p in r.pairs] == pytest.approx(thetas, rel=1e-15)
    # d_extra = 2⌈12·ln(256/2π)/ln 10^4⌉ = 2⌈12·3.70720/9.21034⌉ = 2⌈4.83⌉ = 10; bound 2π·10^4^(10/24) = 291.66
    assert r.liu.critical_dim == 10
    assert r.liu.extrapolation_bound == pytest.approx(TWO_PI * 10000 ** (10 / 24), rel=1e-12)
    assert r.men.aggregation_first_negative == _first_negative(thetas)


def test_half_a_head_passing_through_keeps_b_nonnegative():
    # partial 0.5: 8 pairs of 1 against 8 cosines, B(m) >= 0 everywhere (checked by brute force up to CAP)
    r = analyse_rope("rope:partial=0.5", 32, 256, 1024, aggregation_cap=CAP)
    assert r.men.aggregation_first_negative is None and r.men.identity_pairs == 8
    assert _first_negative(_theta(16) + [0.0] * 8) is None


def test_resonance_theory_uses_the_rounded_frequencies():
    thetas = [TWO_PI / round(TWO_PI / t) for t in _theta(32)]
    r = analyse_rope("rope:resonance=1", 32, 256, 1024, aggregation_cap=CAP)
    assert [p.period for p in r.pairs] == pytest.approx([round(TWO_PI / t) for t in _theta(32)], rel=1e-12)
    assert r.men.aggregation_first_negative == _first_negative(thetas)


@pytest.mark.parametrize("scale_base", [16.0, 64.0, 512.0])
def test_xpos_decay_enters_b(scale_base):
    """B(m) = Σ ζ_i^(m/scale_base) cos(m θ_i), ζ_i = (2i/d + 0.4)/1.4 (Sun et al. 2023, Eq. 11)."""
    zeta = [(2 * i / 32 + 0.4) / 1.4 for i in range(16)]
    weights = [lambda m, z=z: z ** (m / scale_base) for z in zeta]
    r = analyse_rope(f"xpos:scale_base={scale_base:g}", 32, 256, 1024, aggregation_cap=CAP)
    assert r.men.aggregation_first_negative == _first_negative(_theta(32), weights)
    assert "ζ_i^(m/scale_base)" in r.men.aggregation_terms and r.men.paper_min_base is None


def test_xpos_partial_pass_through_pairs_weigh_one():
    # r = 24: ζ over the rotary part, (2i/24 + 0.4)/1.4 for 12 pairs; 4 pass-through pairs neither turn nor decay
    zeta = [(2 * i / 24 + 0.4) / 1.4 for i in range(12)]
    weights = [lambda m, z=z: z ** (m / 64) for z in zeta] + [lambda m: 1.0] * 4
    r = analyse_rope("xpos:scale_base=64,partial=0.75", 32, 256, 1024, aggregation_cap=CAP)
    assert r.men.aggregation_first_negative == _first_negative(_theta(24) + [0.0] * 4, weights)


def test_records_round_trip_with_the_new_fields():
    r = analyse_rope("xpos:partial=0.5,p=0.75,resonance=1", 32, 256, 1024, aggregation_cap=CAP)
    out = json.loads(json.dumps(r.to_json()))
    assert RopeTheory.from_json(out) == r
    assert out["rotary_dim"] == 16 and out["identity_pairs"] == 8 + 2  # 8 pass-through, int(0.75·8) = 6 of 8 kept


# ---------------------------------------------------------------------------
# config.json: LongRoPE (Phi-3-mini-128k's shape), p-RoPE (proportional), GPT-NeoX partial rotary
# ---------------------------------------------------------------------------
PAIRS = 48  # Phi-3-mini: hidden 3072 / 32 heads = 96
SHORT = [round(1.0 + 0.01 * i, 4) for i in range(PAIRS)]
LONG = [round(1.0 + 0.37 * i + 0.013 * i * i, 4) for i in range(PAIRS)]
PHI3 = {  # the shape of Phi-3-mini-128k-instruct's config; the factor lists are made up for the test
    "model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "hidden_size": 3072, "num_attention_heads": 32,
    "num_key_value_heads": 32, "num_hidden_layers": 32, "intermediate_size": 8192, "vocab_size": 32064,
    "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "short_factor": SHORT, "long_factor": LONG},
}  # fmt: skip


def _folder(tmp_path, name: str, cfg: dict):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def _json(capsys, *argv) -> dict:
    assert main(["theory", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_phi3_longrope_config_gets_the_full_analysis(tmp_path, capsys):
    r = _json(capsys, "--checkpoint", f"hf:{_folder(tmp_path, 'phi3', PHI3)}")["rope"][0]
    assert (r["scaling"], r["head_dim"], r["train_length"], r["length"]) == ("longrope", 96, 4096, 131072)
    # no factor in the config: 131072/4096 = 32, attention factor sqrt(1 + ln 32 / ln 4096) = sqrt(1 + 5/12)
    assert r["attention_factor"] == pytest.approx(math.sqrt(1 + 5 / 12), rel=1e-12)
    theta = _theta(96)
    assert [p["theta"] for p in r["pairs"]] == pytest.approx([t / f for t, f in zip(theta, LONG)], rel=1e-12)
    # pre-training (plain θ, 4095 tokens) left the pairs whose period exceeds 4095 short of a turn; past 4096
    # each turns λ_i times slower, so pair i stays inside up to m with m·θ_i/λ_i <= 4095·θ_i: m = ⌊4095·λ_i⌋
    open_pairs = [i for i, t in enumerate(theta) if 4095 * t < TWO_PI]
    expected = min(math.floor(4095 * LONG[i]) + 1 for i in open_pairs)
    assert r["in_distribution_length"] == expected and r["decided_by"] == "rotation-angles"
    assert r["aggregation_first_negative"] is not None and r["explanation"]


def test_longrope_config_without_its_lists_is_refused(tmp_path, capsys):
    cfg = {**PHI3, "rope_scaling": {"type": "longrope", "short_factor": SHORT}}
    assert main(["theory", "--checkpoint", f"hf:{_folder(tmp_path, 'bad', cfg)}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "longrope needs long_factor" in err


def test_proportional_is_p_rope_and_neox_is_partial(tmp_path, capsys):
    gemma = {
        "model_type": "gemma3",
        "hidden_size": 512,
        "num_attention_heads": 4,
        "head_dim": 128,
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25},
    }
    neox = {"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 2048,
            "rotary_pct": 0.25, "rotary_emb_base": 10000}  # fmt: skip
    g = _json(capsys, "--checkpoint", f"hf:{_folder(tmp_path, 'g', gemma)}")["rope"][0]
    # int(0.25·128 // 2) = 16 of 64 pairs rotate, θ over the whole head
    assert g["pe"] == "rope:base=1000000,p=0.25" and g["head_dim"] == 128 and g["identity_pairs"] == 48
    assert g["pairs"][15]["theta"] == pytest.approx(1e6 ** (-30 / 128), rel=1e-12)
    n = _json(capsys, "--checkpoint", f"hf:{_folder(tmp_path, 'n', neox)}")["rope"][0]
    # head 64, rotary 16: θ over 16, 24 pass-through pairs
    assert (n["pe"], n["head_dim"], n["rotary_dim"], n["identity_pairs"]) == ("rope:partial=0.25", 64, 16, 24)
    assert n["pairs"][1]["theta"] == pytest.approx(10000 ** (-2 / 16), rel=1e-12)


@pytest.mark.parametrize(
    "cfg",
    [
        {**PHI3, "rope_scaling": {"type": "longrope", "short_factor": SHORT[:-1], "long_factor": LONG}},
        {**PHI3, "rope_scaling": {"type": "longrope", "short_factor": SHORT, "long_factor": [0.0] * PAIRS}},
        {**PHI3, "rope_scaling": None, "partial_rotary_factor": 0.01},
        {**PHI3, "rope_scaling": None, "partial_rotary_factor": 1.5},
    ],
)
def test_bad_configs_are_one_line_exit_2(tmp_path, capsys, cfg):
    csv = tmp_path / "out.csv"
    assert main(["theory", "--checkpoint", f"hf:{_folder(tmp_path, 'x', cfg)}", "--csv", str(csv)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("extrap: error:") and not csv.exists()
