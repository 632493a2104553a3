"""`extrap study --experiment alignment` (004 §5.2): the smoke study end to end, resume, and the claims logic."""

import json
import math
from types import SimpleNamespace

import pytest

from extrap import report
from extrap.cli import main
from extrap.experiments.alignment import measure as sm
from extrap.experiments.alignment import plan as sa
from extrap.experiments.alignment import tables as ra
from extrap.experiments.alignment.records import LengthRecord
from extrap.experiments.alignment.results import RESULTS, DepthSummary, best_setting, blocks
from extrap.io import json_text
from extrap.report.gate import MIN_TRAIN_ACC
from extrap.results import StudyResults, load_results
from extrap.results.tables import study_table


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("align")
    assert main(["study", "--experiment", "alignment", "--preset", "smoke", "--out", str(out)]) == 0
    return out


def _taus(tau_by_mode):
    for per_len in tau_by_mode.values():
        for t in per_len.values():
            yield from (t if isinstance(t, list) else [t])


def test_smoke_alignment_results_schema(smoke):
    out = smoke
    res = json.loads((out / "results.json").read_text())
    assert res["experiment"] == "alignment" and res["pes"] == ["t5", "alibi"] and not res["failures"]
    assert res["tasks"] == ["passkey"] and list(res["alignment"]) == ["passkey"]  # smoke: passkey by default
    al = res["alignment"]["passkey"]
    L_tr = al["train_length"]
    assert res["train_length"] == {"passkey": L_tr} and al["rank"] is True
    assert al["task"] == "passkey" and al["lengths"] == [L_tr, 2 * L_tr, 4 * L_tr] == res["lengths"]
    assert set(al["models"]) == {"t5", "alibi"}
    keys = [str(L) for L in al["lengths"]]
    for pe, mdl in al["models"].items():
        assert set(mdl["accuracy"]) == {"none", "pmax", "entropy", "pmax-layer"}
        for st, per_len in mdl["accuracy"].items():
            assert list(per_len) == keys and all(0 <= a <= 1 for a in per_len.values()), (pe, st)
        assert set(mdl["rank_accuracy"]) == set(mdl["accuracy"])  # the smoke preset also ranks
        assert set(mdl["tau"]) == {"pmax", "entropy", "pmax-layer"}
        taus = list(_taus(mdl["tau"]))
        assert taus and all(0 < t <= 1 for t in taus), taus
        assert all(len(mdl["tau"]["pmax-layer"][k]) == 2 for k in keys)  # one τ per layer (smoke: 2 layers)
        assert mdl["tau"]["pmax"][keys[0]] == 1.0 and mdl["tau_source"]["pmax"][keys[0]] == "L_tr"
        assert all(mdl["tau_source"][m][k] == "algorithm1" for m in mdl["tau"] for k in keys[1:])
        for k in keys[1:]:  # the closed forms beside Algorithm 1
            cf = mdl["closed_forms"][k]
            assert {"prop1", "prop1_status", "prop2", "log_length", "sigma_tr", "sigma_ex"} <= set(cf)
            assert (cf["prop1"] is None) == (cf["prop1_status"] != "root")
            assert cf["log_length"] == pytest.approx(math.log(L_tr) / math.log(int(k)))
        d = mdl["depth"]
        assert d["best_setting"] in sa.MODES and len(d["buckets"]) == res["settings"]["buckets"]
        assert set(d["by_length"]) == set(mdl["accuracy"]) and set(d["pooled_beyond"]) == set(mdl["accuracy"])
        for k in keys:
            rec = json.loads((out / res["runs"][f"passkey/{pe}"]["run_dir"] / "alignment" / f"L{k}.json").read_text())
            assert set(rec["seconds_method"]) == {"greedy", "rank"}  # what each scoring method cost
    assert json.dumps(load_results(out).to_json(), sort_keys=True) == json.dumps(res, sort_keys=True)


def test_smoke_alignment_claims_and_report(smoke):
    out = smoke
    res = json.loads((out / "results.json").read_text())
    claims = res["claims"]
    assert [c["claim"] for c in claims] == [
        "passkey: τ decreases as length grows",
        "passkey: pmax alignment beats entropy alignment",
        "passkey: alignment improves accuracy beyond L_tr",
    ]
    tau, *accuracy = claims
    # Algorithm 1 ran at 2 and 4 x L_tr for both models: the τ claim is decided, naming each model
    assert tau["ok"] is not None and "t5 pmax:" in tau["evidence"] and "alibi pmax:" in tau["evidence"]
    L_tr = res["alignment"]["passkey"]["train_length"]
    learned = [
        pe
        for pe, mdl in res["alignment"]["passkey"]["models"].items()
        if mdl["accuracy"]["none"][str(L_tr)] >= MIN_TRAIN_ACC
    ]
    for c in accuracy:  # judged on the models that retrieve at L_tr; undecided only when none does
        assert (c["ok"] is None) == (not learned) or "ceiling" in c["evidence"], c
        assert all(pe in c["evidence"] for pe in ("t5", "alibi")), c
    html = (out / "report.html").read_text(encoding="utf-8")
    for text in (
        "Claims checklist",
        "Attention alignment on retrieval",
        "Temperatures, passkey (004 Table 5",
        "Exact-match accuracy, passkey (004 Table 4)",
        "Accuracy by answer depth, passkey (004 Table 9)",
        "Prop. 1",
        "ranking the candidate answers",
        "log-length",
        'src="figures/alignment_tau.png"',
        'src="figures/alignment_accuracy.png"',
    ):
        assert text in html, text
    assert "Theory (000" not in html and "Perplexity vs length" not in html
    assert (out / "figures" / "alignment_tau.svg").is_file()
    md = ra.markdown_tables(load_results(out))
    assert md.count("| t5 |") == 6 + 4 + 4 and "mean L > L_tr" in md  # τ rows; greedy and rank accuracy rows


def _refuse(*args, **kwargs):
    raise AssertionError("a finished stage was computed again")


def test_smoke_alignment_resumes_without_recomputing(smoke, monkeypatch):
    """A resumed study trains, probes and scores nothing again; no run file is touched."""
    out = smoke

    def files():
        return {p: p.stat().st_mtime_ns for p in (out / "runs").rglob("*") if p.is_file()}

    before = files()
    assert any(p.name.startswith("L") for p in before) and any(p.name == "final.json" for p in before)
    for name in (
        "extrap.train.train",
        "extrap.tasks.score_task",
        "extrap.align.algorithm1",
        "extrap.align.closed_forms",
        "extrap.load",
    ):
        monkeypatch.setattr(name, _refuse)
    # one job at a time runs in this process, where the entry points above refuse to run
    argv = ["study", "--experiment", "alignment", "--preset", "smoke", "--out", str(out)]
    assert main(argv + ["--resume", "--jobs", "1"]) == 0
    assert files() == before
    assert not load_results(out).failures  # a refused call would have failed its run
    assert main(["study", "--experiment", "alignment", "--preset", "smoke", "--out", str(out)]) == 2  # no --resume


def test_alignment_refuses_bad_input(tmp_path):
    assert main(["study", "--experiment", "alignment", "--preset", "giant", "--out", str(tmp_path / "a")]) == 2
    assert (
        main(
            [
                "study",
                "--experiment",
                "alignment",
                "--preset",
                "smoke",
                "--pe",
                "t5,bogus",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 2
    )
    assert not (tmp_path / "b").exists()
    assert main(["study", "--experiment", "bogus", "--preset", "smoke", "--out", str(tmp_path / "c")]) == 2
    for bad in (["--tasks", "passkey,haystack"], ["--tasks", " , "], ["--experiment", "extrapolation"]):
        argv = [
            "study",
            "--preset",
            "smoke",
            "--out",
            str(tmp_path / "d"),
            "--experiment",
            "alignment",
            "--tasks",
            "line",
            *bad,
        ]
        assert main(argv) == 2, bad
    assert not (tmp_path / "d").exists()


# ---------------------------------------------------------------------------
# pieces
# ---------------------------------------------------------------------------
THREE_LAYERS = SimpleNamespace(shape=SimpleNamespace(n_layer=3))


def test_beyond_the_probe_cap_uses_the_log_length_rule():
    found = sm.find_taus(THREE_LAYERS, probe=None, train_length=128, length=8192, cap=4096)
    t = math.log(128) / math.log(8192)
    assert found.tau["pmax"] == found.tau["entropy"] == pytest.approx(t)
    assert found.tau["pmax-layer"] == (pytest.approx(t),) * 3
    assert all(s.startswith("log-length (L > probe cap 4096)") for s in found.source.values())
    assert found.to_json()["closed_forms"] == {"log_length": t, "note": "log-length (L > probe cap 4096)"}
    at_tr = sm.find_taus(THREE_LAYERS, probe=None, train_length=128, length=128, cap=4096)
    assert at_tr.tau["pmax"] == 1.0 and at_tr.source["entropy"] == "L_tr"
    assert at_tr.to_json() == {
        "tau": {"pmax": 1.0, "entropy": 1.0, "pmax-layer": [1.0] * 3},
        "source": {m: "L_tr" for m in sa.MODES},
        "algorithm1": {},
        "closed_forms": None,
    }


def test_length_record_round_trips_through_its_json(smoke):
    """An L<length>.json the study wrote reads back into the same record and writes back byte for byte."""
    files = sorted((smoke / "runs").rglob("alignment/L*.json"))
    assert files
    for path in files:
        d = json.loads(path.read_text())
        rec = LengthRecord.from_json(d)
        assert json.dumps(rec.to_json()) == json.dumps(d)  # the same keys in the same order
        assert LengthRecord.from_json(rec.to_json()) == rec


def test_merge_stats_weights_every_row_once():
    from extrap.align import Stats
    from extrap.align.formulas import SoftmaxStat

    a = Stats(pmax=0.5, entropy=1.0, layers=(SoftmaxStat(0.5, 1.0),), rows=10)
    b = Stats(pmax=0.2, entropy=2.0, layers=(SoftmaxStat(0.2, 2.0),), rows=30)
    m = sm.merge_stats([a, b])
    assert m.rows == 40 and m.pmax == pytest.approx(0.275) and m.entropy == pytest.approx(1.75)


def test_prompt_prober_matches_attention_stats_on_equal_lengths():
    import torch

    from extrap.align.probe import attention_stats
    from extrap.model import GPT, ModelConfig

    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=2, d_model=16, n_head=2, pe="t5")).eval()
    x = torch.randint(0, 256, (2, 24))
    probe = sm.PromptProber(model, {24: [x[0], x[1]]})
    got, want = probe(24, [0.8, 0.8]), attention_stats(model, x, [0.8, 0.8])
    assert got.pmax == pytest.approx(want.pmax) and got.entropy == pytest.approx(want.entropy)
    assert probe(24, [0.8, 0.8]) is got  # cached


# ---------------------------------------------------------------------------
# claims on synthetic data
# ---------------------------------------------------------------------------
L_TR = 64
LENGTHS = [64, 128, 256, 512]


def synthetic(taus=None, acc=None, sources=None):
    """results.json with one model; ``taus[mode]`` and ``acc[setting]`` are lists over LENGTHS."""
    taus = taus or {
        "pmax": [1.0, 0.9, 0.8, 0.75],
        "entropy": [1.0, 0.7, 0.6, 0.55],
        "pmax-layer": [[1.0, 1.0], [0.9, 0.85], [0.8, 0.8], [0.75, 0.7]],
    }
    acc = acc or {
        "none": [0.9, 0.5, 0.3, 0.1],
        "pmax": [0.9, 0.7, 0.5, 0.3],
        "entropy": [0.9, 0.6, 0.3, 0.2],
        "pmax-layer": [0.9, 0.6, 0.4, 0.2],
    }
    key = [str(L) for L in LENGTHS]
    src = {
        m: {k: ("L_tr" if i == 0 else (sources or {}).get(m, "algorithm1")) for i, k in enumerate(key)}
        for m in sa.MODES
    }
    mdl = {
        "accuracy": {st: dict(zip(key, v)) for st, v in acc.items()},
        "tau": {m: dict(zip(key, v)) for m, v in taus.items()},
        "tau_source": src,
        "at_grid_edge": {m: {k: False for k in key} for m in sa.MODES},
        "closed_forms": {
            k: {"prop1": None, "prop1_status": "no real root", "prop2": 0.6, "log_length": 0.7} for k in key[1:]
        },
        "depth": DepthSummary(best_setting({st: dict(zip(key, v)) for st, v in acc.items()}, L_TR)).to_json(),
    }
    return {
        "experiment": "alignment",
        "pes": ["t5"],
        "tasks": ["passkey"],
        "train_length": {"passkey": L_TR},
        "lengths": LENGTHS,
        "alignment": {"passkey": {"task": "passkey", "train_length": L_TR, "lengths": LENGTHS, "models": {"t5": mdl}}},
    }


def claims(results):
    return {c.claim: c for c in report.compute_claims(StudyResults.from_json(results))}


TAU, PMAX_H, HELPS = (
    "passkey: τ decreases as length grows",
    "passkey: pmax alignment beats entropy alignment",
    "passkey: alignment improves accuracy beyond L_tr",
)


def test_claims_reproduced():
    c = claims(synthetic())
    assert [c[k].ok for k in (TAU, PMAX_H, HELPS)] == [True, True, True]
    assert "0.900 → 0.800 → 0.750" in c[TAU].evidence
    assert "t5: w/ P_max 0.500 vs w/ H 0.367 ✔" in c[PMAX_H].evidence  # means over 128, 256, 512
    assert "t5: w/ P_max 0.500 vs no alignment (τ = 1) 0.300 ✔" in c[HELPS].evidence


def test_claims_refuted():
    r = synthetic(
        taus={
            "pmax": [1.0, 0.8, 0.85, 0.7],
            "entropy": [1.0, 0.7, 0.6, 0.55],
            "pmax-layer": [[1.0, 1.0], [0.9, 0.9], [0.8, 0.8], [0.7, 0.7]],
        },
        acc={
            "none": [0.9, 0.8, 0.7, 0.6],
            "pmax": [0.9, 0.5, 0.4, 0.3],
            "entropy": [0.9, 0.6, 0.5, 0.4],
            "pmax-layer": [0.9, 0.7, 0.6, 0.5],
        },
    )
    c = claims(r)
    assert [c[k].ok for k in (TAU, PMAX_H, HELPS)] == [False, False, False]
    assert "t5 pmax: 0.800 → 0.850 → 0.700 ✘" in c[TAU].evidence
    tie = synthetic(acc={st: [0.9, 0.5, 0.5, 0.5] for st in sa.SETTINGS})
    assert claims(tie)[PMAX_H].ok is False and claims(tie)[HELPS].ok is False  # a tie does not "beat"
    flat = synthetic(taus={m: [1.0] * 4 if m != "pmax-layer" else [[1.0, 1.0]] * 4 for m in sa.MODES})
    assert claims(flat)[TAU].ok is False and "never drops below 1" in claims(flat)[TAU].evidence


def test_claims_not_enough_data():
    beyond_cap = synthetic(sources={m: "log-length (L > probe cap 4096)" for m in sa.MODES})
    assert claims(beyond_cap)[TAU].ok is None  # the log-length τ is not Algorithm 1's
    untrained = synthetic(acc={st: [0.0, 0.0, 0.1, 0.0] for st in sa.SETTINGS})
    c = claims(untrained)
    assert c[PMAX_H].ok is None and c[HELPS].ok is None and "did not learn the task" in c[PMAX_H].evidence
    perfect = claims(synthetic(acc={st: [1.0] * 4 for st in sa.SETTINGS}))
    assert perfect[PMAX_H].ok is None and perfect[HELPS].ok is None and "ceiling" in perfect[HELPS].evidence
    hurts = synthetic(
        acc={
            "none": [1.0] * 4,
            "pmax": [1.0, 0.9, 0.8, 0.7],
            "entropy": [1.0, 0.5, 0.4, 0.3],
            "pmax-layer": [1.0, 0.8, 0.8, 0.8],
        }
    )
    assert claims(hurts)[HELPS].ok is False and claims(hurts)[PMAX_H].ok is True
    empty = claims({"experiment": "alignment"})
    assert [empty[k].ok for k in (TAU, PMAX_H, HELPS)] == [None, None, None]


def test_accuracy_claims_must_hold_for_every_model():
    """One model's large gain must not hide another's loss (the pooled mean would say ✔ here)."""
    r = synthetic()
    gain = r["alignment"]["passkey"]["models"]["t5"]
    loss = json.loads(json.dumps(gain))
    loss["accuracy"] = {
        st: dict(zip(["64", "128", "256", "512"], v))
        for st, v in {
            "none": [1.0, 0.7, 0.6, 0.6],
            "pmax": [1.0, 0.1, 0.1, 0.1],
            "entropy": [1.0, 0.0, 0.0, 0.0],
            "pmax-layer": [1.0, 0.1, 0.2, 0.1],
        }.items()
    }
    gain["accuracy"]["pmax"] = {"64": 0.9, "128": 1.0, "256": 1.0, "512": 1.0}
    r["alignment"]["passkey"]["models"]["alibi"] = loss
    c = claims(r)
    assert (
        c[HELPS].ok is False and "alibi: w/ P_max per layer 0.133 vs no alignment (τ = 1) 0.633 ✘" in c[HELPS].evidence
    )
    assert "mean over models: 0.567 vs 0.467" in c[HELPS].evidence
    assert c[PMAX_H].ok is True  # P_max beats H for both models


def test_report_renders_partial_alignment_results(tmp_path):
    r = synthetic()
    r["pes"] = ["t5", "alibi"]
    r["tasks"] = ["passkey", "line"]
    for per_len in r["alignment"]["passkey"]["models"]["t5"]["accuracy"].values():
        del per_len["512"]
    text = report.write_report(StudyResults.from_json(r), tmp_path).read_text(encoding="utf-8")
    assert "passkey: no alignment results for alibi" in text and "passkey/t5: not evaluated at 512" in text
    assert "line: no alignment results" in text
    assert "<td>no root</td>" in text  # Prop. 1 without a root: said, never a made-up τ
    assert (tmp_path / "figures" / "alignment_tau.png").is_file()
    empty = report.write_report(StudyResults.from_json({"experiment": "alignment"}), tmp_path / "empty")
    empty = empty.read_text(encoding="utf-8")
    assert "Missing: alignment results" in empty


def test_each_task_has_its_own_tables_and_claims(tmp_path):
    r = synthetic()
    line = {**json.loads(json.dumps(r["alignment"]["passkey"])), "task": "line"}
    r["tasks"], r["alignment"]["line"] = ["passkey", "line"], line
    names = [c.claim for c in report.compute_claims(StudyResults.from_json(r))]
    assert names == [
        f"{t}: {c}"
        for t in ("passkey", "line")
        for c in (
            "τ decreases as length grows",
            "pmax alignment beats entropy alignment",
            "alignment improves accuracy beyond L_tr",
        )
    ]
    text = report.write_report(StudyResults.from_json(r), tmp_path).read_text(encoding="utf-8")
    for t in ("passkey", "line"):
        assert f"{t} (L_tr = 64 tokens)" in text and f"Exact-match accuracy, {t} (004 Table 4)" in text
    assert "columns: lines" in text and "**line** (L_tr = 64)" in ra.markdown_tables(StudyResults.from_json(r))
    old = StudyResults.from_json({"experiment": "alignment", "alignment": r["alignment"]["passkey"]})  # one block
    assert list(blocks(old)) == ["passkey"] and len(report.compute_claims(old)) == 3


def test_block_keeps_task_order_round_trips_and_lists_its_rows_in_results_csv():
    """results.json's "alignment" is the experiment's block: {task: block} in the order of "tasks", written back
    unchanged, and its rows reach results.csv through the spec's results block, never for another experiment."""
    r = synthetic()
    line = {**json.loads(json.dumps(r["alignment"]["passkey"])), "task": "line"}
    r["tasks"], r["alignment"] = ["line", "passkey"], {"passkey": r["alignment"]["passkey"], "line": line}
    res = StudyResults.from_json(r)
    assert list(blocks(res)) == ["line", "passkey"] and blocks(res)["line"].train_length == L_TR
    out = res.to_json()
    assert list(out["alignment"]) == ["passkey", "line"]  # the raw block, written back as it was read
    assert json_text(StudyResults.from_json(out).to_json()) == json_text(out)
    rows = [x for x in study_table(res, RESULTS).rows if x["section"] == "alignment"]
    assert len(rows) == 2 * 4 * len(LENGTHS)  # tasks x settings (none and three modes) x lengths, one model
    row = next(x for x in rows if (x["task"], x["setting"], x["length"]) == ("passkey", "pmax", 128))
    assert (row["pe"], row["accuracy"], row["tau"], row["tau_source"]) == ("t5", 0.7, 0.9, "algorithm1")
    assert row["train_length"] == L_TR and row["rank_accuracy"] is None and row["at_grid_edge"] is False
    other = StudyResults.from_json({**r, "experiment": "rope-base"})  # another experiment's file: no such block
    assert blocks(other) == {} and not [x for x in study_table(other, RESULTS).rows if x["section"] == "alignment"]


def test_line_and_topic_study_end_to_end(tmp_path, monkeypatch):
    """A tiny study on line and topic (their own L_tr), one PE, scored by greedy decoding and by ranking."""
    from dataclasses import replace

    tiny = replace(sa.PRESETS["smoke"], multiples=[1, 2], n=2, probe_prompts=1, probe_tokens=0)
    monkeypatch.setitem(sa.PRESETS, "smoke", tiny)
    out = tmp_path / "s"
    assert (
        main(
            [
                "study",
                "--experiment",
                "alignment",
                "--preset",
                "smoke",
                "--tasks",
                "line,topic",
                "--pe",
                "alibi",
                "--steps",
                "4",
                "--jobs",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    res = json.loads((out / "results.json").read_text())
    assert res["tasks"] == ["line", "topic"] and res["train_length"] == {"line": 224, "topic": 224}
    assert res["settings"]["tasks"] == ["line", "topic"] and not res["failures"]
    for task in ("line", "topic"):
        al = res["alignment"][task]
        assert al["lengths"] == [224, 448] and set(al["models"]) == {"alibi"}
        mdl = al["models"]["alibi"]
        assert set(mdl["accuracy"]["none"]) == set(mdl["rank_accuracy"]["none"]) == {"224", "448"}
        assert (out / "runs" / task / "alibi" / "alignment" / "L448.json").is_file()
        assert res["runs"][f"{task}/alibi"]["run_dir"] == f"runs/{task}/alibi"
    assert [c["claim"].split(":")[0] for c in res["claims"]] == ["line"] * 3 + ["topic"] * 3
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "line (L_tr = 224 tokens)" in html and "topic (L_tr = 224 tokens)" in html
