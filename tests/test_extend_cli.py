"""--extend from the command line and the Python API on an extrap rope run: eval (every method), eval --file
(a bounded method streams), task score, generate, align, and the refusals (exit 2, one line, nothing written)."""

import json
import math

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.extend import extend_run, parse

L_TR = 32
SPECS = ["sinks:n=2,window=16", "lm-infinite:global=2,local=16", "self-extend:group=2,window=8", "dca",
         "rerope:window=4", "leaky-rerope:window=4,k=4", "string"]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A rope run and an alibi run, trained a few smoke steps on stdlib source."""
    import sysconfig
    from pathlib import Path

    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("extend_runs")
    folder = root / "corpus"
    folder.mkdir()
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    out = {}
    for pe, steps in (("rope", 20), ("alibi", 2)):
        m, t = build_configs(pe, "smoke", overrides=dict(steps=steps, corpus=f"text:{folder}", train_length=L_TR))
        train(root / pe, m, t, progress=False)
        out[pe] = root / pe
    return out


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("extrap: error:"), err
    return err


@pytest.mark.parametrize("spec", SPECS)
def test_eval_with_every_method_cli_equals_python_api(runs, spec, capsys):
    from extrap.evaluate import EvalSettings, evaluate_run

    rc = main(["eval", str(runs["rope"]), "--lengths", "32,64", "--tokens", "128", "--extend", spec, "--json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    full = parse(spec, L_TR).spec
    assert rep["pe"] == f"rope+{full}" and rep["rope"]["extend"] == full
    assert all(math.isfinite(r["ppl"]) for r in rep["results"])
    run = extrap.load(runs["rope"])
    extend_run(run, spec)
    want = evaluate_run(run, EvalSettings(lengths=[32, 64], tokens=128)).to_json()
    assert [r["loss"] for r in rep["results"]] == pytest.approx([r["loss"] for r in want["results"]], abs=1e-6)


def test_an_extension_changes_the_loss_only_where_its_map_differs(runs):
    from extrap.evaluate.protocols import eval_nonoverlapping
    from extrap.run import eval_stream

    plain = extrap.load(runs["rope"])
    stream = eval_stream(plain, "validation", 257)
    for spec in ("rerope:window=31", "self-extend:group=2,window=8"):
        run = extrap.load(runs["rope"])
        extend_run(run, spec)
        longer = eval_nonoverlapping(run.model, stream, 64, 256)  # t up to 63 > 31: the maps differ
        assert torch.isfinite(longer).all() and not torch.equal(
            longer, eval_nonoverlapping(plain.model, stream, 64, 256)
        )
    run = extrap.load(runs["rope"])
    extend_run(run, "rerope:window=31")  # sequences of 31: d = t everywhere, plain RoPE bit for bit
    assert torch.equal(
        eval_nonoverlapping(run.model, stream, 31, 124), eval_nonoverlapping(plain.model, stream, 31, 124)
    )


def test_eval_file_streams_a_bounded_method(runs, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 30)
    rc = main(["eval", str(runs["rope"]), "--file", str(text), "--extend", "sinks:n=2,window=16", "--json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"].startswith("rope+sinks") and math.isfinite(rep["ppl"])


def test_task_generate_align_take_the_flag(runs, capsys):
    base = ["--extend", "self-extend:group=2,window=8"]
    assert (
        main(["task", "score", str(runs["rope"]), "--task", "passkey", "--lengths", "96", "--n", "2", "--json", *base])
        == 0
    )
    rep = json.loads(capsys.readouterr().out)
    assert "+self-extend" in rep["pe"]
    assert main(["generate", str(runs["rope"]), "--prompt", "def ", "--tokens", "40", "--json", *base]) == 0
    assert "+self-extend" in json.loads(capsys.readouterr().out)["pe"]
    assert main(["align", str(runs["rope"]), "--lengths", "64", "--segments", "1", "--json", *base]) == 0
    assert "+self-extend" in json.loads(capsys.readouterr().out)["pe"]


def test_generate_with_an_extension_matches_greedy_full_passes(runs):
    from extrap.model.generate import generate

    run = extrap.load(runs["rope"])
    extend_run(run, "dca:chunk=12,local=2")
    prompt = torch.tensor([run.tokenizer.encode("import os\n")])
    out = generate(run.model, prompt, 30, greedy=True)
    x = prompt
    with torch.no_grad():
        for _ in range(30):
            x = torch.cat([x, run.model(x).logits[:, -1:].argmax(-1)], 1)
    assert torch.equal(out, x)


REFUSED = [
    ["--extend", "nope"],
    ["--extend", "rerope:w=3"],
    ["--extend", "self-extend:group=0"],
    ["--extend", "leaky-rerope:k=0"],
    ["--extend", "sinks:n=-1"],
    ["--extend", "rerope:window=32"],
    ["--extend", "string:shift=40"],
    ["--extend", "rerope", "--rope", "linear", "--factor", "2"],
    ["--extend", "rerope", "--window", "16"],
    ["--extend", "rerope", "--temperature", "1.2"],
]


@pytest.mark.parametrize("extra", REFUSED, ids=[" ".join(r) for r in REFUSED])
def test_refusals_exit_2_in_one_line_and_write_nothing(runs, extra, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(runs["rope"]), "--lengths", "64", "--out", str(out), *extra]) == 2
    _one_error_line(capsys)
    assert not out.exists()


def test_a_non_rotary_run_is_refused(runs, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(runs["alibi"]), "--lengths", "64", "--extend", "rerope", "--out", str(out)]) == 2
    assert "rotary" in _one_error_line(capsys) and not out.exists()
    assert main(["generate", str(runs["rope"]), "--prompt", "x", "--extend", "sinks", "--cache-window", "8"]) == 2
    _one_error_line(capsys)


def test_pe_list_and_theory_cli(capsys, tmp_path):
    assert main(["pe", "list", "--extend", "--json"]) == 0
    names = [m["name"] for m in json.loads(capsys.readouterr().out)["methods"]]
    assert names == ["sinks", "lm-infinite", "self-extend", "dca", "rerope", "leaky-rerope", "string"]
    assert main(["theory", "--extend", "self-extend:group=8,window=1024", "--train-length", "4096",
                 "--length", "8192", "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)["extension"]
    assert r["max_distance"] == 8191 // 8 + 1024 - 128 and r["in_distribution"] and r["in_distribution_up_to"] == 25600
    assert (
        main(["theory", "--extend", "string", "--train-length", "4096", "--length", "16384", "--head-dim", "64"]) == 0
    )
    assert "turned past training's angles: 9" in capsys.readouterr().out
    csv = tmp_path / "t.csv"
    assert main(["theory", "--extend", "rerope", "--train-length", "64", "--length", "200", "--csv", str(csv)]) == 0
    assert "max_distance" in csv.read_text() and "in distribution" in capsys.readouterr().out
    for bad in (["--extend", "x", "--train-length", "64", "--length", "9"], ["--extend", "rerope", "--length", "9"],
                ["--extend", "rerope:window=64", "--train-length", "64", "--length", "9"],
                ["alibi", "--extend", "rerope", "--train-length", "64", "--length", "9"]):  # fmt: skip
        assert main(["theory", *bad]) == 2
        _one_error_line(capsys)
