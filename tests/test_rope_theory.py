"""extrap theory's RoPE analysis: Liu et al. 2024 and Men et al. 2024 against values worked by hand.

Liu et al. 2024 (arXiv 2310.05209): d_extra = 2⌈(d/2)·log_β₀(T_train/2π)⌉ (Eq. 13), T_extra = 2π·β^(d_extra/d)
(Eq. 16a), critical base β₀^(log_{T_train/2π}(T_tune/2π)) (Eq. 16b).  Men et al. 2024 (arXiv 2405.14591):
B(m) = Σ_i cos(m θ_i) >= 0 for every m < L (Theorem 1).  Each expected number below is computed by hand in
its comment; the code under test is only called, never copied.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from extrap.cli import main
from extrap.positional.rope_scaling import SCALINGS, default_inv_freq
from extrap.theory import aggregation as agg
from extrap.theory.rope import analyse_rope, critical_base, critical_dim, liu_regime
from extrap.theory.rope_records import RopeTheory

TWO_PI = 2 * math.pi


def direct_sum(thetas, m: int) -> float:
    """B(m) by direct summation in Python floats, the check the issue asks for."""
    return math.fsum(math.cos(m * t) for t in thetas)


def _json(capsys, *argv) -> dict:
    assert main(["theory", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------
# Liu et al. 2024
# ---------------------------------------------------------------------------
def test_llama2_critical_dimension_is_92_and_its_bound():
    # (d/2)·log_10000(4096/2π) = 64·ln(651.90)/ln(10^4) = 64·6.47989/9.21034 = 45.03 -> ⌈⌉ = 46 -> d_extra = 92
    assert critical_dim(128, 1e4, 4096) == 92
    r = analyse_rope("rope", 128, 4096, 8192)
    assert r.liu.critical_dim == 92 and r.liu.pretrain_base == 1e4
    # T_extra = 2π·10000^(92/128) = 2π·10^2.875 = 6.283185·749.894 = 4711.72
    assert r.liu.extrapolation_bound == pytest.approx(4711.72, rel=1e-6)
    # trained from scratch: T_train <= T_extra < T_train·β^(2/d) = 4096·10^(4/64) = 4729.99
    assert 4096 <= r.liu.extrapolation_bound < 4096 * 1e4 ** (2 / 128)
    # the note gives that range as the range the bound lies in, naming the bound, not as a second bound
    note = r.liu.liu_note
    assert "the bound 4,712 is the period of pair 46" in note and "[4096, 4729.99), a range and not a second" in note
    # pair i turns a full period in training iff 4095·10^(-4i/64)·... >= 2π: pairs 0..45 (46 pairs = 92 dims)
    assert [p.full_period_seen for p in r.pairs] == [i < 46 for i in range(64)]
    assert r.in_distribution_length == 4096 and r.decided_by == "rotation-angles" and r.limiting_pair == 46
    assert r.pairs_beyond_training == 18  # pairs 46..63 at L' = 8192
    p = r.pairs[46]
    assert p.period == pytest.approx(TWO_PI * 1e4 ** (92 / 128)) and p.train_angle == pytest.approx(4095 * p.theta)
    assert p.angle_at_length == pytest.approx(8191 * p.theta) and p.beyond_training


def test_critical_base_and_regimes_by_hand():
    # LLaMA2 fine-tuned at 16K: 10^4^(ln(16384/2π)/ln(4096/2π)) = 10^(4·7.866184/6.479889) = 10^4.855752 = 71738.4
    assert critical_base(1e4, 4096, 16384) == pytest.approx(71738.436, rel=1e-7)
    # at the critical base the bound without the ceiling is T_tune: 2π·β^(log_β₀(T_train/2π)) = 16384
    assert TWO_PI * critical_base(1e4, 4096, 16384) ** (math.log(4096 / TWO_PI) / math.log(1e4)) == pytest.approx(16384)
    r = analyse_rope("rope:base=1000000", 128, 4096, 100000, pretrain_base=1e4, tune_length=16384)
    assert r.liu.regime == "above-critical" and r.liu.critical_base == pytest.approx(71738.436, rel=1e-7)
    # Eq. 16a with β = 10^6: 2π·10^(6·92/128) = 2π·10^4.3125 = 6.283185·20535.25 = 129026.8
    assert r.liu.extrapolation_bound == pytest.approx(129026.78, rel=1e-7)
    # smaller bases at T_tune = 4096: β₃ = 4096/2π = 651.9, β₂ = 4096/π = 1303.8, β₁ = 8192/π = 2607.6
    crit = critical_base(1e4, 4096, 4096)  # = 10^4 when T_tune = T_train
    assert crit == pytest.approx(1e4)
    assert [liu_regime(b, 4096, crit) for b in (500, 1000, 2000, 5000, 2e4)] == [
        "full-period",
        "half-period",
        "quarter-period",
        "below-critical",
        "above-critical",
    ]
    low = analyse_rope("rope:base=500", 128, 4096, 2**20, pretrain_base=1e4, tune_length=4096)
    assert low.liu.regime == "full-period" and low.liu.extrapolation_bound is None
    # every pair turned a full period while tuning at 4096 with base 500 (slowest period 2π·500^(126/128) = 2880)
    assert low.in_distribution_length is None and low.decided_by == "full-periods"


# ---------------------------------------------------------------------------
# Men et al. 2024
# ---------------------------------------------------------------------------
def test_first_negative_by_direct_summation():
    r = analyse_rope("rope", 128, 4096)
    first = r.men.aggregation_first_negative
    assert first == 1707 and r.men.aggregation_cap >= 2**24
    mine = [10000.0 ** (-2 * i / 128) for i in range(64)]  # θ_i = 10^4^(-2i/d), written out again
    assert [p.theta for p in r.pairs] == pytest.approx(mine, rel=1e-15)
    for thetas in ([p.theta for p in r.pairs], mine):
        assert direct_sum(thetas, first) < 0
        assert all(direct_sum(thetas, m) >= 0 for m in range(first))  # every distance before it
    assert direct_sum(mine, first - 1) > 0 and direct_sum(mine, first + 1) < 0.5  # around the sign change
    assert agg.exact_sum(mine, first) == pytest.approx(direct_sum(mine, first), abs=1e-12)
    assert agg.first_negative(mine, first) is None and agg.first_negative(mine, first + 1) == first
    assert agg.first_negative(mine, 2**13, start=first + 1) > first  # a later negative, found from a start


def test_min_base_is_the_smallest_passing_grid_base_and_not_monotone():
    def freqs(bases):
        return default_inv_freq(128, torch.tensor(bases, dtype=torch.float64)[:, None], dtype=torch.float64)

    grid = agg.base_grid()
    best = agg.min_base_for_length(freqs, 8192)
    k = grid.index(best)
    assert agg.first_negative(freqs([best])[0], 8192) is None  # it passes ...
    assert all(agg.first_negative(freqs([b])[0], 8192) is not None for b in grid[k - 40 : k])  # ... those below fail
    # not monotone: the next grid base fails again, so a bisection over bases would be wrong
    assert agg.first_negative(freqs([grid[k + 1]])[0], 8192) is not None
    r = analyse_rope("rope", 128, 4096, 8192)  # exact now (tests/test_least_base.py): below the grid's 84,140
    assert r.men.min_base_for_length < best and r.men.min_base_length == 8192
    assert r.men.paper_min_base == 8.4e4 and "agrees with the table" in r.men.paper_note  # 8.38e4
    assert r.men.min_base_grid.startswith("exact")


def test_men_table_at_1k_and_the_length_cap():
    r = analyse_rope("rope", 128, 1024)
    assert f"{r.men.min_base_for_length:.1e}" == "4.3e+03" and r.men.paper_min_base == 4.3e3
    big = analyse_rope("rope", 128, 4096, 2**18)
    assert big.men.min_base_for_length is None and "not searched" in big.men.min_base_note


# ---------------------------------------------------------------------------
# every scheme, no-op factors, records
# ---------------------------------------------------------------------------
NEEDS = {"dynamic", "ntk-by-parts", "yarn", "llama3", "truncated"}


@pytest.mark.parametrize("pe", ["xpos"] + [s for s in SCALINGS if s != "none"])
def test_every_rotary_scheme_has_the_fields(pe):
    spec = pe if pe == "xpos" else f"rope:scaling={pe},factor=4" + (",original_max_position=256" if pe in NEEDS else "")
    if pe == "longrope":  # 16 pairs at head dim 32
        spec += (
            ",original_max_position=256,short_factor=" + "/".join(["1"] * 16) + ",long_factor=" + "/".join(["4"] * 16)
        )
    r = analyse_rope(spec, 32, 256, 1024)
    out = r.to_json()
    for key in (
        "critical_dim",
        "extrapolation_bound",
        "critical_base",
        "regime",
        "aggregation_first_negative",
        "min_base_for_length",
        "in_distribution_length",
        "decided_by",
        "explanation",
    ):
        assert key in out
    assert len(out["pairs"]) == 16 and RopeTheory.from_json(json.loads(json.dumps(out))) == r
    for p in r.pairs:
        assert p.beyond_training == (p.angle_at_length > p.train_angle and not p.full_period_seen)


@pytest.mark.parametrize("kind", ["linear", "ntk", "ntk-by-parts", "yarn", "llama3"])
def test_factor_one_changes_nothing(kind):
    plain = analyse_rope("rope", 64, 512, 2048).to_json()
    scaled = analyse_rope(f"rope:scaling={kind},factor=1,original_max_position=512", 64, 512, 2048).to_json()
    skip = {"pe", "scaling", "explanation", "liu_note", "paper_min_base", "paper_note"}
    for key, value in plain.items():
        if key == "pairs":
            for a, b in zip(value, scaled["pairs"]):
                assert a == pytest.approx(b, rel=1e-12)
        elif key not in skip:
            number = isinstance(value, float)
            assert scaled[key] == (pytest.approx(value, rel=1e-12) if number else value), key


def test_dynamic_in_distribution_length_is_where_an_angle_first_leaves_training():
    from extrap.positional import get

    spec = "rope:scaling=dynamic,factor=2,original_max_position=4096"
    r = analyse_rope(spec, 128, 4096, 16384)
    n = r.in_distribution_length
    # pair 46 (the first that never turned a full period) at L = 4097: its base grows by (2·4097/4096 - 1)^(128/126),
    # θ_46 by the power -92/126, so 4096·θ_46(4097) ≈ θ_46·(4096 - 2·92/126) < 4095·θ_46: the dynamic base
    # keeps it inside for a while, and the analysis must look past the original length
    assert n is not None and n > 4096 and r.decided_by == "rotation-angles"
    scheme, seen = get(spec), [p.train_angle for p in r.pairs]

    def inside(length):
        th = scheme.frequencies(128, length, dtype=torch.float64)[0].tolist()
        return all((length - 1) * t <= a or a >= TWO_PI for t, a in zip(th, seen))

    assert inside(n) and not inside(n + 1)


# ---------------------------------------------------------------------------
# from a config alone, and from a run
# ---------------------------------------------------------------------------
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
         "num_hidden_layers": 32, "intermediate_size": 11008, "vocab_size": 32000, "rms_norm_eps": 1e-5}  # fmt: skip
CONFIGS = {
    "llama2": {**LLAMA, "num_key_value_heads": 32, "max_position_embeddings": 4096, "rope_theta": 10000.0,
               "rope_scaling": None},
    "llama31": {**LLAMA, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                "max_position_embeddings": 131072, "rope_theta": 500000.0,
                "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192, "rope_type": "llama3"}},
    "qwen25": {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
               "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
               "intermediate_size": 18944, "vocab_size": 152064, "max_position_embeddings": 32768,
               "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "sliding_window": 131072, "use_sliding_window": False},
}  # fmt: skip
CONFIGS["yarn"] = {**CONFIGS["qwen25"], "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768,
                                                          "type": "yarn"}}  # fmt: skip


def _folder(tmp_path, name: str, cfg: dict):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_llama2_and_qwen_configs(tmp_path, capsys):
    pytest.importorskip("transformers")
    r = _json(capsys, "--checkpoint", f"hf:{_folder(tmp_path, 'l2', CONFIGS['llama2'])}")["rope"][0]
    assert (r["head_dim"], r["train_length"], r["length"], r["critical_dim"]) == (128, 4096, 4096, 92)  # 4096/32
    assert r["aggregation_first_negative"] == 1707 and r["pairs_beyond_training"] == 0
    q = _json(capsys, "--checkpoint", f"hf:{_folder(tmp_path, 'q', CONFIGS['qwen25'])}")["rope"][0]
    # d = 3584/28 = 128; 64·ln(32768/2π)/ln(10^6) = 64·8.559331/13.815511 = 39.65 -> 40 -> d_extra = 80
    assert (q["head_dim"], q["train_length"], q["critical_dim"], q["base"]) == (128, 32768, 80, 1e6)
    assert q["extrapolation_bound"] == pytest.approx(35332.95, rel=1e-6)  # 2π·10^(6·80/128) = 2π·10^3.75
    assert q["in_distribution_length"] == 32768 and q["limiting_pair"] == 40


def test_llama31_config(tmp_path, capsys):
    pytest.importorskip("transformers")
    r = _json(capsys, "--checkpoint", f"hf:{_folder(tmp_path, 'l31', CONFIGS['llama31'])}")["rope"][0]
    assert (r["scaling"], r["train_length"], r["length"], r["base"]) == ("llama3", 8192, 131072, 5e5)
    # 64·ln(8192/2π)/ln(5·10^5) = 64·7.173036/13.122363 = 34.98 -> 35 -> d_extra = 70
    assert r["critical_dim"] == 70
    # pair 35's wavelength 2π·(5·10^5)^(70/128) = 8218.7 > 8192/low_freq_factor: Llama 3.1 divides θ by 8
    assert r["extrapolation_bound"] == pytest.approx(8 * 8218.718, rel=1e-6)
    # pairs 35..63 never turned a full period in 8191 tokens and all run 8x slower: 8·8191 + 1 = 65529
    assert r["in_distribution_length"] == 65529 and r["limiting_pair"] == 35


def test_yarn_config(tmp_path, capsys):
    pytest.importorskip("transformers")
    r = _json(capsys, "--checkpoint", f"hf:{_folder(tmp_path, 'y', CONFIGS['yarn'])}", "--length", "65536")["rope"][0]
    assert (r["scaling"], r["train_length"], r["length"]) == ("yarn", 32768, 65536)
    # HF's ramp: dims below ⌊128·ln(32768/(32·2π))/(2 ln 10^6)⌋ = ⌊23.6⌋ = 23 kept, from ⌈39.65⌉ = 40 on θ/4
    assert r["critical_dim"] == 80 and r["extrapolation_bound"] == pytest.approx(4 * 35332.95, rel=1e-6)
    assert r["in_distribution_length"] == 4 * 32767 + 1
    assert r["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1)  # YaRN Eq. 22


def test_extrap_rope_run(tmp_path, capsys, tiny_text):
    assert main(["train", "--pe", "rope", "--preset", "smoke", "--steps", "2", "--train-length", "32",
                 "--corpus", tiny_text, "--out", str(tmp_path / "run"), "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    out = _json(capsys, "--checkpoint", str(tmp_path / "run"))
    assert out["results"][0]["verdict"] == "not-applicable"  # the Toeplitz row stays
    r = out["rope"][0]
    # smoke: d_model 32, 2 heads -> d = 16; 8·ln(32/2π)/ln(10^4) = 8·1.62792/9.21034 = 1.41 -> 2 -> d_extra = 4
    assert (r["pe"], r["head_dim"], r["train_length"], r["critical_dim"]) == ("rope", 16, 32, 4)


# ---------------------------------------------------------------------------
# bad input: one line, exit 2, nothing written
# ---------------------------------------------------------------------------
BAD_CONFIGS = {
    "no-rope": {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 64},
    "unknown-type": {**CONFIGS["llama2"], "rope_scaling": {"rope_type": "wiggle", "factor": 2.0}},
}


@pytest.mark.parametrize(
    "argv",
    [
        ["rope", "--head-dim", "7"],
        ["rope", "--head-dim", "0"],
        ["rope:base=1", "--head-dim", "64"],
        ["rope:scaling=linear,factor=0", "--head-dim", "64"],
        ["rope", "--head-dim", "64", "--length", "0"],
        ["rope", "--head-dim", "64", "--pretrain-base", "1"],
        ["--checkpoint", "hf:{no-rope}"],
        ["--checkpoint", "hf:{unknown-type}"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv):
    folders = {k: _folder(tmp_path, k, v) for k, v in BAD_CONFIGS.items()}
    argv = [a.format(**folders) for a in argv]
    csv = tmp_path / "out.csv"
    assert main(["theory", *argv, "--csv", str(csv)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("extrap: error:")
    assert not csv.exists()
