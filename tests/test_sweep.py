"""A reliability sweep: output targets, non-finite numbers, damaged inputs, conflicting flags, unbounded work,
and hostile values for every flag; each failure is one line (``extrap: error: ...``) and exit status 2."""

import json
import math
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch

from extrap.cli import main
from extrap.errors import ExtrapError


def cli(capsys, argv):
    """(exit status, stdout, stderr lines) of ``extrap ARGV`` run in this process."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err.splitlines()


def refused(capsys, argv, *fragments):
    """``argv`` ends in one error line holding every fragment, exit status 2, and no traceback."""
    rc, _, err = cli(capsys, argv)
    errors = [line for line in err if line.startswith("extrap: error:")]
    assert rc == 2 and len(errors) == 1, (rc, err)
    assert not any("Traceback" in line for line in err), err
    for f in fragments:
        assert f in errors[0], (f, errors[0])
    return errors[0]


def strict(text):
    """Parse ``text`` as RFC 8259 JSON: NaN, Infinity and -Infinity are refused."""

    def bad(name):
        raise AssertionError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=bad)


@pytest.fixture(scope="module")
def run(tiny_runs):
    return tiny_runs["alibi"]


@pytest.fixture(scope="module")
def nan_run(tiny_runs, tmp_path_factory):
    """The tiny alibi run with every weight NaN."""
    from safetensors.torch import load_file, save_file

    d = tmp_path_factory.mktemp("nan") / "run"
    shutil.copytree(tiny_runs["alibi"], d)
    for f in d.glob("checkpoints/*/model.safetensors"):
        save_file({k: v.fill_(math.nan) if v.is_floating_point() else v for k, v in load_file(f).items()}, f)
    return d


# ---- output targets ---------------------------------------------------------------------------------
def _commands(run, tmp_path):
    return [
        ["pe", "list"],
        ["corpus", "list"],
        ["theory", "alibi"],
        ["task", "sample", "--task", "line", "--length", "64"],
        ["eval", run, "--lengths", "32"],
        ["align", run],
        ["erf", run],
        ["task", "score", run, "--task", "passkey"],
        ["generate", run],
        ["train", "--out", tmp_path / "new", "--preset", "smoke"],
    ]


@pytest.mark.parametrize("index", range(10))
def test_a_link_is_refused_before_any_work(index, run, tmp_path, capsys):
    """A symbolic link at --csv or --out could point at a run's own file: refused before anything runs."""
    target, link = tmp_path / "kept.csv", tmp_path / "link.csv"
    target.write_text("kept\n")
    link.symlink_to(target)
    argv = _commands(run, tmp_path)[index]
    refused(capsys, [*argv, "--csv", link], "--csv", "symbolic link")
    if argv[0] in ("eval", "align") or argv[:2] == ["task", "score"]:
        refused(capsys, [*argv, "--out", link], "--out", "symbolic link")
    assert link.is_symlink() and target.read_text() == "kept\n"
    assert not (tmp_path / "new").exists()  # train stopped before it made its run


def _read_fifo(fifo, into):
    import threading

    thread = threading.Thread(target=lambda: into.append(fifo.read_bytes()), daemon=True)
    thread.start()
    return thread


def test_a_fifo_or_a_device_is_written_in_place_never_replaced(run, tmp_path, capsys):
    fifo, got = tmp_path / "pipe", []
    os.mkfifo(fifo)
    reader = _read_fifo(fifo, got)
    assert cli(capsys, ["pe", "list", "--csv", fifo])[0] == 0
    reader.join(30)
    assert got[0].startswith(b"extrap_version,name,") and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    reader = _read_fifo(fifo, got)
    assert cli(capsys, ["eval", run, "--lengths", "32", "--tokens", "64", "--out", fifo])[0] == 0
    reader.join(30)
    assert strict(got[1].decode())["train_length"] == 32 and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert cli(capsys, ["pe", "list", "--csv", "/dev/null"])[0] == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_folder_or_a_socket_is_refused_before_anything_is_written(tmp_path):
    import socket

    from extrap.io import output_target

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    with pytest.raises(ExtrapError, match="a socket, not a regular file"):
        output_target(tmp_path / "sock")
    with pytest.raises(ExtrapError, match="is a directory"):
        output_target(tmp_path)
    sock.close()


def test_a_link_is_refused_and_its_target_kept(tmp_path, capsys):
    target, link, dangling = tmp_path / "table.csv", tmp_path / "link.csv", tmp_path / "dangling.csv"
    target.write_text("mine\n")
    link.symlink_to(target)
    dangling.symlink_to(tmp_path / "made.csv")
    refused(capsys, ["pe", "list", "--csv", link], "symbolic link")
    refused(capsys, ["pe", "list", "--csv", dangling], "symbolic link")
    assert target.read_text() == "mine\n" and not (tmp_path / "made.csv").exists()
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "to_pipe").symlink_to(tmp_path / "pipe")
    refused(capsys, ["pe", "list", "--csv", tmp_path / "to_pipe"], "symbolic link")
    refused(capsys, ["pe", "list", "--csv", tmp_path], "is a directory")
    folder = tmp_path / "real"
    folder.mkdir()
    (tmp_path / "linked").symlink_to(folder)  # a folder on the path may be a link: the user chose it
    assert cli(capsys, ["pe", "list", "--csv", tmp_path / "linked" / "pe.csv"])[0] == 0
    assert (folder / "pe.csv").read_text().startswith("extrap_version,")


def test_the_writers_refuse_a_link_themselves(tmp_path):
    """Past the up-front checks (a link made meanwhile): the writer, the log append and the lock refuse it."""
    from extrap.io import append_line, atomic_write_bytes, open_lock_file
    from extrap.plotting import new_figure, save_figure

    target = tmp_path / "config.json"
    target.write_text("{}\n")
    for name in ("fig.svg", "metrics.jsonl", ".lock", "out.json"):
        (tmp_path / name).symlink_to(target)
    fig = new_figure()
    fig.add_subplot().plot([1, 2])
    for write in (
        lambda: save_figure(fig, tmp_path, "fig"),
        lambda: append_line(tmp_path / "metrics.jsonl", "{}"),
        lambda: open_lock_file(tmp_path / ".lock"),
        lambda: atomic_write_bytes(tmp_path / "out.json", b"x"),
    ):
        with pytest.raises(ExtrapError, match="symbolic link"):
            write()
    assert target.read_text() == "{}\n" and not (tmp_path / "fig.png").exists()  # not even the other format


@pytest.mark.parametrize(
    "argv,figure",
    [
        (
            ["task", "score", "RUN", "--task", "vt", "--lengths", "256", "--n", "2", "--threshold", "abs:0.5"],
            "heatmap_vt.svg",
        ),
        (["erf", "RUN", "--length", "64", "--segments", "2", "--kind", "grad"], "grad_erf.svg"),
    ],
)
def test_plot_never_writes_through_a_link_into_a_run(argv, figure, run, tmp_path, capsys):
    """Issue 28.3: a link in the --plot folder to the run's config.json; the run must survive intact."""
    import extrap

    mine = tmp_path / "run"
    shutil.copytree(run, mine)
    before = {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()}
    plots = tmp_path / "D"
    plots.mkdir()
    (plots / figure).symlink_to(mine / "config.json")
    argv = [str(mine) if a == "RUN" else a for a in argv]
    refused(capsys, [*argv, "--plot", plots, "--out" if argv[0] == "task" else "--csv", tmp_path / "r"], "--plot")
    assert {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()} == before
    assert os.listdir(plots) == [figure] and not (tmp_path / "r").exists()  # nothing written at all
    assert extrap.load(mine).pe == "alibi"


def test_a_study_is_never_written_into_a_run(run, tmp_path, capsys):
    from extrap.study import run_study

    mine = tmp_path / "run"
    shutil.copytree(run, mine)
    before = {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()}
    for out in (mine, mine / "checkpoints" / "study"):
        refused(capsys, ["study", "--preset", "smoke", "--pe", "alibi", "--jobs", "1", "--out", out], "run directory")
        with pytest.raises(ExtrapError, match="run directory"):
            run_study(out, preset="smoke", pes=["alibi"], jobs=1)
    assert {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()} == before
    assert not (mine / "checkpoints" / "study").exists()


def test_a_csv_to_stdout_through_a_pipe(tiny_text, tmp_path):
    """``extrap corpus position-frequency ... --csv /dev/stdout | cat``: the CSV goes down the pipe, exit 0."""
    argv = ["corpus", "position-frequency", tiny_text, "--train-length", "16", "--cache", tmp_path / "cache"]
    proc = subprocess.run(
        [sys.executable, "-m", "extrap.cli", *map(str, argv), "--csv", "/dev/stdout"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "error" not in proc.stderr, proc.stderr
    import csv

    header = proc.stdout.index("extrap_version,corpus,train_length,")
    rows = list(csv.DictReader(proc.stdout[header:].split("\ncorpus ")[0].splitlines()))
    assert rows and all(int(r["f"]) == 16 - int(r["i"]) for r in rows)  # packed windows: f(i) = L_tr - i
    out = tmp_path / "both.txt"  # stdout sent to a file: the table and the CSV both land in that same file
    with open(out, "w") as f:
        rc = subprocess.run([sys.executable, "-m", "extrap.cli", "pe", "list", "--csv", "/dev/stdout"], stdout=f)
        inode = os.fstat(f.fileno()).st_ino
    lines = out.read_text().splitlines()
    assert rc.returncode == 0 and os.stat(out).st_ino == inode  # written in place, not replaced by a rename
    assert lines.count("extrap_version,name,kind,summary,reference,options") == 1
    assert any(line.split()[:2] == ["alibi", "bias"] for line in lines)


def test_one_file_for_two_outputs_or_an_input_is_refused(run, tmp_path, capsys):
    x = tmp_path / "x.json"
    refused(capsys, ["eval", run, "--lengths", "32", "--out", x, "--csv", x], "--csv", "also --out")
    (tmp_path / "alias.json").symlink_to(x)
    refused(capsys, ["align", run, "--out", x, "--csv", tmp_path / "alias.json"], "symbolic link")
    assert not x.exists()
    text = tmp_path / "text.txt"
    text.write_text("def f():\n    return 1\n" * 20)
    refused(capsys, ["eval", run, "--file", text, "--out", text], "also --file")
    assert text.read_text().startswith("def f()")


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "RUN", "--out", "RUN/config.json"],
        ["eval", "RUN", "--csv", "RUN/latest.json"],
        ["align", "RUN", "--out", "RUN/metrics.jsonl"],
        ["erf", "RUN", "--csv", "RUN/tokenizer.json"],
        ["task", "score", "RUN", "--task", "passkey", "--out", "RUN/final.json"],
        ["generate", "RUN", "--csv", "RUN/checkpoints/meta.json"],
        ["theory", "--checkpoint", "RUN", "--csv", "RUN/config.json"],
        ["task", "sample", "--task", "line", "--length", "64", "--run", "RUN", "--csv", "RUN/config.json"],
        ["train", "--out", "RUN", "--csv", "RUN/metrics.jsonl"],
    ],
)
def test_a_runs_own_files_are_refused(argv, run, capsys):
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    refused(capsys, [str(a).replace("RUN", str(run)) for a in argv], "is a file of run", "would damage")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_results_beside_a_run_and_nothing_inside_a_model_folder(run, tmp_path, capsys):
    out = run / "eval-mine.json"
    assert cli(capsys, ["eval", run, "--lengths", "32", "--tokens", "64", "--out", out])[0] == 0
    assert strict(out.read_text())["train_length"] == 32
    out.unlink()
    folder = tmp_path / "model"
    folder.mkdir()
    refused(capsys, ["align", f"hf:{folder}", "--out", folder / "aligned.json"], "model folder")


def test_a_closed_stdout_ends_quietly_and_takes_no_file(tmp_path):
    """``extrap pe list >&-``: nothing to print to, exit 0; a CSV opened later does not receive the table."""
    csv = tmp_path / "pe.csv"
    proc = subprocess.run(
        ["sh", "-c", 'exec "$0" -m extrap.cli pe list --csv "$1" >&-', sys.executable, str(csv)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert csv.read_text().startswith("extrap_version,name,")


# ---- non-finite numbers -----------------------------------------------------------------------------
def _json_commands(nan_run, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 20)
    few = ["--lengths", "32,64", "--tokens", "256"]
    return {
        "eval": ["eval", nan_run, *few],
        "eval-window": ["eval", nan_run, *few, "--window", "16"],
        "eval-last-token": ["eval", nan_run, "--lengths", "32,64", "--protocol", "last-token", "--targets", "4"],
        "eval-file": ["eval", nan_run, "--file", text, "--window", "16"],
        "align": ["align", nan_run, "--lengths", "64", "--segments", "1"],
        "erf": ["erf", nan_run, "--length", "64", "--segments", "2"],
        "task": ["task", "score", nan_run, "--task", "passkey", "--lengths", "128", "--n", "2"],
        "generate": ["generate", nan_run, "--tokens", "4"],
        "theory": ["theory", "--checkpoint", nan_run],
    }


def _errors(obj):
    """Every ``error`` string anywhere in a JSON value."""
    if isinstance(obj, dict):
        return [v for k, v in obj.items() if k == "error" and isinstance(v, str)] + [
            e for v in obj.values() for e in _errors(v)
        ]
    return [e for v in obj for e in _errors(v)] if isinstance(obj, list) else []


@pytest.mark.parametrize(
    "name", ["eval", "eval-window", "eval-last-token", "eval-file", "align", "erf", "task", "generate", "theory"]
)
def test_every_json_command_on_an_all_nan_model(name, nan_run, tmp_path, capsys):
    argv = _json_commands(nan_run, tmp_path)[name]
    has_out = argv[0] in ("eval", "align") or argv[:2] == ["task", "score"]
    out_file = tmp_path / "out.json"
    rc, out, err = cli(capsys, [*argv, "--json", *(["--out", out_file] if has_out else [])])
    assert rc == 0, err
    report = strict(out)
    if has_out:
        assert strict(out_file.read_text()) == report
    if name in ("eval", "eval-window", "eval-last-token", "align", "theory"):
        assert _errors(report), "a null that replaced a NaN is explained by an error"
    if name == "eval-window":
        assert report["window"]["error"]["measured"]["error"].startswith("not finite: exact_ppl")
    rc, _, err = cli(capsys, argv)  # the text report does not crash either
    assert rc == 0, err


def test_finite_json_names_what_it_replaced():
    from extrap.io import finite_json, json_text
    from extrap.results.tables import Table

    obj = {"a": 1.0, "b": math.nan, "c": [1.0, math.inf], "d": {"x": -math.inf, "error": "kept"}, "e": None}
    assert finite_json(obj) == {
        "a": 1.0,
        "b": None,
        "c": [1.0, None],
        "d": {"x": None, "error": "kept"},
        "e": None,
        "error": "not finite: b, c",
    }
    assert "NaN" not in json_text(obj) and strict(json_text(obj))["c"] == [1.0, None]
    csv = Table([{"run": "r", "loss": math.nan}]).to_csv().splitlines()
    assert csv == ["run,loss,error", "r,,not finite: loss"]


# ---- damaged inputs ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory, hf_tokenizer):
    """A tiny Llama and a tiny T5, saved with the test tokenizer."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("hf")
    llama = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    )
    llama.vocab_size, llama.max_position_embeddings = 300, 64
    t5 = transformers.T5Config(
        d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=300, decoder_start_token_id=0
    )
    models = {
        "llama": transformers.AutoModelForCausalLM.from_config(llama),
        "t5": transformers.T5ForConditionalGeneration(t5),
    }
    for name, model in models.items():
        model.save_pretrained(root / name)
        hf_tokenizer.save_pretrained(root / name)
    return root


@pytest.mark.parametrize(
    "name,damage,fragment",
    [
        ("llama", ("model.safetensors", b"garbage"), "cannot load a model"),
        ("llama", ("tokenizer.json", b'{"x'), "no usable tokenizer"),
        ("llama", ("config.json", b'{"model_type": "llama", "hidden_size": "x"}'), "cannot read"),
        ("t5", ("model.safetensors", b"\x00" * 100), "cannot load a T5"),
    ],
)
def test_a_damaged_hf_folder_is_one_line(name, damage, fragment, hf_dirs, tmp_path, capsys):
    folder = tmp_path / name
    shutil.copytree(hf_dirs / name, folder)
    (folder / damage[0]).write_bytes(damage[1])
    command = "eval" if name == "llama" else "align"
    refused(capsys, [command, f"hf:{folder}", "--lengths", "32", "--device", "cpu"], fragment)


@pytest.mark.parametrize("section,key", [("train", "train_length"), ("model", "pe")])
def test_a_run_config_without_its_length_or_scheme_is_refused(section, key, run, tmp_path, capsys):
    d = tmp_path / "run"
    shutil.copytree(run, d)
    cfg = json.loads((d / "config.json").read_text())
    del cfg[section][key]
    (d / "config.json").write_text(json.dumps(cfg))
    refused(capsys, ["eval", d, "--lengths", "64"], f"{section}.{key} is missing")
    if key == "train_length":  # theory reads the bias alone: it says which L_train it assumed
        rc, _, err = cli(capsys, ["theory", "--checkpoint", d])
        assert rc == 0 and any("L_train = 512 assumed" in line for line in err)


# ---- conflicting flags and unbounded work -----------------------------------------------------------
def test_window_and_cache_window_must_agree(run, capsys):
    refused(capsys, ["eval", run, "--lengths", "64", "--window", "32", "--cache-window", "64"], "give one")
    refused(capsys, ["eval", run, "--lengths", "64", "--window", "auto", "--cache-window", "8"], "give one")
    rc, out, _ = cli(capsys, ["eval", run, "--lengths", "64", "--tokens", "64", "--window", "8", "--cache-window", "8"])
    assert rc == 0 and "window=8" in out


@pytest.mark.parametrize("window", [None, 5])
def test_prefill_in_blocks_equals_token_by_token(window, monkeypatch):
    from extrap.model import GPT, ModelConfig
    from extrap.model import generate as gen

    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=32, n_head=4)).eval()
    prompt = torch.randint(0, 256, (1, 40))
    cache = model.new_cache(window)
    one = [gen.step_logits(model, prompt[:, p], p, cache) for p in range(40)][-1]
    monkeypatch.setattr(gen, "PREFILL_BLOCK", 16)
    blocked = model.new_cache(window)
    torch.testing.assert_close(gen.prefill(model, prompt, blocked), one, rtol=1e-5, atol=1e-5)
    for a, b in zip(cache.layers, blocked.layers):
        torch.testing.assert_close(a.keys, b.keys)
    calls = []
    step = model.step
    monkeypatch.setattr(model, "step", lambda *a, **kw: calls.append(a[0].shape[1]) or step(*a, **kw))
    out = gen.generate(model, torch.randint(0, 256, (1, 3000)), 5, cache_window=window)
    assert out.shape == (1, 3005) and len(calls) == 3000 // 16 + 1 + 5  # blocks, not 3000 steps


def test_hf_prefill_equals_token_by_token_and_warns_nothing(hf_dirs, capfd, recwarn):
    import extrap
    from extrap.model import generate as gen

    model = extrap.load(f"hf:{hf_dirs / 'llama'}", device="cpu").model
    prompt = torch.randint(0, 300, (1, 30))
    cache = model.new_cache(None)
    one = [gen.step_logits(model, prompt[:, p], p, cache) for p in range(30)][-1]
    torch.testing.assert_close(gen.prefill(model, prompt, model.new_cache(None)), one, rtol=1e-4, atol=1e-4)
    capfd.readouterr()
    assert main(["generate", f"hf:{hf_dirs / 'llama'}", "--tokens", "3", "--device", "cpu"]) == 0
    err = capfd.readouterr().err
    assert "deprecated" not in err and not [w for w in recwarn if "deprecated" in str(w.message)], err


def test_generation_states_its_time(run, caplog, monkeypatch):
    import extrap
    from extrap.model import generate as gen

    monkeypatch.setattr(gen, "STATE_AFTER", 0.0)
    model = extrap.load(run).model
    with caplog.at_level("INFO", logger="extrap"):
        gen.generate(model, torch.tensor([[1, 2, 3]]), 30)
    assert any("generating 30 tokens at" in r.getMessage() for r in caplog.records)


def test_long_evaluations_state_their_time_first(run, capsys, monkeypatch):
    import extrap.cost

    monkeypatch.setattr(extrap.cost, "matmul_rate", lambda device="cpu": 1e9)
    rc, _, err = cli(capsys, ["eval", run, "--lengths", "500000"])
    assert rc == 2 and "needs about" in err[0] and "at least" in err[0], err  # stated, then the corpus is short
    assert extrap.cost.duration(7200) == "2.0 h" and extrap.cost.duration(30) == "30 s"


def test_caps_refuse_before_any_work(run, capsys):
    t0 = time.perf_counter()
    refused(capsys, ["generate", run, "--tokens", "100000000000"], "--tokens", "[0, 1000000]")
    refused(capsys, ["task", "sample", "--task", "line", "--length", "100000000"], "longest example", "131,072")
    refused(capsys, ["task", "sample", "--task", "passkey", "--length", "2000000"], "1,048,576")
    refused(capsys, ["task", "score", run, "--task", "line", "--lengths", "200000"], "longest example")
    refused(capsys, ["eval", run, "--lengths", "20000000"], "at most 1e+07")
    assert time.perf_counter() - t0 < 30


# ---- rough edges ------------------------------------------------------------------------------------
def test_theory_points_a_checkpoint_to_checkpoint(run, capsys):
    refused(capsys, ["theory", "hf:/some/model"], "--checkpoint hf:/some/model")
    refused(capsys, ["theory", run], f"--checkpoint {run}")
    refused(capsys, ["theory", "foo("], "malformed formula")


def test_t5_eval_is_refused_and_its_length_stated(hf_dirs, capsys):
    t5 = f"hf:{hf_dirs / 't5'}"
    for command in ("eval", "generate"):
        refused(capsys, [command, t5, "--device", "cpu"], "encoder-decoder", "extrap align", "extrap task score")
    rc, out, err = cli(capsys, ["align", t5, "--lengths", "64", "--segments", "1", "--device", "cpu"])
    assert rc == 0 and any("L_tr = 512 assumed (t5 default (512))" in line for line in err), err
    assert "L_ex < L_tr" in out


# ---- hostile values for every flag ------------------------------------------------------------------
HOSTILE = [
    (["eval", "RUN", "--device", "cuda:-1"], "--device"),
    (["eval", "RUN", "--device", ""], "--device"),
    (["align", "RUN", "--device", "mps"], "--device"),
    (["generate", "RUN", "--device", "tpu"], "--device"),
    (["task", "score", "RUN", "--device", "cuda:x"], "--device"),
    (["study", "--device", "gpu"], "--device"),
    (["eval", "RUN", "--window", "-3"], "--window"),
    (["eval", "RUN", "--window", "abc"], "--window"),
    (["eval", "RUN", "--cache-window", "0"], "--cache-window"),
    (["generate", "RUN", "--cache-window", "-1"], "--cache-window"),
    (["generate", "RUN", "--tokens", "-1"], "--tokens"),
    (["generate", "RUN", "--tokens", "1e3"], "--tokens"),
    (["generate", "RUN", "--seed", str(2**70)], "--seed"),
    (["generate", "RUN", "--prompt", ""], "--prompt"),
    (["train", "--out", "NEW", "--seed", str(-(2**70))], "--seed"),
    (["task", "sample", "--task", "passkey", "--length", "200", "--seed", "1.5"], "--seed"),
    (["task", "sample", "--task", "passkey", "--length", "-5"], "--length"),
    (["task", "sample", "--task", "passkey", "--length", "200", "--depth", "nan"], "depth"),
    (["eval", "RUN", "--lengths", "nan"], "--lengths"),
    (["eval", "RUN", "--lengths", ""], "--lengths"),
    (["eval", "RUN", "--lengths", "64", "--temperature", "nan"], "--temperature"),
    (["eval", "RUN", "--lengths", "64", "--temperature", "-1"], "--temperature"),
    (["eval", "RUN", "--lengths", "64", "--temperature", "1,2,3"], "3 values"),
    (["eval", "RUN", "--lengths", "64", "--temperature", "auto", "--align-mode", "bogus"], "alignment mode"),
    (["eval", "RUN", "--lengths", "64", "--rope", "linear", "--factor", "inf"], "--factor"),
    (["eval", "RUN", "--lengths", "64", "--train-length", "64"], "only for hf"),
    (["eval", "RUN", "--lengths", "64", "--eps", "1"], "--eps"),
    (["eval", "RUN", "--lengths", "64", "--delta", "-0.1"], "--delta"),
    (["eval", "RUN", "--lengths", "64", "--tokens", "10"], "--tokens"),
    (["eval", "RUN", "--file", "/nonexistent/text"], "cannot read"),
    (["eval", "RUN", "--file", "/nonexistent/text", "--lengths", "64"], "not with --file"),
    (["align", "RUN", "--grid", "nan"], "temperature"),
    (["align", "RUN", "--grid", "0.9,-1"], "temperature"),
    (["align", "RUN", "--max-length", "10", "--lengths", "64"], "capped"),
    (["align", "RUN", "--per-layer", "--mode", "prop1"], "--per-layer"),
    (["erf", "RUN", "--threshold", "1"], "--threshold"),
    (["erf", "RUN", "--plot", "/dev/null"], "--plot"),
    (["theory", "alibi", "--plot", "/dev/null"], "--plot"),
    (["theory", "alibi", "--heads", "2000"], "--heads"),
    (["theory", "alibi", "--eps", "nan"], "--eps"),
    (["task", "score", "RUN", "--task", "passkey", "--temperature", "auto:bogus"], "--temperature"),
    (["task", "score", "RUN", "--task", "passkey", "--buckets", "0"], "--buckets"),
    (["study", "--jobs", "0"], "--jobs"),
    (["study", "--tasks", "passkey"], "--tasks"),
    (["corpus", "prepare", "--tokenizer", "bpe:5"], "V >= 257"),
]


@pytest.mark.parametrize("argv,fragment", HOSTILE, ids=[" ".join(a[:1] + a[2:])[:60] for a, _ in HOSTILE])
def test_hostile_values_are_one_line(argv, fragment, run, tmp_path, capsys):
    names = {"RUN": str(run), "NEW": str(tmp_path / "new")}
    refused(capsys, [names.get(a, a) for a in argv], fragment)


# ---- hostile values for the commands of the last two waves ------------------------------------------
# RoPE variants, position frequency, --extend, RULER tasks, LongPPL, the survey encodings, theory of an hf:
# config.  Each case ends with exit 0 or 2, at most one error line, no traceback, within CASE_SECONDS.
CASE_SECONDS = 30
GIB = 1 << 30
HF_CONFIGS = {  # config.json of a hostile hf: folder, and what the one line must name
    "max-pos": ({"max_position_embeddings": 1e308}, "max_position_embeddings"),
    "yarn-factor": ({"rope_scaling": {"rope_type": "yarn", "factor": 1e308}}, "factor"),
    "heads-0": ({"num_attention_heads": 0}, "num_attention_heads"),
    "original-0": (
        {"rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0}},
        "original_max_position_embeddings",
    ),
    "head-dim": ({"head_dim": 100000000}, "head dimension 100,000,000"),
    "scaling-list": ({"rope_scaling": [1, 2]}, "rope_scaling"),
    "theta-string": ({"rope_theta": "big"}, "rope_theta"),
}
TRAIN = ["train", "--out", "NEW", "--preset", "smoke", "--steps", "1", "--pe"]
THEORY_ROPE = ["theory", "--head-dim", "64"]
EXTEND = ["theory", "--train-length", "64", "--length", "128", "--extend"]
SAMPLE = ["task", "sample", "--length", "512", "--task"]
NEW_HOSTILE = [
    ([*THEORY_ROPE, "rope:p=0"], None),
    ([*THEORY_ROPE, "rope:p=1.5"], None),
    ([*THEORY_ROPE, "rope:partial=nan"], None),
    ([*THEORY_ROPE, "rope:partial=0.01"], None),
    ([*THEORY_ROPE, "rope:resonance=2"], None),
    ([*THEORY_ROPE, "rope:base=1"], None),
    ([*THEORY_ROPE, "rope:scaling=longrope,factor=4"], "original_max_position"),
    ([*THEORY_ROPE, "rope:scaling=longrope,factor=4,original_max_position=64,short_factor=1/2"], None),
    ([*THEORY_ROPE, "rope:scaling=longrope,factor=-1,original_max_position=64"], None),
    ([*THEORY_ROPE, "rope", "--pretrain-base", "nan"], None),
    ([*THEORY_ROPE, "rope", "--tune-length", "0"], None),
    (["theory", "rope", "--head-dim", "3"], None),
    (["theory", "rope", "--head-dim", "100000000"], "head dimension 100,000,000"),
    (["theory", "rope:p=0.5", "--head-dim", str(2**62)], "bytes per rotary pair"),
    (["corpus", "position-frequency", "stdlib", "--train-length", "0"], None),
    (["corpus", "position-frequency", "stdlib", "--train-length", "1e400"], None),
    (["corpus", "position-frequency", "stdlib", "--train-length", "64", "--fraction", "nan"], None),
    (["corpus", "position-frequency", "nonexistent", "--train-length", "64"], None),
    ([*EXTEND, "bogus"], None),
    ([*EXTEND, "sinks:n=-1"], None),
    ([*EXTEND, "self-extend:group=0,window=8"], None),
    ([*EXTEND, "self-extend:group=4,window=1e9"], None),
    ([*EXTEND, "rerope:window=nan"], None),
    ([*EXTEND, "sinks", "--head-dim", str(2**62)], "bytes per rotary pair"),
    (["eval", "RUN", "--lengths", "32", "--extend", "bogus"], None),
    (["eval", "RUN", "--lengths", "32", "--extend", "sinks:n=1e30"], None),
    ([*SAMPLE, "niah_single", "--param", "x=1"], None),
    ([*SAMPLE, "vt", "--param", "num_hops=0"], None),
    ([*SAMPLE, "vt", "--param", "num_hops=nan"], None),
    ([*SAMPLE, "qa1", "--param", "facts=1e9"], None),
    ([*SAMPLE, "niah_multikey_3", "--depth", "2"], None),
    ([*SAMPLE, "fwe", "--param", "alpha=1"], None),
    ([*SAMPLE, "fwe", "--param", "alpha=10"], "no length fits; lower alpha"),
    (["task", "sample", "--task", "cwe", "--length", "131072"], "raise --param freq_ucw"),
    (["task", "sample", "--task", "qa2", "--length", str(2**70)], None),
    (["task", "score", "RUN", "--task", "vt", "--lengths", "256", "--param", "num_chains=17"], None),
    (["eval", "RUN", "--lengths", "32", "--longppl", "--evaluator", "/nonexistent"], None),
    (["eval", "RUN", "--lengths", "32", "--longppl", "--longppl-block", "0"], None),
    (["eval", "RUN", "--lengths", "32", "--longppl", "--longppl-alpha", "nan"], None),
    ([*TRAIN, "shaw:k=1e9"], "parameters with AdamW state"),
    ([*TRAIN, "cape-ctx:hidden=1e9"], "needs at least"),
    ([*TRAIN, "tisa:kernels=1e7"], "tisa's own work"),
    ([*TRAIN, "floater", "--positions", "randomized:max=1000000000"], "floater's own work"),
    ([*TRAIN, "complex", "--positions", "randomized:max=1000000000"], "randomized:max=1000000000 positions"),
    ([*TRAIN, "cope:npos=1e12"], None),
    ([*TRAIN, "bipe:max_positions=1e12"], None),
    ([*TRAIN, "cape-ctx:base=bogus"], None),
    ([*TRAIN, "floater:substeps=0"], None),
    *[(["theory", "--checkpoint", f"HF:{name}"], fragment) for name, (_, fragment) in HF_CONFIGS.items()],
    (["theory", "--checkpoint", "HF:nested"], "nests too deeply"),
]


class _Hang(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in the command swallows it."""


def _hf_folder(root, name):
    folder = root / name
    folder.mkdir()
    if name == "nested":
        (folder / "config.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
        return folder
    base = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
    base.update(max_position_embeddings=4096, rope_theta=10000.0)
    config = {**base, **HF_CONFIGS[name][0]}
    if isinstance(config.get("rope_scaling"), dict):
        config["rope_scaling"] = {"original_max_position_embeddings": 4096, **config["rope_scaling"]}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("argv,fragment", NEW_HOSTILE, ids=[" ".join(a)[:70] for a, _ in NEW_HOSTILE])
def test_new_commands_take_hostile_values(argv, fragment, run, tmp_path, capsys, monkeypatch):
    """Exit 0 or 2, one error line at most, no traceback, no hang; memory bounds judged against a fixed 16 GiB."""
    import signal

    import extrap.memory

    monkeypatch.setattr(extrap.memory, "available_bytes", lambda: 16 * GIB)
    names = {"RUN": str(run), "NEW": str(tmp_path / "new")}
    argv = [names.get(a, a) for a in argv]
    argv = [f"hf:{_hf_folder(tmp_path, a[3:])}" if a.startswith("HF:") else a for a in argv]

    def hang(*_):
        raise _Hang(f"{argv} ran past {CASE_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        rc, _, err = cli(capsys, argv)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    errors = [line for line in err if line.startswith("extrap: error:")]
    assert rc in (0, 2) and not any("Traceback" in line for line in err), (rc, err)
    assert len(errors) == (rc == 2), err
    if fragment is not None:
        assert rc == 2 and fragment in errors[0], (fragment, errors)
    assert not (tmp_path / "new").exists()  # a refused train made no run


def test_training_memory_parts_are_lower_bounds():
    """The meta-device count is the real parameter count, and floater's bound is below what autograd keeps."""
    from extrap import positional
    from extrap.memory import parameter_count
    from extrap.model import GPT
    from extrap.train import build_configs

    for pe in ("shaw:k=40", "cape-ctx:hidden=48", "tisa:kernels=7", "complex"):
        m, _ = build_configs(pe, "smoke")
        assert parameter_count(lambda m=m: GPT(m)) == sum(p.numel() for p in GPT(m).parameters()), pe
    pytest.importorskip("torchdiffeq")
    m, _ = build_configs("floater", "smoke")
    flow = [x for x in GPT(m).modules() if type(x).__name__ == "FloaterFlow"][0]
    kept = {}

    def pack(x):
        kept[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        flow.table(5)  # positions 0..4: 4 x substeps RK4 steps
    bound = positional.get("floater").train_bytes(
        batch=1, length=5, max_position=5, n_head=m.n_head, n_layer=m.n_layer, d_model=m.d_model
    )
    assert 0.5 * sum(kept.values()) < bound <= sum(kept.values())


def test_analyse_rope_refuses_a_head_dim_beyond_memory_from_python(monkeypatch):
    """The Python API is bounded as the CLI is: no allocation is attempted for 10^8 rotary dimensions."""
    from extrap import memory
    from extrap.errors import ExtrapError
    from extrap.theory.rope import analyse_rope

    monkeypatch.setattr(memory, "available_bytes", lambda *a, **k: 16 * 2**30)
    with pytest.raises(ExtrapError, match="head dimension 100,000,000"):
        analyse_rope("rope", 100_000_000, 64, 128)


# ---- flags accepted and then ignored: each is applied, or refused in one line ------------------------
@pytest.fixture(scope="module")
def rotary_runs(tmp_path_factory):
    """A rope run and a bipe run (L_tr = 32), a few smoke steps on stdlib source."""
    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("rotary")
    for pe in ("rope", "bipe"):
        m, t = build_configs(pe, "smoke", overrides=dict(steps=8, train_length=32))
        train(root / pe, m, t, progress=False)
    return root


RULER = ["--lengths", "256", "--n", "4", "--score", "greedy", "--threshold", "abs:0.5", "--details", "--json"]


@pytest.mark.parametrize("which", [["--task", "niah_single"], ["--suite", "ruler", "--tasks", "niah_single"]])
def test_extend_is_applied_on_the_ruler_path(which, rotary_runs, capsys, monkeypatch):
    """The model that scores carries sinks:n=0,window=2 (each query sees 2 keys, so its logits at 256 tokens
    differ from plain RoPE's), the JSON names the method, and the CLI scores what the Python API scores."""
    import extrap
    import extrap.tasks.ruler as ruler
    from extrap.extend import extend_run

    scored, score = [], ruler.score_ruler
    monkeypatch.setattr(ruler, "score_ruler", lambda model, *a: scored.append(model) or score(model, *a))
    argv = ["task", "score", rotary_runs / "rope", *which, *RULER]
    rc, out, _ = cli(capsys, argv)
    plain = strict(out)
    rc2, out, _ = cli(capsys, [*argv, "--extend", "sinks:n=0,window=2"])
    ext = strict(out)
    assert rc == rc2 == 0 and plain["pe"] == "rope" and "rope" not in plain
    assert ext["pe"] == "rope+sinks:n=0,window=2" and ext["rope"]["extend"] == "sinks:n=0,window=2"
    x = torch.randint(0, 256, (1, 256))
    with torch.no_grad():
        assert scored[0].extension is None and scored[1].extension.method.spec == "sinks:n=0,window=2"
        assert not torch.allclose(scored[0](x).logits, scored[1](x).logits, atol=1e-3)
    run = extrap.load(rotary_runs / "rope")
    extend_run(run, "sinks:n=0,window=2")
    s = ruler.RulerSettings(["niah_single"], [256], 32, n=4, method="greedy", threshold="abs:0.5", filler=run.corpus)
    api = score(run.model, run.tokenizer, replace(s, details=True)).to_json()
    assert ext["examples"] == api["examples"]  # seed, depth, answer, prediction and score of each example


def test_extend_on_the_ruler_path_is_refused_where_it_cannot_apply(run, rotary_runs, tmp_path, capsys):
    out = tmp_path / "r.json"
    task = ["--task", "niah_single", "--lengths", "256", "--n", "2", "--out", out]
    refused(capsys, ["task", "score", run, *task, "--extend", "rerope"], "rotary model", "alibi")
    rope = rotary_runs / "rope"
    refused(capsys, ["task", "score", rope, *task, "--extend", "rerope", "--rope", "linear", "--factor", "2"], "--rope")
    assert not out.exists()


FLAGS_WITHOUT_EFFECT = [
    (["theory", "--extend", "rerope", "--train-length", "64", "--length", "200", "--plot", "NEW"], "--plot"),
    (["theory", "--extend", "rerope", "--train-length", "64", "--length", "200", "--tune-length", "300"], "--tune"),
    (["theory", "--extend", "rerope", "--train-length", "64", "--length", "200", "--eps", "1e-3"], "--eps"),
    (["theory", "--extend", "rerope", "--train-length", "64", "--length", "200", "--heads", "2"], "--heads"),
    (["theory", "--extend", "rerope", "--train-length", "64", "--length", "200", "--pretrain-base", "1e4"], "--pre"),
    (["theory", "alibi", "--head-dim", "64"], "--head-dim"),
    (["theory", "rope", "--length", "900"], "--length"),
    (["theory", "rope", "--tune-length", "900"], "--tune-length"),
    (["theory", "rope", "--plot", "NEW"], "--plot"),
    (["theory", "alibi", "--compare"], "--compare"),
    (["theory", "--checkpoint", "RUN", "--heads", "3"], "--heads"),
    (["theory", "--checkpoint", "RUN", "--compare"], "--compare"),
    (["theory", "--checkpoint", "RUN", "--plot", "NEW"], "--plot"),
    (["theory", "--checkpoint", "RUN", "--length", "300"], "--length"),
    (["eval", "BIPE", "--lengths", "64", "--window", "32"], "--window 32"),
    (["eval", "BIPE", "--lengths", "64", "--cache-window", "32"], "--window 32"),
    (["eval", "RUN", "--lengths", "64", "--longppl", "--evaluator", ""], "--evaluator"),
    (["eval", "RUN", "--lengths", "64", "--evaluator", ""], "--evaluator"),
    (["eval", "RUN", "--lengths", "64", "--stride", "8"], "--stride"),
    (["eval", "RUN", "--lengths", "64", "--protocol", "sliding", "--targets", "8"], "--targets"),
    (["eval", "RUN", "--lengths", "64", "--protocol", "last-token", "--tokens", "128"], "--tokens"),
    (["eval", "RUN", "--lengths", "64", "--window", "16", "--eps", "0.1"], "--eps"),
    (["eval", "RUN", "--lengths", "64", "--align-mode", "entropy"], "--align-mode"),
    (["eval", "RUN", "--lengths", "64", "--temperature", "auto:entropy", "--align-mode", "pmax"], "--align-mode"),
    (["eval", "RUN", "--file", "TEXT", "--temperature", "1.2"], "--temperature"),
    (["eval", "RUN", "--file", "TEXT", "--protocol", "sliding"], "--protocol"),
    (["eval", "RUN", "--file", "TEXT", "--delta", "0.1"], "--delta"),
    (["task", "sample", "--task", "vt", "--length", "256", "--param", "num_hops=2", "--param", "num_hops=3"], "twice"),
    (["task", "score", "RUN", "--task", "vt", "--param", "num_hops=2", "--param", "num_hops=3"], "twice"),
    (["erf", "RUN", "--kind", "attn", "--threshold", "0.9"], "--threshold"),
    (["erf", "RUN", "--kind", "grad", "--eps", "0.1"], "--eps"),
    (["align", "RUN", "--mode", "prop1", "--grid", "1,0.9"], "--grid"),
    (["align", "RUN", "--mode", "log-length", "--no-refine"], "--no-refine"),
    (["generate", "RUN", "--seed", "3"], "--seed"),
    (["study", "--experiment", "alignment", "--delta", "0.1", "--out", "NEW"], "--delta"),
]


@pytest.mark.parametrize(
    "argv,fragment", FLAGS_WITHOUT_EFFECT, ids=[" ".join(a[:1] + a[2:])[:60] for a, _ in FLAGS_WITHOUT_EFFECT]
)
def test_a_flag_without_effect_is_refused(argv, fragment, run, rotary_runs, tmp_path, capsys):
    """Each of these exited 0 with the flag silently dropped; now: one line, exit 2, nothing written."""
    text = tmp_path / "text.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 20)
    names = {"RUN": str(run), "BIPE": str(rotary_runs / "bipe"), "NEW": str(tmp_path / "new"), "TEXT": str(text)}
    csv = ["--csv", tmp_path / "out.csv"] if argv[0] != "study" else []
    refused(capsys, [*(names.get(a, a) for a in argv), *csv], fragment)
    assert not (tmp_path / "new").exists() and not (tmp_path / "out.csv").exists()


# ---- wording (issue 28 §6-7) ------------------------------------------------------------------------
def test_pe_cape_points_to_cape_ctx_and_the_2021_augmentation(tmp_path, capsys):
    """`--pe cape` suggested the unrelated 'cope'; it names 'cape-ctx' and says what sinusoidal:cape=1 is."""
    line = refused(capsys, ["train", "--pe", "cape", "--out", tmp_path / "new"], "'cape-ctx'", "'sinusoidal:cape=1'")
    assert "'cope'" not in line and not (tmp_path / "new").exists()


def _training_entropy(run_dir):
    """H of the run's training tokens, summed here from a Counter (independent of study.learning's bincount)."""
    from collections import Counter

    from extrap.data import load_corpus, load_tokenizer, token_stream
    from extrap.run import RunDir

    ids = token_stream(load_corpus(RunDir(run_dir).read_config().train.corpus), load_tokenizer(run_dir), "train")
    counts = Counter(ids.tolist())
    return -sum(c / len(ids) * math.log(c / len(ids)) for c in counts.values())


@pytest.mark.parametrize("protocol", ["nonoverlapping", "last-token"])
def test_eval_gives_no_verdict_for_a_model_that_did_not_learn(protocol, run, capsys):
    """The 30-step smoke run sits above the unigram entropy; eval said "extrapolates" (issue 28 §7)."""
    sizes = ["--targets", "8"] if protocol == "last-token" else ["--tokens", "256"]
    argv = ["eval", run, "--lengths", "32,64", "--protocol", protocol, *sizes]
    rc, out, _ = cli(capsys, [*argv, "--json"])
    report = strict(out)
    H, loss = _training_entropy(run), report["results"][0]["loss"]
    assert rc == 0 and loss > 0.8 * H  # the premise: not learned by the study's gate
    assert report["extrapolates"] is None and report["within_noise"] is None and report["worst_ratio"] is not None
    reason = report["verdict_reason"]
    assert (
        reason.startswith(f"not learned: loss {loss:.3f} nats at L_tr = 32")
        and f"entropy of the training tokens of {H:.3f}" in reason
    )
    rc, out, _ = cli(capsys, argv)
    assert rc == 0 and f"no verdict ({reason})" in out and "extrapolates" not in out.splitlines()[-1]


def test_eval_keeps_the_verdict_of_a_model_that_learned(run, capsys, monkeypatch):
    """The same run, with the gate's fraction raised so that its loss counts as learned: the verdict stands."""
    import extrap.study.learning

    monkeypatch.setattr(extrap.study.learning, "LEARNED_FRACTION", 10.0)
    rc, out, _ = cli(capsys, ["eval", run, "--lengths", "32,64", "--tokens", "256", "--json"])
    report = strict(out)
    assert rc == 0 and report["extrapolates"] is not None and report["verdict_reason"] is None


def test_top_level_help_lists_the_ruler_tasks(capsys):
    """`extrap --help` said "passkey, line, topic"; it lists every task of the RULER registry too."""
    from extrap.commands.task_ruler import RULER_NAMES
    from extrap.tasks.ruler.registry import RULER_TASKS

    assert RULER_NAMES == RULER_TASKS  # the help's torch-free copy is the registry's list
    rc, out, _ = cli(capsys, ["--help"])
    line = " ".join(out[out.index("    task ") :].split())
    assert rc == 0 and all(f" {t}," in line or f" {t} (" in line for t in ("passkey", *RULER_TASKS)), line


README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")


def test_the_readme_train_synopsis_has_every_train_option():
    """--threads (and --batch-size, --grad-accum, --lr, --device) were missing from the README's synopsis."""
    from extrap.cli import build_parser

    text = open(README, encoding="utf-8").read()
    synopsis = text[text.index("extrap train --pe PE --out RUN_DIR") : text.index("extrap eval RUN_DIR")]
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    options = [o for a in train._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    assert [o for o in options if o not in synopsis] == []


def test_the_smoke_study_folder_is_ignored_by_git():
    lines = open(os.path.join(os.path.dirname(README), ".gitignore"), encoding="utf-8").read().split()
    assert "/study-smoke/" in lines
