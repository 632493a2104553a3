"""Faults that must not lose or block work: foreign files, finished runs, two writers, torn and
incomplete files, a full disk, and a study whose jobs fail."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

import extrap
from extrap.cli import main
from extrap.errors import DiskFullError, ExtrapError
from extrap.io import atomic_write_bytes
from extrap.results import load_results
from extrap.run import RunDir
from extrap.train import build_configs, train
from killer import KILLER


def _train_argv(out, corpus, steps=6, *extra):
    return ["train", "--pe", "alibi", "--preset", "smoke", "--steps", str(steps), "--save-every", "3",
            "--corpus", corpus, "--out", str(out), *extra]  # fmt: skip


def _final_loss(run_dir) -> float:
    return RunDir(run_dir).read_final().final_loss


def test_training_keeps_files_it_did_not_write(tmp_path, tiny_text, capsys):
    out = tmp_path / "run"
    assert main(_train_argv(out, tiny_text)) == 0
    mine = out / "checkpoints" / "my_old_models"
    mine.mkdir()
    (mine / "a.bin").write_bytes(b"x")
    assert main(_train_argv(out, tiny_text, 9, "--resume")) == 0  # writes and cleans up two checkpoints
    assert (mine / "a.bin").read_bytes() == b"x"


def test_a_foreign_folder_is_not_taken_over(tmp_path, tiny_text, capsys):
    out = tmp_path / "photos"
    out.mkdir()
    (out / "holiday.jpg").write_bytes(b"jpeg")
    assert main(_train_argv(out, tiny_text)) == 2
    err = capsys.readouterr().err
    assert "holds no extrap run" in err and err.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == ["holiday.jpg"]
    (tmp_path / "file").write_text("x")
    assert main(_train_argv(tmp_path / "file", tiny_text)) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_failed_start_leaves_no_folder_behind(tmp_path, capsys):
    out = tmp_path / "new"
    assert main(_train_argv(out, f"text:{tmp_path / 'missing'}")) == 2
    assert not out.exists()


def test_resuming_a_finished_run_keeps_its_result(tmp_path, tiny_text, capsys):
    out = tmp_path / "run"
    assert main(_train_argv(out, tiny_text)) == 0
    before = (out / "final.json").read_text()
    assert main(_train_argv(out, tiny_text, 6, "--resume")) == 2
    assert "finished training at step 6" in capsys.readouterr().err
    assert (out / "final.json").read_text() == before
    assert main(_train_argv(out, tiny_text, 9, "--resume")) == 0  # more steps: the run is extended
    final = RunDir(out).read_final()
    assert final.step == 9 and final.final_loss == final.final_loss  # a real loss, not NaN
    assert RunDir(out).read_config().train.steps == 9


def test_a_second_writer_stops_at_once_naming_the_holder(tmp_path, tiny_text, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from extrap.run.lock import exclusive\n"
         "with exclusive(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)", str(out)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(_train_argv(out, tiny_text)) == 2
        err = capsys.readouterr().err
        assert f"in use by process {holder.pid}" in err and err.count("\n") == 1
        assert not (out / "config.json").exists()
    finally:
        holder.send_signal(signal.SIGKILL)  # the kernel drops a dead process's lock: nothing stale remains
        holder.wait()
    assert main(_train_argv(out, tiny_text)) == 0


def test_a_torn_metrics_line_does_not_block_resume(tmp_path, tiny_text):
    m, t = build_configs("alibi", "smoke", overrides=dict(steps=6, save_every=3, log_every=1, corpus=tiny_text))
    train(tmp_path / "straight", m, t, progress=False)
    m, t = build_configs("alibi", "smoke", overrides=dict(steps=6, save_every=3, log_every=1, corpus=tiny_text))
    train(tmp_path / "cut", m, t, progress=False, stop_after=4)  # killed after step 4: checkpoint at 3
    with open(tmp_path / "cut" / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "lo')  # an append cut short
    train(tmp_path / "cut", m, t, resume=True, progress=False)
    assert _final_loss(tmp_path / "cut") == _final_loss(tmp_path / "straight")  # bit-exact
    steps = [r.step for r in RunDir(tmp_path / "cut").read_metrics()]
    assert steps == [1, 2, 3, 4, 5, 6]


@pytest.fixture
def finished_run(tmp_path, tiny_text):
    m, t = build_configs("alibi", "smoke", overrides=dict(steps=3, save_every=3, corpus=tiny_text))
    train(tmp_path / "run", m, t, progress=False)
    return tmp_path / "run"


@pytest.mark.parametrize("damage,needle", [
    ("no-sampler", "incomplete (no sampler)"),
    ("garbage-state", "not a training state"),
    ("truncated-weights", "cannot read"),
    ("latest-outside", "points at '../other/checkpoints/step-0000003'"),
    ("latest-garbage", "corrupt"),
    ("config-list", "does not hold a JSON object"),
    ("config-wrong-type", "config.json: model config: n_head: expected int, got str 'two'"),
    ("config-nan", "config.json: train config: lr: must be a finite number"),
    ("shape-mismatch", "does not match its config: size mismatch"),
])  # fmt: skip
def test_damaged_run_files_give_one_line_naming_the_file(finished_run, tiny_text, capsys, damage, needle):
    import torch

    ckpt = RunDir(finished_run).latest()
    if damage == "no-sampler":
        state = torch.load(ckpt.state, weights_only=True)
        del state["sampler"]
        torch.save(state, ckpt.state)
    elif damage == "garbage-state":
        ckpt.state.write_bytes(b"not a zip file at all")
    elif damage == "truncated-weights":
        ckpt.weights.write_bytes(ckpt.weights.read_bytes()[:100])
    elif damage == "latest-outside":
        (finished_run / "latest.json").write_text(
            json.dumps({"step": 3, "checkpoint": "../other/checkpoints/step-0000003"})
        )
    elif damage == "latest-garbage":
        (finished_run / "latest.json").write_text("{torn")
    elif damage == "config-list":
        (finished_run / "config.json").write_text("[1, 2]")
    elif damage.startswith("config-"):
        cfg = json.loads((finished_run / "config.json").read_text())
        if damage == "config-wrong-type":
            cfg["model"]["n_head"] = "two"
        else:
            cfg["train"]["lr"] = float("nan")
        (finished_run / "config.json").write_text(json.dumps(cfg))
    elif damage == "shape-mismatch":
        from safetensors.torch import load_file, save_file

        weights = load_file(ckpt.weights)
        weights["tok.weight"] = torch.zeros(3, 3)
        save_file(weights, ckpt.weights)
    (finished_run / "final.json").unlink()  # so that resume reads the checkpoint
    rc = main(_train_argv(finished_run, tiny_text, 3, "--resume", "--save-every", "3"))
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and err.count("\n") == 1, err
    assert "weights_only=False" not in err  # never advise unpickling an untrusted file


def test_atomic_write_on_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("extrap.io.os.fsync", full)
    with pytest.raises(DiskFullError, match=f"no space left on device while writing {target}"):
        atomic_write_bytes(target, b"new")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


@pytest.fixture
def small_disk(tmp_path):
    """A 800 kB tmpfs: room for one smoke checkpoint (about 530 kB), not for two."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=800k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_training_on_a_full_disk_stops_cleanly_and_resumes(small_disk, tmp_path, tiny_text, capsys):
    assert main(_train_argv(tmp_path / "straight", tiny_text)) == 0
    out = small_disk / "run"
    assert main(_train_argv(out, tiny_text)) == 2
    err = "".join(x for x in capsys.readouterr().err.splitlines(True) if not x.startswith("train: step"))  # progress
    assert "no space left on device while writing" in err and err.count("\n") == 1, err
    assert RunDir(out).latest().step == 3  # the last complete checkpoint is still the latest
    extrap.load(out)  # and it loads
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)  # space is freed
    assert main(_train_argv(out, tiny_text, 6, "--resume")) == 0
    assert _final_loss(out) == _final_loss(tmp_path / "straight")


def test_a_study_with_a_failed_job_exits_non_zero_and_says_so(tmp_path, monkeypatch, capsys):
    import extrap.train as training

    real = training.train

    def fail_type1(run_dir, *a, **k):
        if "type1" in str(run_dir):
            raise ExtrapError("training diverged at step 3 (loss nan)")
        return real(run_dir, *a, **k)

    monkeypatch.setattr(training, "train", fail_type1)
    out = tmp_path / "s"
    assert main(["study", "--preset", "smoke", "--pe", "alibi,type1", "--jobs", "1", "--out", str(out)]) == 1
    assert "1 job(s) failed: type1" in capsys.readouterr().err
    html = (out / "report.html").read_text()
    assert "Incomplete study" in html and html.index("Incomplete study") < html.index("Claims checklist")


def test_killed_at_any_write_resumes_bit_exact(tmp_path, tiny_text):
    """Death at file-system operations spread over a whole run (26 of them: config, tokenizer, metrics,
    two checkpoints, latest.json, final.json), each followed by a resume to the same final loss."""
    assert main(_train_argv(tmp_path / "straight", tiny_text)) == 0
    expected = _final_loss(tmp_path / "straight")
    env = {**os.environ}
    for k in [*range(1, 26, 2), 26]:
        out = tmp_path / f"killed-{k}"
        argv = _train_argv(out, tiny_text)
        proc = subprocess.run([sys.executable, "-c", KILLER, str(k), *argv], env=env, capture_output=True, text=True)
        assert proc.returncode in (0, 137), proc.stderr
        if not RunDir(out).is_finished():
            resume = argv + (["--resume"] if RunDir(out).exists() else [])
            assert main(resume) == 0, k
        assert _final_loss(out) == expected, k
        assert not list(out.rglob("*.tmp*")), k  # the resume cleared what the death left half written


@pytest.mark.parametrize("argv", [["pe", "list", "--json"], ["theory", "alibi", "--json", "--heads", "1"]])
def test_a_closed_pipe_ends_quietly_and_a_full_output_in_one_line(argv):
    closed = subprocess.Popen(
        [sys.executable, "-m", "extrap.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    closed.stdout.close()  # the reader is gone before anything is written (like `| head` that exited)
    assert closed.wait() == 141 and closed.stderr.read() == b""
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "extrap.cli", *argv], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert proc.returncode == 2 and proc.stderr == "extrap: error: No space left on device while writing the output\n"


def test_resuming_a_study_with_other_pes_is_refused(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["study", "--preset", "smoke", "--pe", "alibi,type1", "--jobs", "1", "--out", str(out)]) == 0
    report = (out / "report.html").read_text()
    assert main(["study", "--preset", "smoke", "--pe", "type1", "--resume", "--out", str(out)]) == 2
    assert "the saved study used pes=['alibi', 'type1']" in capsys.readouterr().err
    assert (out / "report.html").read_text() == report
    assert main(["study", "--preset", "smoke", "--resume", "--jobs", "1", "--out", str(out)]) == 0  # its own PEs
    assert load_results(out).pes == ["alibi", "type1"]


def test_misleading_messages_are_precise(tmp_path, tiny_text, capsys):
    (tmp_path / "afile").write_text("x")
    assert main(["eval", str(tmp_path / "afile")]) == 2
    assert "is a file, not a run directory" in capsys.readouterr().err
    (tmp_path / "bad.yaml").write_text("train:\n  train_length: -64\n")
    assert main(["train", "--pe", "alibi", "--config", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "train_length must be positive, got -64" in err and str(tmp_path / "bad.yaml") in err


def test_a_prompt_that_is_not_utf8_is_one_line(finished_run):
    argv = [sys.executable.encode(), b"-m", b"extrap.cli", b"generate", bytes(finished_run), b"--prompt", b"caf\xe9"]
    proc = subprocess.run(argv, capture_output=True)
    assert proc.returncode == 2 and proc.stderr == b"extrap: error: --prompt is not valid UTF-8 text\n"


def test_a_batch_that_cannot_fit_is_refused_with_the_estimate(tmp_path, tiny_text, capsys):
    argv = _train_argv(tmp_path / "big", tiny_text, 6, "--train-length", "20000000", "--batch-size", "64")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "needs at least" in err and "GB of memory" in err and err.count("\n") == 1
    assert not (tmp_path / "big").exists()


def test_an_evaluation_that_cannot_fit_is_refused_before_it_runs(tiny_runs):
    from extrap.evaluate import EvalSettings, evaluate_run

    said = r"evaluating 1 row\(s\) of 60,000,000 tokens on cpu \(float32\) needs at least .* GB"
    with pytest.raises(ExtrapError, match=said):
        evaluate_run(
            extrap.load(tiny_runs["alibi"]), EvalSettings(lengths=[32, 60_000_000], tokens=60_000_000)
        ).to_json()


def test_theory_bounds_heads_and_names_a_truncated_checkpoint(finished_run, capsys):
    assert main(["theory", "alibi", "--heads", "100000"]) == 2
    assert "argument --heads: must be in [1, 1024]" in capsys.readouterr().err
    ckpt = RunDir(finished_run).latest()
    ckpt.weights.write_bytes(ckpt.weights.read_bytes()[:50])
    assert main(["theory", "--checkpoint", str(finished_run)]) == 2
    err = capsys.readouterr().err
    assert f"cannot read {ckpt.weights}" in err and err.count("\n") == 1


@pytest.mark.parametrize("name,needle", [("tokenizer.json", "tokenizer.json is not valid JSON"),
                                         ("final.json", "final.json is corrupt")])  # fmt: skip
def test_other_torn_run_files_are_named(finished_run, tiny_text, capsys, name, needle):
    (finished_run / name).write_text("{torn")
    argv = ["eval", str(finished_run), "--lengths", "64"] if name == "tokenizer.json" else _train_argv(
        finished_run, tiny_text, 6, "--resume")  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
