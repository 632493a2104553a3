"""`extrap train --resume --out RUN` needs no other flag: the run's own config.json gives every setting, and a
flag, preset or config given with it that differs from the run's is refused, naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from extrap.cli import main
from extrap.run import RunDir
from killer import KILLER


def _argv(out, corpus, *extra) -> list[str]:
    return ["train", "--pe", "rope:base=5000", "--preset", "smoke", "--steps", "6", "--save-every", "3",
            "--lr", "0.002", "--train-length", "32", "--corpus", corpus, "--out", str(out), *extra]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory):
    """A cache of this module's own, filled by the first run: a killed run then does the same file-system
    operations each time (a stream cache written by a run elsewhere would shift the k-th one)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXTRAP_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def corpus(stdlib_corpus) -> str:
    return stdlib_corpus


@pytest.fixture(scope="module")
def straight(tmp_path_factory, corpus) -> RunDir:
    out = tmp_path_factory.mktemp("straight") / "run"
    assert main(_argv(out, corpus)) == 0
    return RunDir(out)


@pytest.fixture
def killed(tmp_path, corpus, straight) -> RunDir:
    """The same run killed like kill -9 at its 15th file-system operation, after the checkpoint of step 3
    (``straight`` ran first: the corpus and its token stream are in the cache, not written by this run)."""
    argv = _argv(tmp_path / "run", corpus)
    proc = subprocess.run([sys.executable, "-c", KILLER, "15", *argv], env={**os.environ}, capture_output=True)
    assert proc.returncode == 137, proc.stderr
    run = RunDir(tmp_path / "run")
    assert run.latest().step == 3 and not run.is_finished()
    return run


def test_resume_with_only_out_continues_bit_exact(killed, straight):
    assert main(["train", "--resume", "--out", str(killed.path)]) == 0
    assert killed.read_final().final_loss == straight.read_final().final_loss  # bit-identical
    assert killed.read_config().train == straight.read_config().train


@pytest.mark.parametrize(
    "extra, said",
    [
        (("--lr", "0.5"), "train: lr"),
        (("--pe", "rope"), "model: pe"),
        (("--train-length", "64"), "train: train_length"),
        (("--preset", "cpu"), "model: d_model, n_head, n_layer"),
        (("--preset", "smoke"), "(train: lr, steps, train_length); give --steps N"),  # 30 steps: not extended
        (("--tokenizer", "bpe:300"), "train: tokenizer"),
    ],
)
def test_a_setting_that_differs_from_the_runs_is_refused(extra, said, killed, capsys):
    assert main(["train", "--resume", "--out", str(killed.path), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1, err
    assert killed.latest().step == 3 and not killed.is_finished()


def test_the_same_settings_or_more_steps_are_accepted(killed, straight, corpus, capsys):
    assert main(_argv(killed.path, corpus, "--resume", "--device", "cpu")) == 0  # the original command
    assert killed.read_final().final_loss == straight.read_final().final_loss
    assert main(["train", "--resume", "--out", str(killed.path), "--steps", "8"]) == 0  # trains further
    assert killed.read_final().step == 8 and killed.read_config().train.steps == 8
