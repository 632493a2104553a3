"""`extrap study --preset smoke` end to end: every stage, the claims it decides, the report, and resume."""

import json

import pytest

from extrap.cli import main
from extrap.experiments.extrapolation.results import block
from extrap.results import load_results

PES = ["alibi", "kerple-log", "sandwich", "type1", "type2", "example1", "example2", "sinusoidal", "rope", "nope"]


@pytest.fixture(scope="module")
def smoke_study(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    assert main(["study", "--preset", "smoke", "--out", str(out)]) == 0
    return out


def test_smoke_study_produces_every_section(smoke_study):
    out = smoke_study
    res = json.loads((out / "results.json").read_text())
    assert res["pes"] == PES
    assert not res["failures"]
    for pe in res["pes"]:
        assert set(res["eval"][pe]) == {"nonoverlapping", "sliding", "last-token"}
        assert [r["length"] for r in res["eval"][pe]["last-token"]["results"]] == res["lengths"]
        assert res["erf"][pe]["grad_erf"] is not None
    assert max(res["lengths"]) == 16 * res["train_length"]
    verdicts = {r["pe"]: r["verdict"] for r in res["theory"]}
    assert verdicts["type1"] == verdicts["alibi"] == "converges" and verdicts["example1"] == "diverges"
    assert verdicts["sinusoidal"] == verdicts["rope"] == "not-applicable"
    assert [r["method"] for r in res["timing"]["rows"]] == ["sliding", "nonoverlapping", "cache-window"]
    assert res["seed"] == 0 and res["corpus_hash"] and res["extrap_version"]
    html = (out / "report.html").read_text()
    assert "Claims" in html and "figures/" in html and "widest head, ε = 0.001" in html
    for run in res["runs"].values():
        assert (out / run["run_dir"] / "config.json").exists()
    # the typed results read back exactly what was written
    assert json.dumps(load_results(out).to_json(), sort_keys=True) == json.dumps(res, sort_keys=True)


def test_smoke_study_writes_results_csv(smoke_study):
    """results.csv beside results.json: its records one row each, the same numbers, provenance on every row."""
    import csv

    res = json.loads((smoke_study / "results.json").read_text())
    with open(smoke_study / "results.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {(r["seed"], r["corpus_hash"], r["extrap_version"]) for r in rows} == {
        (str(res["seed"]), res["corpus_hash"], res["extrap_version"])
    }
    ppl = {(r["pe"], r["protocol"], int(r["length"])): float(r["ppl"]) for r in rows if r["section"] == "eval"}
    by_pe = res["eval"].items()
    assert ppl == {(pe, k, p["length"]): p["ppl"] for pe, by in by_pe for k, rep in by.items() for p in rep["results"]}
    losses = {r["pe"]: float(r["final_loss"]) for r in rows if r["section"] == "run"}
    assert losses == {pe: run["final_loss"] for pe, run in res["runs"].items()}
    theory = [r for r in rows if r["section"] == "theory"]
    assert len(theory) == sum(max(1, len(t["trf"])) for t in res["theory"])
    assert [r["claim"] for r in rows if r["section"] == "claim"] == [c["claim"] for c in res["claims"]]
    sections = [r["section"] for r in rows]  # the file's order: the block's theory rows before the evaluation
    assert list(dict.fromkeys(sections)) == ["run", "theory", "eval", "erf", "spearman", "timing", "claim"]


def test_smoke_study_writes_its_keys_in_the_order_of_the_files_before_it(smoke_study):
    """The extrapolation block's five keys stand where they stood when they were fields of StudyResults."""
    keys = list(json.loads((smoke_study / "results.json").read_text()))
    shared = ["settings", "runs", "eval", "failures", "learning", "claims"]
    own = ["theory", "erf", "spearman", "timing"]
    order = ["settings", "theory", "runs", "eval", "erf", "spearman", "failures", "timing", "learning", "claims"]
    assert [k for k in keys if k in shared + own] == order


def test_every_trf_says_how_it_was_taken(smoke_study):
    """The ERF section's TRF is the widest head's n(1e-3): the theory table's numbers, reduced by max."""
    res = json.loads((smoke_study / "results.json").read_text())
    heads: dict[str, list] = {}
    for row in res["theory"]:
        heads.setdefault(row["pe"], []).append(row)
    for pe, entry in res["erf"].items():
        assert (entry["trf_eps"], entry["trf_reduce"]) == (1e-3, "max")
        trained = [r for r in heads[pe] if r.get("params") == "trained"]  # learned bias parameters: every layer
        rows = trained or heads[pe]
        assert entry["trf_params"] == ("trained" if trained else "initial"), pe
        converge = all(r["verdict"] == "converges" for r in rows)
        assert entry["trf"] == (max(r["trf"]["0.001"] for r in rows) if converge else None), pe
    assert (res["spearman"]["trf_eps"], res["spearman"]["trf_reduce"]) == (1e-3, "max")


def test_smoke_study_decides_its_claims(smoke_study):
    res = json.loads((smoke_study / "results.json").read_text())
    claims = {c["claim"]: c for c in res["claims"]}
    assert len(claims) == 6
    trf = claims["TRF(Type2) < TRF(Type1)"]  # theory only: no training can change it
    assert trf["ok"] is True and "ε=0.001: Type1 608, Type2" in trf["evidence"]
    convergent = sorted(
        {r["pe"] for r in res["theory"]} - {r["pe"] for r in res["theory"] if r["verdict"] != "converges"}
    )
    ranked = [pe for pe, e in res["erf"].items() if e["trf"] is not None]
    named = {
        "Convergent RPEs extrapolate": convergent,
        "1/n and 1/(n ln n) do not extrapolate": ["example1", "example2"],
        "Sinusoidal does not extrapolate": ["sinusoidal"],
        "Sliding-window inference is much slower than non-overlapping": [res["timing"]["pe"]],
        "TRF and ERF trends agree": ranked,
    }
    assert len(ranked) >= 3  # enough PEs with a finite TRF to rank
    gate = res["learning"]  # did the models learn: loss at L_tr against the training tokens' unigram entropy
    assert gate["unigram_entropy"] > 0 and set(gate["loss"]) == set(PES)
    learned = {pe: loss <= gate["max_fraction"] * gate["unigram_entropy"] for pe, loss in gate["loss"].items()}
    for name, pes in named.items():
        c = claims[name]
        assert all(pe in c["evidence"] for pe in pes), c
        timing = name.startswith("Sliding")  # inference cost: no training needed
        if not timing and not any(learned[pe] for pe in pes):  # models that did not learn
            assert c["ok"] is None and c["untested"] and "not tested: the models did not learn" in c["evidence"]
            assert f"{gate['unigram_entropy']:.3g}" in c["evidence"], c  # the numbers behind it
            continue
        if name == "TRF and ERF trends agree" and res["spearman"]["grad"] is res["spearman"]["attn"] is None:
            assert c["ok"] is None and "no correlation computed" in c["evidence"]  # every ERF equal: no ranking
            continue
        assert c["ok"] is not None, c  # the data exist, so the claim is decided either way


def test_report_page_says_which_claims_were_not_tested(smoke_study):
    """The claims table of report.html: a claim whose models did not learn reads "not tested", never ✔ or ✘."""
    import html as html_lib
    import re

    res = json.loads((smoke_study / "results.json").read_text())
    page = html_lib.unescape((smoke_study / "report.html").read_text())
    section = page[page.index('id="claims"') : page.index("</table>", page.index('id="claims"'))]
    marks = {
        html_lib.unescape(claim): mark
        for mark, claim in re.findall(r'<td class="status">(.*?)</td><td>(.*?)</td>', section, flags=re.S)
    }
    assert set(marks) == {c["claim"] for c in res["claims"]}
    for c in res["claims"]:
        expected = "not tested" if c.get("untested") else {True: "✔", False: "✘", None: "–"}[c["ok"]]
        assert marks[c["claim"]] == expected, c
    assert marks["TRF(Type2) < TRF(Type1)"] == "✔"  # the formulas: no training needed
    gate = res["learning"]  # the smoke preset's 30 steps learn nothing: every model stays above the threshold
    assert all(loss > gate["max_fraction"] * gate["unigram_entropy"] for loss in gate["loss"].values())
    assert marks["Convergent RPEs extrapolate"] == "not tested" and marks["TRF and ERF trends agree"] == "not tested"
    assert "yes, but did not learn" in page  # the per-PE verdicts of Definition 0.1 say so too


def test_learned_scheme_is_analysed_at_its_trained_values(smoke_study, capsys):
    """KERPLE's r1, r2 are trained: the theory has a row per layer and head beside the initial ones, the numbers
    that `extrap theory --checkpoint RUN` prints for the run."""
    res = load_results(smoke_study)
    run = res.run_path("kerple-log", smoke_study)
    capsys.readouterr()
    assert main(["theory", "--checkpoint", str(run), "--eps", "1e-3,1e-6", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["results"]
    own = block(res)
    rows = [r for r in own.theory_by_pe()["kerple-log"] if r.trained]
    assert [(r.layer, r.head) for r in rows] == [(c["layer"], c["head"]) for c in cli]
    assert len({r.layer for r in rows}) > 1 and len({r.head for r in rows}) == res.n_head
    initial = [r for r in own.theory_by_pe()["kerple-log"] if not r.trained]
    for r, c in zip(rows, cli):
        assert (r.verdict, r.trf, r.values) == (c["verdict"], c["trf"], c["params"])
        assert r.initial_values == initial[r.head].values != r.values
    entry = own.erf["kerple-log"]
    assert entry.trf == max(c["trf"]["0.001"] for c in cli) != entry.trf_initial
    assert entry.trf_initial == max(r.trf["0.001"] for r in initial)
    html = (smoke_study / "report.html").read_text()
    assert "trained, layer 0" in html and "(initial 1.5)" in html and "TRF at initial parameters" in html


def _refuse(*args, **kwargs):
    raise AssertionError("a finished stage was computed again")


def test_smoke_study_resumes_without_recomputing(smoke_study, monkeypatch):
    """A resumed study trains, evaluates, measures and times nothing again; no run file is touched."""
    out = smoke_study

    def files():
        return {p: p.stat().st_mtime_ns for p in [*(out / "runs").rglob("*"), out / "timing.json"] if p.is_file()}

    before = files()
    for name in (
        "extrap.train.train",
        "extrap.evaluate.evaluate_run",
        "extrap.evaluate.eval_sliding",
        "extrap.evaluate.eval_nonoverlapping",
        "extrap.erf.run_erf",
    ):
        monkeypatch.setattr(name, _refuse)
    # one job at a time runs in this process, where the entry points above refuse to run
    assert main(["study", "--preset", "smoke", "--out", str(out), "--resume", "--jobs", "1"]) == 0
    assert files() == before
    assert not load_results(out).failures  # a refused call would have failed its PE
    assert main(["study", "--preset", "smoke", "--out", str(out)]) == 2  # without --resume: refused


def test_study_refuses_bad_input(tmp_path, capsys):
    assert main(["study", "--preset", "smoke", "--pe", "alibi,bogus", "--out", str(tmp_path / "s")]) == 2
    assert "unknown positional scheme" in capsys.readouterr().err
    assert not (tmp_path / "s" / "runs").exists()
    assert main(["study", "--preset", "giant", "--out", str(tmp_path / "s2")]) == 2
    assert main(["study", "--preset", "smoke", "--tasks", "passkey", "--out", str(tmp_path / "s3")]) == 2
    assert "--tasks is only for --experiment alignment" in capsys.readouterr().err
