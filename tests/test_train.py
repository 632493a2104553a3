"""Training: exact resume after SIGKILL, DDP under torchrun, checkpoints, bad input."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.run import RUN_FORMAT
from extrap.train import build_configs, lr_at, train

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _cmd(*args):
    return [sys.executable, "-m", "extrap.cli", *args]


def _final(run):
    return json.loads((Path(run) / "final.json").read_text())


def test_lr_schedule_warms_up_then_decays_to_floor():
    _, cfg = build_configs("alibi", "smoke", overrides=dict(steps=100, warmup=10, lr=1.0, min_lr_ratio=0.1))
    assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(10, cfg) == pytest.approx(1.0) and lr_at(100, cfg) == pytest.approx(0.1)
    assert lr_at(55, cfg) == pytest.approx(0.55)


def test_resume_after_sigkill_is_bit_identical(tmp_path, tiny_text):
    common = [
        "train",
        "--pe",
        "kerple-log",
        "--preset",
        "smoke",
        "--steps",
        "300",
        "--save-every",
        "25",
        "--threads",
        "1",
        "--corpus",
        tiny_text,
        "--seed",
        "3",
    ]
    ref = tmp_path / "ref"
    subprocess.run(_cmd(*common, "--out", str(ref)), check=True, env=ENV, capture_output=True)

    run = tmp_path / "killed"
    proc = subprocess.Popen(
        _cmd(*common, "--out", str(run)), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    latest = run / "latest.json"
    deadline = time.time() + 120
    while time.time() < deadline:
        if latest.exists():
            try:
                if json.loads(latest.read_text())["step"] >= 75:
                    break
            except ValueError:
                pass
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "final.json").exists(), "the run finished before it could be killed"
    subprocess.run(_cmd(*common, "--out", str(run), "--resume"), check=True, env=ENV, capture_output=True)
    assert _final(run)["final_loss"] == _final(ref)["final_loss"]  # bit-identical, not approximately
    steps = [json.loads(ln)["step"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)), "metrics logged twice after resume"


def test_ddp_two_processes_match_one_process_with_the_global_batch(tmp_path, tiny_text):
    common = ["train", "--pe", "alibi", "--preset", "smoke", "--steps", "12", "--corpus", tiny_text, "--threads", "1"]
    single = tmp_path / "single"
    subprocess.run(_cmd(*common, "--batch-size", "8", "--out", str(single)), check=True, env=ENV, capture_output=True)
    ddp = tmp_path / "ddp"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "extrap.cli",
            *common,
            "--batch-size",
            "4",
            "--out",
            str(ddp),
        ],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[:3000]  # the ranks' own messages come first, torchrun's after
    assert json.loads((ddp / "config.json").read_text())["world_size"] == 2
    assert _final(ddp)["final_loss"] == pytest.approx(_final(single)["final_loss"], rel=2e-3)


def test_load_returns_model_tokenizer_config(tmp_path, tiny_text):
    m, t = build_configs("sandwich", "smoke", overrides=dict(steps=4, corpus=tiny_text))
    train(tmp_path / "r", m, t, progress=False)
    model, tok, cfg = extrap.load(tmp_path / "r")
    assert cfg.model.pe == "sandwich" and cfg.seed == 0 and cfg.corpus_hash
    assert cfg.extrap_version == extrap.__version__ and cfg.command and cfg.format == RUN_FORMAT
    ids = torch.tensor([tok.encode("import os\n")])
    assert model(ids).logits.shape == (1, ids.shape[1], tok.vocab_size)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--pe", "alibi", "--steps", "-3"], "steps must be positive"),
        (["--pe", "bogus"], "unknown positional scheme"),
        (["--pe", "alibi", "--preset", "huge"], "unknown preset"),
        (["--pe", "alibi", "--config", "CFG"], "unknown key"),
        (["--pe", "alibi", "--config", "HEADS"], "does not divide"),
    ],
)
def test_bad_training_input_is_one_line_and_status_2(tmp_path, capsys, argv, needle):
    (tmp_path / "cfg.yaml").write_text("model:\n  layers: 3\n")
    (tmp_path / "heads.yaml").write_text("model:\n  n_head: 3\n  d_model: 32\n")
    argv = [a.replace("CFG", str(tmp_path / "cfg.yaml")).replace("HEADS", str(tmp_path / "heads.yaml")) for a in argv]
    assert main(["train", *argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run" / "config.json").exists()


def test_corrupt_checkpoint_is_reported(tmp_path, tiny_text, capsys):
    m, t = build_configs("alibi", "smoke", overrides=dict(steps=2, corpus=tiny_text))
    train(tmp_path / "r", m, t, progress=False)
    ckpt = next((tmp_path / "r" / "checkpoints").iterdir())
    (ckpt / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(extrap.errors.ExtrapError, match="cannot read"):
        extrap.load(tmp_path / "r")
    (tmp_path / "r" / "latest.json").write_text("{not json")
    assert (
        main(
            [
                "train",
                "--pe",
                "alibi",
                "--preset",
                "smoke",
                "--steps",
                "2",
                "--corpus",
                tiny_text,
                "--out",
                str(tmp_path / "r"),
                "--resume",
            ]
        )
        == 2
    )
    assert "corrupt" in capsys.readouterr().err
