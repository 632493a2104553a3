"""`extrap study --experiment extension`: the smoke study end to end, an hf: Llama measured the same way, its
records, its claims and bad input."""

import json
import math
from dataclasses import replace

import pytest
import torch

from extrap.cli import main
from extrap.experiments.extension import claims as ext
from extrap.experiments.extension import readme as ext_readme
from extrap.experiments.extension import tables as ext_tables
from extrap.experiments.extension.measure import MethodJob, measure_method, passkey_falloff, predicted_length
from extrap.experiments.extension.presets import PRESETS as EXTENSION_PRESETS
from extrap.experiments.extension.records import ExtensionOutput
from extrap.experiments.extension.results import RESULTS, ExtensionBlock, ExtensionMethod
from extrap.experiments.rope_base import readme as rope_readme
from extrap.experiments.rope_base.results import PasskeyLength, PplLength
from extrap.report import compute_claims, readme
from extrap.results import StudyResults, load_results

METHODS = "pi,rerope,window,sinks"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("ext") / "s"
    argv = ["study", "--experiment", "extension", "--preset", "smoke", "--methods", METHODS, "--jobs", "1"]
    assert main(argv + ["--out", str(out), "--device", "cpu", "--steps", "6"]) == 0  # need not learn here
    return out


def test_smoke_study_end_to_end(smoke):
    res = load_results(smoke)
    s = EXTENSION_PRESETS["smoke"].model
    L_tr, lengths = s.train_length, [s.train_length * k for k in s.multiples]
    b = RESULTS.of(res)
    assert res.experiment == "extension" and b.pe == "rope" and list(b.lengths) == lengths
    assert list(b.methods) == ["none", "pi", "rerope", "window", "sinks"]  # none first: the reference
    for m in b.methods.values():
        assert [r.length for r in m.ppl] == lengths and all(r.ppl > 1 and r.stderr > 0 for r in m.ppl)
        assert m.ppl[0].ratio is None and all(r.ratio is not None for r in m.ppl[1:])
        for r in m.ppl[1:]:  # the ratio is against the method's own perplexity at L_tr
            assert r.ratio == pytest.approx(abs(r.ppl - m.ppl[0].ppl) / m.ppl[0].ppl, rel=1e-9)
        assert [p.length for p in m.passkey] == lengths and all(p.n == s.passkey_n for p in m.passkey)
    none, pi, sinks = b.methods["none"], b.methods["pi"], b.methods["sinks"]
    assert pi.ppl[0].ppl == none.ppl[0].ppl  # factor 1 at L_tr: the model as trained
    assert pi.ppl[1].ppl != none.ppl[1].ppl  # factor 2 at 2 L_tr: another model
    assert sinks.ppl[0].ppl == pytest.approx(none.ppl[0].ppl, rel=1e-5)  # n + W = L_tr keys: plain at L_tr
    assert b.methods["rerope"].spec == f"rerope:window={L_tr // 8}" and b.methods["rerope"].predicted_length is None
    assert none.predicted_length == L_tr and none.in_distribution == (True, False, False)
    assert res.eval["rope"]["last-token"].result_at(L_tr).loss == pytest.approx(math.log(none.ppl[0].ppl))
    assert res.learning.learned("rope") is False  # 6 steps: the claims are not tested
    assert all(c.ok is None and c.untested for c in res.claims)
    html = (smoke / "report.html").read_text()
    assert 'id="extension"' in html and "Predicted against measured" in html and "Goal:" in html
    assert (smoke / "figures" / "extension.png").is_file()


def test_a_resumed_study_neither_trains_nor_measures_again(smoke, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("recomputed")

    monkeypatch.setattr("extrap.train.train", refuse)
    monkeypatch.setattr("extrap.experiments.extension.plan.measure_method", refuse)
    before = RESULTS.of(load_results(smoke))
    argv = ["study", "--experiment", "extension", "--preset", "smoke", "--methods", METHODS, "--jobs", "1"]
    assert main(argv + ["--out", str(smoke), "--resume", "--device", "cpu", "--steps", "6"]) == 0
    assert RESULTS.of(load_results(smoke)) == before


def test_the_readme_renders_the_extension_block(smoke, tmp_path):
    md = tmp_path / "README.md"
    md.write_text(f"x\n{ext_readme.BEGIN}\nold\n{ext_readme.END}\ny\n")
    assert readme.main([str(smoke / "results.json"), str(md)]) == 0
    text = md.read_text()
    assert "`extrap study --experiment extension --preset smoke`" in text and "old" not in text
    assert "| sinks |" in text and "Goal:" in text
    assert readme.main(["--check", str(smoke / "results.json"), str(md)]) == 0


def test_the_readme_has_one_extension_block_after_the_rope_base_block():
    from pathlib import Path

    text = (Path(__file__).parents[1] / "README.md").read_text()
    assert text.count(ext_readme.BEGIN) == 1 and text.count(ext_readme.END) == 1
    assert text.index(rope_readme.END) < text.index("### Extension experiment") < text.index(ext_readme.BEGIN)


# ---------------------------------------------------------------------------
# an hf: Llama, measured by the same code
# ---------------------------------------------------------------------------
def test_a_tiny_hf_llama_is_measured_with_two_methods(tmp_path, hf_tokenizer):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    sizes = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    cfg = transformers.LlamaConfig(vocab_size=300, num_key_value_heads=2, max_position_embeddings=32, **sizes)
    transformers.LlamaForCausalLM(cfg).save_pretrained(tmp_path)
    hf_tokenizer.save_pretrained(tmp_path)
    job = MethodJob("none", f"hf:{tmp_path}", 32, (32, 64, 128), targets=6, passkey_n=0, delta=0.02,
                    fall_fraction=0.5, device="cpu")  # fmt: skip
    none, report = measure_method(job)
    rerope, _ = measure_method(replace(job, name="rerope"))
    pi, _ = measure_method(replace(job, name="pi"))
    assert [r.length for r in none.ppl] == [32, 64, 128] and all(r.ppl > 1 for r in none.ppl)
    assert report.result_at(32).nll.numel() == 6  # the per-token losses the paired ratios used
    assert rerope.spec == "rerope:window=4" and rerope.in_distribution == (True, True, True)
    assert rerope.ppl[1].ppl != none.ppl[1].ppl and pi.ppl[0].ppl == none.ppl[0].ppl
    assert pi.ppl[2].ppl != none.ppl[2].ppl  # factor 4 at 128
    assert none.in_distribution == (True, False, False) and none.predicted_length == 32


# ---------------------------------------------------------------------------
# records and the numbers beside them
# ---------------------------------------------------------------------------
LENGTHS = (128, 256, 512)


def method(name, break_at=None, inside=(True, True, True), basis="distance", acc=(1.0, 1.0, 1.0), kind="extend"):
    ppl = tuple(PplLength(L, 5.0, 0.01, None if L == 128 else 0.1, 0.01, L >= (break_at or 10**9)) for L in LENGTHS)
    passkey = tuple(PasskeyLength(L, 10, round(a * 10)) for L, a in zip(LENGTHS, acc))
    return ExtensionMethod(name, kind, name, ppl, passkey, inside, basis, None, break_at, None)


def study(methods, loss=1.5):
    gate = {"unigram_entropy": 3.2, "max_fraction": 0.8, "protocol": "last-token", "loss": {"rope": loss}}
    res = StudyResults.from_json({"experiment": "extension", "pes": ["rope"], "learning": gate})
    res.extra.update(
        RESULTS.entry(ExtensionBlock("rope", 128, LENGTHS, 0.02, 0.5, 10, 32, {m.name: m for m in methods}))
    )
    return res


def judged(methods, loss=1.5):
    return {c.claim: c for c in compute_claims(study(methods, loss))}


def test_records_round_trip():
    res = study([method("rerope"), method("window", break_at=256, kind="window")])
    back = StudyResults.from_json(json.loads(json.dumps(res.to_json())))
    assert RESULTS.of(back) == RESULTS.of(res) and RESULTS.of(back).methods["window"].measured_break == 256
    assert "extension" not in StudyResults(experiment="rope-base").to_json()  # left out when empty
    out = ExtensionOutput("rope", "/x", None, None, dict(RESULTS.of(res).methods), {"dca": "out of memory"})
    assert ExtensionOutput.from_json(json.loads(json.dumps(out.to_json()))) == out


def test_flat_claim_reproduced_refuted_and_not_tested():
    ok = judged([method("rerope"), method("none", break_at=256, inside=(True, False, False), kind="none")])
    assert ok[ext.FLAT].ok is True and "rerope: break none" in ok[ext.FLAT].evidence  # none is not within L_tr
    bad = judged([method("rerope"), method("dca", break_at=512)])
    assert bad[ext.FLAT].ok is False and "dca: break 512 ✘" in bad[ext.FLAT].evidence
    angles = judged([method("pi", basis="angles", kind="scaling")])  # a scaling is judged by angles, not here
    assert angles[ext.FLAT].ok is None and not angles[ext.FLAT].untested
    untrained = judged([method("rerope")], loss=3.1)
    assert untrained[ext.FLAT].ok is None and untrained[ext.FLAT].untested
    assert "did not learn" in untrained[ext.FLAT].evidence


def test_sinks_claim_reproduced_refuted_and_not_tested():
    ok = judged([method("window", break_at=256, kind="window"), method("sinks")])
    assert ok[ext.SINKS].ok is True and "window (last 128 keys): break 256; sinks (sinks): break none" in (
        ok[ext.SINKS].evidence
    )
    later = judged([method("window", break_at=256, kind="window"), method("sinks", break_at=512)])
    assert later[ext.SINKS].ok is True  # sinks broke later than the window
    both = judged([method("window", break_at=256, kind="window"), method("sinks", break_at=256)])
    assert both[ext.SINKS].ok is False
    flat = judged([method("window", kind="window"), method("sinks")])
    assert flat[ext.SINKS].ok is False  # the window did not break
    assert judged([method("sinks")])[ext.SINKS].ok is None
    untrained = judged([method("window", break_at=256, kind="window"), method("sinks")], loss=3.1)
    assert untrained[ext.SINKS].ok is None and untrained[ext.SINKS].untested


def test_goal_line_met_and_not_met():
    held = study([method("rerope", acc=(1.0, 0.9, 0.9)), method("none", inside=(True, False, False), kind="none")])
    assert ext.goal_line(held).endswith("rerope 0.90 vs 0.9 × 1.00 = 0.90: met")
    fell = study([method("rerope", acc=(1.0, 0.9, 0.8)), method("dca", acc=(0.5, 0.5, 0.4))])
    assert ext.goal_line(fell).endswith("rerope 0.80 vs 0.9 × 1.00 = 0.90: not met")
    out = study([method("none", inside=(True, False, False), acc=(1.0, 1.0, 1.0), kind="none")])
    assert "no method is in distribution there" in ext.goal_line(out)


def test_passkey_falloff_and_predicted_length():
    pk = tuple(PasskeyLength(L, 10, c) for L, c in zip(LENGTHS, (8, 5, 3)))
    assert passkey_falloff(pk, 128, 0.5) == 512  # 0.3 < 0.5 × 0.8; 0.5 is not
    assert passkey_falloff(tuple(PasskeyLength(L, 10, 0) for L in LENGTHS), 128, 0.5) is None  # 0 at L_tr
    job = MethodJob("pi", "x", 128, LENGTHS, 8, 0, 0.02, 0.5)
    assert predicted_length(job, [True, True, False]) == 256 and predicted_length(job, [True, True, True]) is None
    assert predicted_length(job, [True, False, False]) == 128
    se = MethodJob("self-extend", "x", 128, LENGTHS, 8, 0, 0.02, 0.5)
    assert predicted_length(se, [True, True, True]) == (128 - 32) * 8 + 32  # (L - W)·G + W, Jin et al. 2024
    lm = MethodJob("lm-infinite", "x", 128, LENGTHS, 8, 0, 0.02, 0.5)  # global keys at d = L_tr: one past
    assert predicted_length(lm, [True, False, False]) == 128


def test_a_method_that_does_not_retrieve_at_l_tr_is_not_said_to_keep_retrieving():
    rows = ext_tables.prediction_rows(
        study([method("rerope", acc=(0.0, 0.0, 0.0)), method("window", acc=(1.0, 1.0, 0.8))])
    )[1]
    assert [r[-1] for r in rows] == ["no retrieval at L_tr", "none"]


def test_lengths_evaluated_apart_score_the_targets_of_the_longest():
    """evaluate(longest=...): a length alone scores the same targets, to the bit, as with the longest beside it."""
    from extrap.evaluate.protocols import evaluate
    from extrap.model import GPT, ModelConfig

    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=50, n_layer=1, d_model=32, n_head=2, pe="rope"))
    stream = torch.randint(0, 50, (300,), generator=torch.Generator().manual_seed(0))
    together = evaluate(model, stream, [16, 64], "last-token", targets=5)
    (alone,) = evaluate(model, stream, [16], "last-token", targets=5, longest=64)
    assert torch.equal(alone.nll, together[0].nll)
    (short,) = evaluate(model, stream, [16], "last-token", targets=5)  # other targets without it
    assert not torch.equal(short.nll, together[0].nll)


def test_scalings_are_judged_by_angles_at_each_lengths_factor():
    """PI with s = L / L_tr puts position L - 1 at L_tr - 1/s: in distribution up to s·(L_tr - 1) + 1 = 255."""
    from types import SimpleNamespace

    from extrap.experiments.extension.methods import in_distribution, study_method

    pi = study_method("pi")
    assert pi.factor(128, 128) is None and pi.factor(256, 128) == 2.0 and study_method("dynamic").factor(512, 128) == 1
    run = SimpleNamespace(pe="rope:scaling=linear,factor=2,original_max_position=128")
    run.model = SimpleNamespace(shape=SimpleNamespace(head_dim=16))
    assert in_distribution(pi, run, 255, 128) == (True, "angles")
    assert in_distribution(pi, run, 256, 128) == (False, "angles")
    assert in_distribution(study_method("window"), run, 4096, 128) == (True, "distance")


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        ["--methods", "none,bogus"],
        ["--methods", ","],
        ["--pe", "rope"],
        ["--tasks", "passkey"],
        ["--preset", "giant"],
        ["--experiment", "rope-base", "--methods", "pi"],
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, extra):
    out = tmp_path / "s"
    argv = ["study", "--experiment", "extension", "--preset", "smoke", "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()
