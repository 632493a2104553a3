"""`extrap train --init-from RUN`: a fine-tune starts from its parent's weights, records its lineage,
refuses what cannot start from the parent, is read with its own encoding, and resumes after kill -9."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import extrap
from extrap.cli import main
from extrap.run import RunDir
from extrap.run.records import Parent
from extrap.train import InitFrom, build_configs, lr_at, train
from killer import KILLER


@pytest.fixture(scope="module")
def corpus(stdlib_corpus) -> str:
    return stdlib_corpus


def _parent(root: Path, pe: str, corpus: str) -> Path:
    m, t = build_configs(pe, "smoke", overrides=dict(steps=4, save_every=2, corpus=corpus, train_length=32))
    train(root / pe, m, t, progress=False)
    return root / pe


@pytest.fixture(scope="module")
def rope_parent(tmp_path_factory, corpus) -> Path:
    return _parent(tmp_path_factory.mktemp("parents"), "rope", corpus)


def _child_argv(parent, corpus, out, *extra) -> list[str]:
    return ["train", "--init-from", str(parent), "--preset", "smoke", "--steps", "6", "--save-every", "3",
            "--corpus", corpus, "--train-length", "64", "--out", str(out), *extra]  # fmt: skip


def _weights(run) -> dict[str, torch.Tensor]:
    return load_file(str(RunDir(run).latest().weights))


def test_a_child_starts_from_its_parents_weights_and_records_its_lineage(rope_parent, corpus, tmp_path):
    m, t = build_configs("rope:base=500000", "smoke", overrides=dict(steps=1, corpus=corpus, train_length=64))
    train(tmp_path / "child", m, t, progress=False, init_from=InitFrom(str(rope_parent)))
    parent_file = RunDir(rope_parent).latest().weights
    sha = hashlib.sha256(parent_file.read_bytes()).hexdigest()
    config = RunDir(tmp_path / "child").read_config()
    assert config.parent == Parent(str(rope_parent.resolve()), 4, sha, "rope", 32)
    assert config.pe == "rope:base=500000" and config.train_length == 64
    # AdamW's first step (Loshchilov & Hutter 2019, Alg. 2) moves a weight w by lr_0 * g/(|g| + eps) plus the
    # decay lr_0 * wd * w: at most lr_0 (1 + wd |w|).  A random start would sit O(1) away.
    parent, child, lr0 = load_file(str(parent_file)), _weights(tmp_path / "child"), lr_at(0, t)
    assert parent.keys() == child.keys()
    for k in parent:
        assert ((child[k] - parent[k]).abs() <= lr0 * (1 + t.weight_decay * parent[k].abs()) + 1e-6).all(), k
    assert any(not torch.equal(child[k], parent[k]) for k in parent)  # and it did train


def test_later_commands_read_the_child_with_its_own_encoding(rope_parent, corpus, tmp_path, capsys):
    out = tmp_path / "abf"
    assert main(_child_argv(rope_parent, corpus, out, "--pe", "rope:base=500000", "--steps", "2")) == 0
    run = extrap.load(out)
    assert run.model.scheme.spec == "rope:base=500000" and run.model.scheme.opts["base"] == 500000
    capsys.readouterr()
    assert main(["eval", str(out), "--lengths", "128", "--tokens", "256", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["pe"], report["train_length"]) == ("rope:base=500000", 64)


def test_a_child_inherits_its_parents_model_without_a_preset(rope_parent, corpus, tmp_path, capsys):
    """The smoke parent's shapes (and the rest of its model section) are the child's without --preset smoke;
    training comes from the default preset and the flags as for any run."""
    out = tmp_path / "abf"
    argv = ["train", "--init-from", str(rope_parent), "--train-length", "128", "--pe", "rope:base=500000",
            "--steps", "1", "--batch-size", "2", "--corpus", corpus, "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    parent, child = RunDir(rope_parent).read_config(), RunDir(out).read_config()
    assert child.model == replace(parent.model, pe="rope:base=500000")
    cpu = build_configs(None, "cpu")[1]
    assert (child.train.lr, child.train.warmup, child.train.train_length) == (cpu.lr, cpu.warmup, 128)
    model = tmp_path / "model.yaml"  # a --config model section that changes a shape is refused, naming it
    model.write_text("model:\n  d_model: 64\n  dropout: 0.1\n")
    assert main([*argv[:-1], str(tmp_path / "wide"), "--config", str(model)]) == 2
    err = capsys.readouterr().err
    assert "d_model 32 -> 64" in err and "dropout" not in err and not (tmp_path / "wide").exists()


def test_rope_and_factor_rescale_the_parents_pe_as_eval_reads_it(rope_parent, corpus, tmp_path):
    out = tmp_path / "yarn"
    assert (
        main(_child_argv(rope_parent, corpus, out, "--rope", "yarn:beta_fast=16", "--factor", "4", "--steps", "1")) == 0
    )
    assert RunDir(out).read_config().pe == extrap.load(rope_parent, rope="yarn:beta_fast=16", factor=4).pe
    assert RunDir(out).read_config().pe == "rope:scaling=yarn,factor=4,original_max_position=32,beta_fast=16"
    for flag in (("--factor", "4"), ("--init-step", "4")):  # no parent: refused, not dropped
        assert main(["train", "--preset", "smoke", *flag, "--out", str(tmp_path / "scratch")]) == 2
        assert not (tmp_path / "scratch").exists()


def test_without_pe_a_child_keeps_its_parents_and_pose_and_tasks_train(rope_parent, corpus, tmp_path):
    out = tmp_path / "pose"
    extra = (
        "--positions",
        "pose:target=512,chunks=2",
        "--task",
        "passkey",
        "--task-mix",
        "0.5",
        "--train-length",
        "128",
    )
    assert main(_child_argv(rope_parent, corpus, out, *extra)) == 0
    config = RunDir(out).read_config()
    assert (config.pe, config.model.positions, config.train.task) == ("rope", "pose:target=512,chunks=2", "passkey")
    assert config.parent.pe == "rope" and RunDir(out).is_finished()


def test_a_learned_bias_carries_over_and_theory_reads_the_child(tmp_path, corpus, capsys):
    parent = _parent(tmp_path, "kerple-log", corpus)
    out = tmp_path / "child"
    assert main(_child_argv(parent, corpus, out, "--steps", "1")) == 0
    p, c = _weights(parent), _weights(out)
    keys = [k for k in p if "bias_params" in k]
    assert keys and all((c[k] - p[k]).abs().max() <= 1e-3 for k in keys)  # one step of lr_0 = 6e-4 at most
    capsys.readouterr()
    assert main(["theory", "--checkpoint", str(out), "--lengths", "128", "--eps", "1e-3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["results"]
    assert {r["train_length"] for r in rows} == {64}  # the child's length, not the parent's 32
    r1 = torch.nn.functional.softplus(c["blocks.0.attn.bias_params.r1"].double())
    row = next(r for r in rows if r["layer"] == 0 and r["head"] == 0)
    assert row["params"]["r1"] == pytest.approx(float(r1[0]), rel=1e-12)


@pytest.fixture(scope="module")
def alibi_parent(tmp_path_factory, corpus) -> Path:
    return _parent(tmp_path_factory.mktemp("parents"), "alibi", corpus)


@pytest.mark.parametrize(
    "parent, extra, said",
    [
        ("missing", (), "does not exist"),
        ("alibi", ("--pe", "rope"), "not a rotary PE"),
        ("rope", ("--pe", "alibi"), "keeps the encoding family"),
        ("rope", ("--preset", "cpu"), "shape differs from parent"),
        ("rope", ("--resume",), "--resume"),
        ("rope", ("--train-length", "16"), "shorter than the parent's training length 32"),
        ("rope", ("--init-step", "3"), "keeps step 4"),
        ("rope", ("--rope", "yarn", "--pe", "rope"), "give one of them"),
        ("alibi", ("--rope", "yarn", "--factor", "2"), "needs a run trained with a rotary PE"),
    ],
)
def test_bad_input_is_refused_in_one_line_and_writes_nothing(
    parent, extra, said, rope_parent, alibi_parent, corpus, tmp_path, capsys
):
    source = {"rope": rope_parent, "alibi": alibi_parent, "missing": tmp_path / "nope"}[parent]
    out = tmp_path / "child"
    assert main([*_child_argv(source, corpus, out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1, err
    assert not out.exists()


YARN = ("--pe", "rope:scaling=yarn,factor=2,original_max_position=32")


@pytest.fixture(scope="module")
def straight(rope_parent, corpus, tmp_path_factory) -> Path:
    """A YaRN child trained without interruption: what every stopped child must resume to."""
    out = tmp_path_factory.mktemp("straight") / "child"
    assert main(_child_argv(rope_parent, corpus, out, *YARN)) == 0
    return out


def _resume_argv(argv: list[str], parent) -> list[str]:
    """The same command, without --init-from: a child resumes like any run."""
    return [a for a in argv if a not in ("--init-from", str(parent))] + ["--resume"]


def test_a_child_killed_after_a_checkpoint_resumes_bit_exact(straight, rope_parent, corpus, tmp_path, capsys):
    """kill -9 at the 15th file-system operation (after the checkpoint of step 3, see test_faults.py); then
    `--resume --out CHILD` alone: the PE, parent, corpus, preset settings and steps are the child's own."""
    out = tmp_path / "killed"
    argv = _child_argv(rope_parent, corpus, out, *YARN)
    proc = subprocess.run([sys.executable, "-c", KILLER, "15", *argv], env={**os.environ}, capture_output=True)
    assert proc.returncode == 137, proc.stderr
    assert RunDir(out).latest().step == 3 and not RunDir(out).is_finished()
    for flag, said in ((("--pe", "rope"), "model: pe"), (("--preset", "cpu"), "model: d_model, n_head, n_layer")):
        assert main(["train", "--resume", "--out", str(out), *flag]) == 2  # a setting that differs: refused
        assert said in capsys.readouterr().err and RunDir(out).latest().step == 3
    assert main(["train", "--resume", "--out", str(out)]) == 0
    assert RunDir(out).read_final().final_loss == RunDir(straight).read_final().final_loss
    assert RunDir(out).read_config().parent == RunDir(straight).read_config().parent
    assert main(_resume_argv(argv, rope_parent)) == 2  # the original command, finished: its result is kept
    assert "finished training at step 6" in capsys.readouterr().err


def test_a_child_stopped_before_its_first_checkpoint_starts_again_from_its_parent(
    straight, rope_parent, corpus, tmp_path, capsys
):
    m, t = build_configs(YARN[1], "smoke", overrides=dict(steps=6, save_every=3, corpus=corpus, train_length=64))
    train(tmp_path / "child", m, t, progress=False, stop_after=0, init_from=str(rope_parent))
    assert RunDir(tmp_path / "child").exists() and RunDir(tmp_path / "child").latest() is None
    assert main(["train", "--resume", "--out", str(tmp_path / "child")]) == 0
    assert RunDir(tmp_path / "child").read_final().final_loss == RunDir(straight).read_final().final_loss


def test_a_child_stopped_before_its_first_checkpoint_refuses_a_changed_parent(tmp_path, corpus, capsys):
    from safetensors.torch import save_file

    parent = _parent(tmp_path, "rope", corpus)
    m, t = build_configs("rope", "smoke", overrides=dict(steps=2, corpus=corpus, train_length=32))
    train(tmp_path / "child", m, t, progress=False, stop_after=0, init_from=str(parent))
    weights = _weights(parent)
    weights["tok.weight"][0, 0] += 1.0
    save_file(weights, str(RunDir(parent).latest().weights))
    assert main(["train", "--out", str(tmp_path / "child"), "--resume"]) == 2
    assert "sha256 differs" in capsys.readouterr().err
    assert RunDir(tmp_path / "child").latest() is None


# ---------------------------------------------------------------------------
# hf: Llama-family folders
# ---------------------------------------------------------------------------
@pytest.fixture
def llama(tiny_llama) -> Path:
    return tiny_llama


def _hf_argv(llama, corpus, out, *extra) -> list[str]:
    return ["train", "--init-from", f"hf:{llama}", "--steps", "2", "--batch-size", "2", "--train-length", "64",
            "--corpus", corpus, "--out", str(out), *extra]  # fmt: skip


def test_an_hf_llama_fine_tuned_with_yarn_is_written_back_as_an_hf_folder(llama, corpus, tmp_path):
    import transformers

    from extrap.positional.rotary import Rotary

    out = tmp_path / "yarn"
    assert main(_hf_argv(llama, corpus, out, "--rope", "yarn", "--factor", "4")) == 0
    written = json.loads((out / "config.json").read_text())
    assert written["max_position_embeddings"] == 64
    assert written["rope_parameters"] == {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
    }  # fmt: skip
    lineage = json.loads((out / "extrap_parent.json").read_text())["parent"]
    assert lineage["weights_sha256"] == hashlib.sha256((llama / "model.safetensors").read_bytes()).hexdigest()
    assert (lineage["path"], lineage["step"], lineage["train_length"]) == (f"hf:{llama.resolve()}", None, 32)
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    # the written rope_parameters are YaRN x4 at L = 32: extrap's own YaRN frequencies (HF's bit for bit)
    inv, attention = Rotary(scaling="yarn", factor=4, original_max_position=32).frequencies(8)
    assert torch.equal(hf.model.rotary_emb.inv_freq, inv) and hf.model.rotary_emb.attention_scaling == attention
    ids = torch.randint(0, 300, (1, 96), generator=torch.Generator().manual_seed(1))
    run = extrap.load(f"hf:{out}", device="cpu", dtype="float32")
    with torch.no_grad():
        ours, theirs = run.model(ids).logits, hf(input_ids=ids).logits
    assert (ours - theirs).abs().max() <= 1e-5
    parent = transformers.AutoModelForCausalLM.from_pretrained(str(llama), dtype=torch.float32)
    assert not torch.equal(parent.model.embed_tokens.weight, hf.model.embed_tokens.weight)  # it trained


def test_abf_on_an_hf_llama_writes_rope_theta_as_extrap_spells_it(llama, corpus, tmp_path):
    """`--pe rope:base=500000` (ABF, as for an extrap run) becomes the written folder's rope_theta."""
    import transformers

    from extrap.hf.rope_config import read_rope_config
    from extrap.positional.rotary import Rotary

    out = tmp_path / "abf"
    assert main(_hf_argv(llama, corpus, out, "--pe", "rope:base=500000")) == 0
    written = json.loads((out / "config.json").read_text())
    assert written["rope_parameters"] == {"rope_type": "default", "rope_theta": 500000.0}
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    inv, attention = Rotary(base=500000).frequencies(8)  # θ_i = B^(-2i/d), Su et al. 2021 eq. 15
    assert torch.allclose(hf.model.rotary_emb.inv_freq, inv, rtol=1e-6, atol=0) and attention == 1
    run = extrap.load(f"hf:{out}", device="cpu", dtype="float32")
    assert read_rope_config(out).spec == "rope:base=500000.0"  # what extrap theory --checkpoint reads
    ids = torch.randint(0, 300, (1, 96), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (run.model(ids).logits - hf(input_ids=ids).logits).abs().max() <= 1e-5


@pytest.mark.parametrize(
    "extra, said",
    [
        (("--train-length", "16"), "shorter than the parent's training length 32"),
        (("--pe", "alibi"), "takes --pe rope:base=B"),
        (("--pe", "rope:scaling=yarn,factor=4,original_max_position=32"), "a scaling is --rope TYPE"),
        (("--pe", "rope:base=500000", "--rope", "yarn"), "give one of them"),
        (("--resume",), "--resume"),
        (("--init-step", "2"), "no init step"),
        (("--rope", "yarn:beta_fast=-1"), "beta_fast"),
    ],
)
def test_bad_hf_input_is_refused_in_one_line_and_writes_nothing(extra, said, llama, corpus, tmp_path, capsys):
    out = tmp_path / "child"
    assert main([*_hf_argv(llama, corpus, out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1, err
    assert not out.exists() and not list(tmp_path.glob(".child*"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_config_files_cuda_device_without_cuda_is_refused_before_anything_is_written(llama, corpus, tmp_path, capsys):
    config = tmp_path / "cuda.yaml"
    config.write_text("train:\n  device: cuda\n")
    out = tmp_path / "child"
    assert main([*_hf_argv(llama, corpus, out), "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no CUDA device is available" in err and len(err.splitlines()) == 1, err
    assert not out.exists() and not list(tmp_path.glob(".child*"))


def test_a_missing_hf_parent_is_refused(tmp_path, corpus, capsys):
    assert main(_hf_argv(tmp_path / "nope", corpus, tmp_path / "child")) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "child").exists()


@pytest.mark.parametrize("k", [12, 20])  # after the checkpoint of step 2; between extrap_parent.json and config.json
def test_an_hf_fine_tune_killed_resumes_with_only_out_bit_exact(k, llama, corpus, tmp_path, capsys):
    """kill -9 at the k-th file-system operation (the record, checkpoint 2 and latest.json take 11), then
    `--resume --out OUT` alone: the same final loss and weights as an uninterrupted fine-tune, as an HF folder."""
    extra = ("--rope", "yarn", "--factor", "2", "--steps", "4", "--save-every", "2")
    assert main(_hf_argv(llama, corpus, tmp_path / "straight", *extra)) == 0
    out = tmp_path / "killed"
    proc = subprocess.run([sys.executable, "-c", KILLER, str(k), *_hf_argv(llama, corpus, out, *extra)],
                          env={**os.environ}, capture_output=True)  # fmt: skip
    assert proc.returncode == 137, proc.stderr
    assert RunDir(out).latest().step == 2 and not (out / "config.json").exists()
    assert main(_hf_argv(llama, corpus, out, *extra)) == 2  # started again without --resume: refused
    for flag, said in ((("--lr", "0.5"), "train: lr"), (("--rope", "linear"), "(rope)")):
        assert main(["train", "--resume", "--out", str(out), *flag]) == 2
        assert said in capsys.readouterr().err and RunDir(out).latest().step == 2
    assert main(["train", "--resume", "--out", str(out)]) == 0
    done = [json.loads((d / "extrap_parent.json").read_text())["training"] for d in (tmp_path / "straight", out)]
    assert done[0]["final_loss"] == done[1]["final_loss"] and done[1]["step"] == 4
    a, b = load_file(str(tmp_path / "straight" / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in (tmp_path / "straight").iterdir())
    assert main(["train", "--resume", "--out", str(out)]) == 2  # finished: its result is kept
    assert "finished hf: fine-tune" in capsys.readouterr().err
