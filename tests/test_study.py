"""`extrap study --preset smoke` end to end: every stage, the claims it decides, the report, and resume."""

import json

import pytest

from extrap.cli import main
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
    assert json.dumps(load_results(out).to_dict(), sort_keys=True) == json.dumps(res, sort_keys=True)


def test_every_trf_says_how_it_was_taken(smoke_study):
    """The ERF section's TRF is the widest head's n(1e-3): the theory table's numbers, reduced by max."""
    res = json.loads((smoke_study / "results.json").read_text())
    heads: dict[str, list] = {}
    for row in res["theory"]:
        heads.setdefault(row["pe"], []).append(row)
    for pe, entry in res["erf"].items():
        assert (entry["trf_eps"], entry["trf_reduce"]) == (1e-3, "max")
        converge = all(r["verdict"] == "converges" for r in heads[pe])
        assert entry["trf"] == (max(r["trf"]["0.001"] for r in heads[pe]) if converge else None), pe
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
    for name, pes in named.items():
        c = claims[name]
        assert all(pe in c["evidence"] for pe in pes), c
        if name == "TRF and ERF trends agree" and res["spearman"]["grad"] is res["spearman"]["attn"] is None:
            assert c["ok"] is None and "no correlation computed" in c["evidence"]  # every ERF equal: no ranking
            continue
        assert c["ok"] is not None, c  # the data exist, so the claim is decided either way


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
