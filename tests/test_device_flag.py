"""``--device`` on every command that runs a model: one meaning (extrap.devices.resolve_device), checked by
argparse before anything is loaded or written, and the model with its inputs on that device."""

from __future__ import annotations

import json

import pytest
import torch

from extrap.cli import main
from extrap.devices import resolve_device
from extrap.errors import ExtrapError

CUDA = torch.cuda.is_available()
# A CUDA device this machine does not have: all of them on a CPU machine, one past the last on a GPU machine.
MISSING_CUDA = f"cuda:{torch.cuda.device_count()}" if CUDA else "cuda"
HOSTILE = [MISSING_CUDA, "banana", "meta", "cuda:x", ""]


def _argv(command: str, run: str, tmp_path) -> tuple[list[str], list]:
    """The command's argv (with every file it could write) and the paths that must not appear."""
    out, csv, plot = tmp_path / "out.json", tmp_path / "out.csv", tmp_path / "plots"
    files = ["--out", str(out), "--csv", str(csv)]
    argv = {
        "train": ["train", "--preset", "smoke", "--steps", "2", "--out", str(tmp_path / "new-run"), "--csv", str(csv)],
        "eval": ["eval", run, "--lengths", "32", *files],
        "align": ["align", run, "--lengths", "64", *files],
        "generate": ["generate", run, "--tokens", "4", "--csv", str(csv)],
        "study": ["study", "--preset", "smoke", "--pe", "alibi", "--out", str(tmp_path / "study")],
        "erf": ["erf", run, "--csv", str(csv), "--plot", str(plot)],
        "task": ["task", "score", run, "--task", "passkey", "--lengths", "160", "--n", "2", *files],
    }[command]
    return argv, [out, csv, plot, tmp_path / "new-run", tmp_path / "study"]


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("command", ["train", "eval", "align", "generate", "study", "erf", "task"])
def test_a_device_that_is_not_here_is_one_line_exit_2_and_writes_nothing(command, name, tiny_runs, tmp_path, capsys):
    argv, paths = _argv(command, str(tiny_runs["alibi"]), tmp_path)
    assert main([*argv, "--device", name]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "--device" in captured.err, captured.err
    assert not any(p.exists() for p in paths)


def test_resolve_device_names_what_it_accepts(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None) == resolve_device("auto") == torch.device("cuda" if CUDA else "cpu")
    for name in ("banana", "meta", "cuda:-1"):
        with pytest.raises(ExtrapError, match="auto, cpu, cuda or cuda:N"):
            resolve_device(name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a machine with 2 GPUs, as far as extrap asks
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ExtrapError, match=r"has 2 CUDA device\(s\): cuda:0..1"):
        resolve_device("cuda:7")


def test_the_help_of_every_model_command_names_the_same_device_choices(capsys):
    for argv in (["train"], ["eval"], ["align"], ["generate"], ["study"], ["erf"], ["task", "score"]):
        assert main([*argv, "--help"]) == 0
        assert "auto | cpu | cuda | cuda:N" in " ".join(capsys.readouterr().out.split()), argv


def _json(capsys, argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _same(a: dict, b: dict, rel: float = 0.0) -> None:
    """Equal reports apart from wall time and the command line (floats within ``rel``)."""
    for key in set(a) | set(b):
        if key in ("seconds", "command"):
            continue
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            _same(x, y, rel)
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for u, v in zip(x, y):
                _same(u, v, rel) if isinstance(u, dict) else _same({"v": u}, {"v": v}, rel)
        elif isinstance(x, float) and isinstance(y, float):
            assert x == pytest.approx(y, rel=rel, abs=rel), key
        else:
            assert x == y, key


EVAL = ["--lengths", "32,64", "--tokens", "256", "--window", "16"]


def test_device_cpu_gives_the_default_results_on_eval_align_and_generate(tiny_runs, tmp_path, capsys):
    run = str(tiny_runs["alibi"])
    _same(_json(capsys, ["eval", run, *EVAL]), _json(capsys, ["eval", run, *EVAL, "--device", "cpu"]))
    text = tmp_path / "book.txt"
    text.write_text("def add(a, b):\n    return a + b\n" * 20, encoding="utf-8")
    scored = ["eval", run, "--file", str(text), "--window", "8"]
    _same(_json(capsys, scored), _json(capsys, [*scored, "--device", "cpu"]))
    align = ["align", run, "--lengths", "64", "--segments", "2"]
    _same(_json(capsys, align), _json(capsys, [*align, "--device", "cpu"]))
    gen = ["generate", run, "--tokens", "8", "--sample", "--seed", "3"]
    _same(_json(capsys, gen), _json(capsys, [*gen, "--device", "auto" if not CUDA else "cpu"]))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_device_cuda_runs_eval_align_and_generate_on_the_gpu(tiny_text, tmp_path, capsys):
    run = str(tmp_path / "run")  # trained on the CPU, as the shared tiny runs are; only evaluated on the GPU
    train = ["train", "--pe", "alibi", "--preset", "smoke", "--steps", "30", "--train-length", "32"]
    assert main([*train, "--corpus", tiny_text, "--out", run, "--device", "cpu", "--json"]) == 0
    capsys.readouterr()
    for extra in (["--backend", "blocked"], []):  # [] : auto, which is FlexAttention on a GPU
        argv = ["eval", run, *EVAL, *extra]
        _same(_json(capsys, argv), _json(capsys, [*argv, "--device", "cuda"]), rel=2e-3)
    last = ["eval", run, "--lengths", "32,64", "--protocol", "last-token", "--targets", "8", "--backend", "blocked"]
    _same(_json(capsys, last), _json(capsys, [*last, "--device", "cuda:0"]), rel=2e-3)
    text = tmp_path / "book.txt"
    text.write_text("def add(a, b):\n    return a + b\n" * 20, encoding="utf-8")
    scored = ["eval", run, "--file", str(text), "--window", "8"]
    _same(_json(capsys, scored), _json(capsys, [*scored, "--device", "cuda"]), rel=2e-3)
    align = ["align", run, "--lengths", "64", "--segments", "2"]
    on_gpu = _json(capsys, [*align, "--device", "cuda"])
    assert [r["length"] for r in on_gpu["lengths"]] == [64] and "error" not in on_gpu["lengths"][0]
    greedy = ["generate", run, "--tokens", "8"]
    assert _json(capsys, [*greedy, "--device", "cuda"])["tokens"] == 8
    assert _json(capsys, [*greedy, "--sample", "--device", "cuda"])["tokens"] == 8
