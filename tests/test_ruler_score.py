"""RULER-style scoring (extrap.tasks.ruler): string match, effective length, a trained run, a tiny hf Llama,
the heatmaps, and hostile command lines."""

from __future__ import annotations

import json
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import extrap
import extrap.cli as cli
from extrap.errors import ExtrapError
from extrap.tasks.ruler import (
    RulerRun,
    RulerSettings,
    effective_length,
    make_ruler_example,
    score_ruler,
    string_match_all,
    string_match_part,
)
from extrap.tasks.ruler.heatmap import depth_matrix


@pytest.fixture(scope="module", autouse=True)
def _isolated_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXTRAP_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def corpus_spec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    src = Path(sysconfig.get_paths()["stdlib"])
    for p in sorted(src.glob("*.py"))[:40]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return f"text:{folder}"


@pytest.fixture(scope="module")
def niah_run(tmp_path_factory, corpus_spec):
    """A smoke model trained on niah_single (extrap train --task niah_single): the sampler takes the new tasks."""
    from extrap.train import build_configs, train

    over = dict(steps=12, train_length=256, corpus=corpus_spec, task="niah_single", save_every=12, batch_size=4)
    m, t = build_configs("alibi", "smoke", overrides=over)
    run = tmp_path_factory.mktemp("ruler-run") / "niah"
    train(run, m, t, progress=False)
    return run


# ---------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------
def test_string_match_as_ruler_defines_it():
    # RULER's metrics, by hand: all = share of the references found (any case), part = any found
    assert string_match_all("The numbers are 123 and 456.", ["123", "456", "789"]) == pytest.approx(2 / 3)
    assert string_match_all("KITCHEN", ["kitchen"]) == 1.0
    assert string_match_part("in the garden, not the office", ["office", "hallway"]) == 1.0
    assert string_match_part("nowhere", ["office", "hallway"]) == 0.0


def test_effective_length_relative_and_absolute():
    L = [128, 256, 512, 1024, 2048]
    s = [0.9, 0.8, 0.76, 0.5, 0.8]  # recovers at 2048: not counted, the score must stay above the cutoff
    rel = effective_length(L, s, "rel:0.85", 128)
    assert rel.form == "relative" and rel.cutoff == pytest.approx(0.765)  # 0.85 x 0.9
    assert rel.length == 256 and rel.passing == (128, 256, 2048) and rel.reference_score == 0.9
    absolute = effective_length(L, s, "abs:0.75", 128)
    assert absolute.form == "absolute" and absolute.cutoff == 0.75 and absolute.length == 512
    assert effective_length(L, s, "abs:0.95", 128).length is None  # even the shortest fails
    assert effective_length(L, [1.0, None, 1.0, 1.0, 1.0], "rel:0.85", 128).length == 128  # a failed length
    zero = effective_length(L, [0.0, 0.0, 0.0, 0.0, 0.0], "rel:0.85", 128)
    assert zero.length is None and "score at L_tr is 0" in zero.note
    assert "L_tr was not scored" in effective_length(L, s, "rel:0.85", 64).note
    with pytest.raises(ExtrapError, match="threshold"):
        effective_length(L, s, "relative:2", 128)


# ---------------------------------------------------------------------------
# scoring a trained extrap run: checked against full forward passes
# ---------------------------------------------------------------------------
def _loglik(model, prompt, cont):
    x = torch.tensor([prompt + cont])
    with torch.no_grad():
        logp = F.log_softmax(model(x).logits.float(), -1)[0]
    return float(sum(logp[len(prompt) - 1 + i, t] for i, t in enumerate(cont)))


def test_rank_greedy_and_generate_match_direct_computation(niah_run, corpus_spec):
    run = extrap.load(str(niah_run))
    model, tok = run.model, run.tokenizer
    base = dict(tasks=["niah_single", "vt"], lengths=[256, 512], train_length=256, n=3, filler=corpus_spec)
    for method in ("rank", "greedy", "generate"):
        rep = score_ruler(model, tok, RulerSettings(**base, method=method, details=True))
        assert [t.task for t in rep.tasks] == ["niah_single", "vt"] and rep.lengths == (256, 512)
        assert rep.effective_length.form == "relative" and rep.effective_length.reference_length == 256
        for m in rep.mean:
            got = [t.results[rep.lengths.index(m.length)].score for t in rep.tasks]
            assert m.score == pytest.approx(sum(got) / 2)
        for rec in rep.examples[:4]:
            ex = make_ruler_example(rec.task, tok, rec.length, rec.seed, depth=rec.depth, filler=corpus_spec)
            if rec.depth is not None:
                ex = make_ruler_example(
                    rec.task, tok, rec.length, rec.seed, depth=ex.requested_depth, filler=corpus_spec
                )
            p = tok.encode(ex.prompt)
            if method == "rank":
                ll = [_loglik(model, p, tok.encode(f" {c}\n")) for c in ex.candidates]
                assert rec.score == float(all(ll[0] > x for x in ll[1:]))
                assert rec.prediction == ex.candidates[max(range(len(ll)), key=ll.__getitem__)]
            elif method == "generate":
                seq = list(p)
                for _ in range(2 * ex.target_tokens):  # greedy, one full pass per token
                    with torch.no_grad():
                        seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
                text = tok.decode(seq[len(p) :]).strip()
                assert rec.prediction == text
                assert rec.score == pytest.approx(sum(a.lower() in text.lower() for a in ex.answers) / len(ex.answers))


def test_cli_suite_json_csv_heatmaps(niah_run, corpus_spec, tmp_path, capsys):
    out, csv, plot = tmp_path / "r.json", tmp_path / "r.csv", tmp_path / "plots"
    argv = [
        "task",
        "score",
        str(niah_run),
        "--suite",
        "ruler",
        "--tasks",
        "niah_single,vt,cwe",
        "--lengths",
        "256,1100",
    ]
    argv += ["--n", "2", "--score", "rank", "--threshold", "abs:0.5", "--json", "--out", str(out), "--csv", str(csv)]
    assert cli.main(argv + ["--plot", str(plot)]) == 2  # cwe is longer than 256 tokens: refused, nothing written
    assert "cwe: length 256 is below the minimum" in capsys.readouterr().err
    assert not out.exists() and not csv.exists() and not plot.exists()
    argv[6] = "niah_single,vt,fwe"
    argv[8] = "512,1100"
    assert cli.main(argv + ["--plot", str(plot)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert RulerRun.from_json(rep).to_json() == rep
    assert rep["threshold"] == "abs:0.5" and rep["effective_length"]["form"] == "absolute"
    assert rep["lengths"] == [512, 1100]  # absolute: L_tr is not added
    assert json.loads(out.read_text()) == rep
    rows = csv.read_text().splitlines()
    assert len(rows) == 1 + 4 * 2 and rows[0].startswith("extrap_version") and "score_depth_0-0.2" in rows[0]
    files = sorted(p.name for p in plot.iterdir())
    assert files == [f"heatmap_{t}.{e}" for t in ("niah_single", "vt") for e in ("png", "svg")]  # fwe: no depth
    assert (plot / "heatmap_vt.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.parse(plot / "heatmap_vt.svg").getroot().tag.endswith("svg")
    task = next(t for t in RulerRun.from_json(rep).report.tasks if t.task == "vt")
    lengths, labels, rows_ = depth_matrix(task)
    assert lengths == [512, 1100] and len(labels) == 5 and len(rows_) == 5
    # a run trained on a RULER-style task is scored on it by default, relative to L_tr (added)
    assert cli.main(["task", "score", str(niah_run), "--lengths", "512", "--n", "2", "--corpus", corpus_spec]) == 0
    text = capsys.readouterr().out
    assert "niah_single" in text and "threshold=rel:0.85" in text and "     256     512" in text


def test_a_run_trained_on_a_mix_is_scored_on_each_of_its_tasks(tmp_path, corpus_spec, capsys):
    from extrap.train import build_configs, train

    over = dict(steps=2, train_length=256, corpus=corpus_spec, task="niah_single,vt", save_every=2, batch_size=2)
    run = tmp_path / "mix"
    train(run, *build_configs("alibi", "smoke", overrides=over), progress=False)
    argv = ["task", "score", str(run), "--lengths", "256", "--n", "2", "--corpus", corpus_spec, "--json"]
    assert cli.main(argv) == 0
    rep = RulerRun.from_json(json.loads(capsys.readouterr().out))
    assert [t.task for t in rep.report.tasks] == ["niah_single", "vt"] and rep.trained_on == "niah_single,vt"


# ---------------------------------------------------------------------------
# a tiny random hf Llama, scored by greedy generation
# ---------------------------------------------------------------------------
def test_hf_llama_generation_scoring(tmp_path, hf_tokenizer, corpus_spec, capsys):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    folder = tmp_path / "llama"
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    hf_tokenizer.save_pretrained(folder)
    argv = ["task", "score", f"hf:{folder}", "--suite", "ruler", "--tasks", "niah_single,qa1", "--lengths", "400"]
    argv += ["--n", "2", "--score", "generate", "--corpus", corpus_spec, "--json", "--details"]
    assert cli.main(argv) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["method"] == "generate" and rep["lengths"] == [256, 400] and rep["train_length"] == 256
    assert [t["metric"] for t in rep["tasks"]] == ["all", "part"]
    for e in rep["examples"]:
        ok = e["answer"].lower() in e["prediction"].lower()
        assert e["score"] == float(ok)  # one reference each: all and part agree


# ---------------------------------------------------------------------------
# hostile command lines: exit 2, one line, nothing written
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv,needle",
    [
        (["task", "sample", "--task", "vtt", "--length", "300"], "did you mean vt"),
        (["task", "sample", "--task", "niah_single", "--length", "50"], "minimum of"),
        (["task", "sample", "--task", "qa1", "--length", "600", "--depth", "-0.1"], "depth must be"),
        (["task", "sample", "--task", "cwe", "--length", "1500", "--depth", "0.5"], "no depth"),
        (["task", "sample", "--task", "vt", "--length", "600", "--param", "num_hops=0"], "num_hops must be"),
        (["task", "sample", "--task", "vt", "--length", "600", "--param", "hops"], "NAME=NUMBER"),
        (["task", "sample", "--task", "passkey", "--length", "300", "--haystack", "noise"], "RULER-style"),
        (["task", "score", "RUN", "--suite", "ruler", "--tasks", ","], "is empty"),
        (["task", "score", "RUN", "--suite", "ruler", "--tasks", "niah,vt"], "did you mean"),
        (["task", "score", "RUN", "--suite", "ruler", "--threshold", "abs:2"], "threshold must be"),
        (["task", "score", "RUN", "--suite", "ruler", "--task", "vt"], "not both"),
        (["task", "score", "RUN", "--tasks", "vt"], "needs --suite ruler"),
        (["task", "score", "RUN", "--suite", "ruler", "--tasks", "vt", "--lengths", "64"], "minimum of"),
        (["task", "score", "RUN", "--suite", "ruler", "--temperature", "0.9"], "temperature"),
        (["task", "score", "RUN", "--suite", "ruler", "--plot", "FILE"], "not a folder"),
        (["task", "score", "RUN", "--suite", "ruler", "--param", "num_hop=2"], "unknown setting"),
        (["task", "score", "RUN", "--task", "passkey", "--score", "generate"], "RULER-style"),
        (["task", "score", "RUN", "--suite", "ruler", "--lengths", "300000"], "longest"),
        (["train", "--pe", "alibi", "--task", "niah_singl", "--out", "OUT"], "did you mean niah_single"),
    ],
)
def test_cli_bad_input(niah_run, tmp_path, capsys, argv, needle):
    (tmp_path / "FILE").write_text("x")
    sub = {"RUN": str(niah_run), "OUT": str(tmp_path / "out"), "FILE": str(tmp_path / "FILE")}
    flag = {"train": [], "sample": ["--csv"], "score": ["--out"]}[argv[0] if argv[0] == "train" else argv[1]]
    argv = [sub.get(a, a) for a in argv] + flag + ([str(tmp_path / "r.json")] if flag else [])
    try:
        rc = cli.main(argv)
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "out").exists()


def test_hf_t5_is_scored_through_its_decoder_and_refuses_generation(tmp_path, hf_tokenizer, corpus_spec, capsys):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.T5Config(
        vocab_size=300, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0
    )
    folder = tmp_path / "t5"
    transformers.T5ForConditionalGeneration(cfg).save_pretrained(folder)
    hf_tokenizer.save_pretrained(folder)
    argv = ["task", "score", f"hf:{folder}", "--suite", "ruler", "--tasks", "niah_single", "--lengths", "200"]
    argv += ["--n", "2", "--corpus", corpus_spec, "--train-length", "200", "--json"]
    assert cli.main(argv + ["--score", "rank"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["lengths"] == [200] and 0 <= rep["tasks"][0]["results"][0]["score"] <= 1
    assert cli.main(argv + ["--score", "generate"]) == 2
    assert "needs a causal LM" in capsys.readouterr().err
