"""Training progress without a terminal (log lines), and TensorBoard only when asked for."""

import fcntl
import json
import logging
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import tomllib
import types
from pathlib import Path

import pytest

from extrap.cli import main
from extrap.progress import StepProgress, duration
from extrap.train import build_configs, train

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
LINE = re.compile(r"^train: step (\d+)/(\d+) \(\d+%\)  loss (\d+\.\d+)  ([\d,]+) tok/s  ETA (\S+)$")


def _train_cmd(out, corpus, *extra):
    return [sys.executable, "-m", "extrap.cli", "train", "--pe", "alibi", "--preset", "smoke", "--steps", "6",
            "--train-length", "32", "--threads", "1", "--corpus", corpus, "--out", str(out), *extra]  # fmt: skip


def test_training_into_a_pipe_logs_step_loss_speed_and_eta(tmp_path, tiny_text):
    proc = subprocess.run(_train_cmd(tmp_path / "r", tiny_text), env=ENV, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = [LINE.match(x) for x in proc.stderr.splitlines()]
    assert lines and all(lines), proc.stderr  # every stderr line is a progress line, none a bar's redraw
    steps = [int(m.group(1)) for m in lines]
    assert steps[0] == 1 and steps[-1] == 6 and {int(m.group(2)) for m in lines} == {6}
    final = json.loads((tmp_path / "r" / "final.json").read_text())
    assert float(lines[-1].group(3)) == pytest.approx(final["final_loss"], abs=1e-4)
    assert int(lines[-1].group(4).replace(",", "")) > 0 and lines[-1].group(5) == "0s"


def _on_terminal(argv: list[str], columns: int) -> tuple[int, str]:
    """Run ``argv`` with stderr on a pseudo-terminal ``columns`` wide; its exit status and what the terminal got."""
    main_fd, term_fd = pty.openpty()
    fcntl.ioctl(term_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(argv, stderr=term_fd, stdout=subprocess.DEVNULL, env=ENV)
    os.close(term_fd)
    seen = b""
    while True:  # read while it runs: a full terminal buffer would block the child
        if select.select([main_fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(main_fd)
    return proc.wait(timeout=60), seen.decode("utf-8", "replace")


def test_training_on_a_terminal_draws_a_bar(tmp_path, tiny_text):
    code, seen = _on_terminal(_train_cmd(tmp_path / "r", tiny_text), columns=120)
    assert code == 0, seen
    redraws = [x for x in seen.split("\r") if "/6 [" in x]  # tqdm redraws the bar in place after a carriage return
    assert len(redraws) >= 2 and "6/6" in redraws[-1] and "loss=" in redraws[-1] and "tok_s=" in redraws[-1]
    assert "train: step" not in seen  # no log lines beside the bar


def test_a_terminal_of_zero_columns_gets_the_lines(tmp_path, tiny_text):
    code, seen = _on_terminal(_train_cmd(tmp_path / "r", tiny_text), columns=0)  # a bar would be drawn empty
    assert code == 0, seen
    steps = [int(m.group(1)) for m in map(LINE.match, seen.replace("\r", "").splitlines()) if m]
    assert steps[0] == 1 and steps[-1] == 6, seen


def test_json_into_a_pipe_keeps_stderr_quiet(tmp_path, tiny_text):
    proc = subprocess.run(_train_cmd(tmp_path / "r", tiny_text, "--json"), env=ENV, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["step"] == 6


def test_lines_are_throttled_to_one_per_interval(caplog):
    now = [0.0]
    p = StepProgress(total=100, start=0, tokens_per_step=1000, every=30.0, terminal=False, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="extrap.progress"):
        for step in range(1, 101):
            now[0] += 1.0  # one second per step
            p.update(step, 2.0)
    logged = [LINE.match(r.getMessage()) for r in caplog.records]
    assert [int(m.group(1)) for m in logged] == [1, 31, 61, 91, 100]
    assert [m.group(4) for m in logged] == ["1,000"] * 5  # 1000 tokens per one-second step
    assert logged[0].group(5) == "1m39s" and logged[2].group(5) == "39s"  # 99 and 39 steps of 1 s left


def test_duration_is_short():
    assert [duration(s) for s in (0, 59.4, 61, 3600, 7500)] == ["0s", "59s", "1m01s", "1h00m", "2h05m"]


class _Writer:
    """Stands in for TensorBoard's SummaryWriter: records what it is given."""

    made: list = []

    def __init__(self, log_dir):
        self.log_dir, self.scalars = log_dir, []
        _Writer.made.append(self)

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, step))

    def close(self):
        pass


@pytest.fixture
def fake_tensorboard(monkeypatch):
    module = types.ModuleType("torch.utils.tensorboard")
    module.SummaryWriter = _Writer
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", module)
    _Writer.made = []
    return _Writer


def test_tensorboard_is_written_only_when_asked_for(tmp_path, tiny_text, fake_tensorboard):
    m, t = build_configs("alibi", "smoke", overrides=dict(steps=4, log_every=2, train_length=32, corpus=tiny_text))
    train(tmp_path / "plain", m, t, progress=False)
    assert fake_tensorboard.made == [] and not (tmp_path / "plain" / "tb").exists()
    m, t = build_configs("alibi", "smoke", overrides=dict(steps=4, log_every=2, train_length=32, corpus=tiny_text))
    train(tmp_path / "tb", m, t, progress=False, tensorboard=True)
    (writer,) = fake_tensorboard.made
    assert writer.log_dir == str(tmp_path / "tb" / "tb")
    assert writer.scalars == [
        ("train/loss", 2),
        ("train/tokens_per_s", 2),
        ("train/loss", 4),
        ("train/tokens_per_s", 4),
    ]


def test_tensorboard_missing_is_one_line_before_anything_is_written(tmp_path, tiny_text, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # not installed: torch's own import of it fails
    monkeypatch.delitem(sys.modules, "torch.utils.tensorboard", raising=False)
    argv = ["train", "--pe", "alibi", "--preset", "smoke", "--steps", "2", "--corpus", tiny_text]
    assert main([*argv, "--out", str(tmp_path / "r"), "--tensorboard"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'extrap[tensorboard]'" in err and err.startswith("extrap: error:")
    assert not (tmp_path / "r").exists()


def test_tensorboard_is_an_extra_and_a_documented_option(capsys):
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    extra = pyproject["project"]["optional-dependencies"]["tensorboard"]  # the extra the refusal names
    assert [r for r in extra if re.match(r"tensorboard\b", r)]
    assert not any(re.match(r"tensorboard\b", r) for r in pyproject["project"]["dependencies"])  # optional
    assert main(["train", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--tensorboard" in help_text and "extrap[tensorboard]" in help_text and "RUN_DIR/tb" in help_text
