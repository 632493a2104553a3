"""Evaluation protocols on tiny trained models, and the Definition 0.1 verdict."""

import json
import math

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.evaluate import (
    LengthResult,
    eval_last_token,
    eval_nonoverlapping,
    eval_sliding,
    evaluate,
    evaluate_run,
    last_token_targets,
    verdict,
)


def test_last_token_scores_the_same_targets_at_every_length():
    targets = last_token_targets(10_000, 1024, 16)
    assert len(set(targets)) == 16 and min(targets) >= 1023 and max(targets) <= 9999
    seen = []

    class Spy(torch.nn.Module):  # records which tokens are scored and how much context they get
        def forward(self, x, window=None, last=None):
            seen.append((x.shape[1], x[:, -1].tolist()))
            return type("O", (), {"logits": torch.zeros(x.shape[0], last, 256)})()

    stream = torch.arange(10_000) % 256
    for L in (64, 256, 1024):
        eval_last_token(Spy(), stream, L, targets, batch=16)
    assert [s[0] for s in seen] == [63, 255, 1023]  # exactly L_ex - 1 tokens of context
    assert seen[0][1] == seen[1][1] == seen[2][1]  # the same final context token, hence the same target


def test_protocols_on_a_model_that_only_sees_the_current_token(tiny_runs):
    """window:1 with one layer predicts from the current token alone: every length must agree exactly."""
    model, tok, cfg = extrap.load(tiny_runs["window:1"])
    stream = torch.randint(0, 256, (5000,), generator=torch.Generator().manual_seed(0))
    res = {
        p: evaluate(model, stream, [16, 64, 256], p, tokens=1024, targets=32) for p in ("nonoverlapping", "last-token")
    }
    for p, rs in res.items():
        assert max(r.loss for r in rs) - min(r.loss for r in rs) < 1e-5, p


def test_sliding_with_stride_l_equals_nonoverlapping_and_scores_each_token_once(tiny_runs):
    model, _, _ = extrap.load(tiny_runs["alibi"])
    stream = torch.randint(0, 256, (3000,), generator=torch.Generator().manual_seed(1))
    a, na = eval_nonoverlapping(model, stream, 64, 1024)
    b, nb = eval_sliding(model, stream, 64, 1024, stride=64)
    assert na == nb == 1024 and a == pytest.approx(b, rel=1e-6)
    c, nc = eval_sliding(model, stream, 64, 1024, stride=16)
    assert nc == 1024 and math.isfinite(c)


def test_verdict_follows_definition_0_1():
    rs = [
        LengthResult(32, math.log(10.0), 1, 0),
        LengthResult(64, math.log(10.1), 1, 0),
        LengthResult(128, math.log(10.3), 1, 0),
    ]
    v = verdict(rs, 32, delta=0.02)
    assert v.extrapolates is False and v.worst_ratio == pytest.approx(0.03)
    assert verdict(rs, 32, delta=0.05).extrapolates is True
    assert verdict(rs, 100).extrapolates is None
    with pytest.raises(ExtrapError):
        verdict(rs, 32, delta=0)


def test_eval_cli_json_schema(tiny_runs, capsys):
    assert (
        main(
            [
                "eval",
                str(tiny_runs["alibi"]),
                "--lengths",
                "32,64,128",
                "--protocol",
                "last-token",
                "--targets",
                "8",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    for key in (
        "run",
        "protocol",
        "train_length",
        "delta",
        "extrapolates",
        "worst_ratio",
        "results",
        "seed",
        "corpus_hash",
        "window",
    ):
        assert key in out
    assert [r["length"] for r in out["results"]] == [32, 64, 128]
    assert set(out["results"][0]) >= {"length", "loss", "ppl", "bits_per_token", "tokens", "seconds", "window"}


def test_fixed_window_evaluation_changes_nothing_below_the_window(tiny_runs):
    rep_exact = evaluate_run(tiny_runs["alibi"], lengths=[32, 64], protocol="nonoverlapping", tokens=256)
    rep_win = evaluate_run(tiny_runs["alibi"], lengths=[32, 64], protocol="nonoverlapping", tokens=256, window="64")
    assert rep_exact["results"][1]["loss"] == pytest.approx(rep_win["results"][1]["loss"], rel=1e-6)
    assert rep_win["window"]["mode"] == "fixed"


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--protocol", "bogus"], "argument --protocol: invalid choice"),
        (["--lengths", "a,b"], "comma-separated"),
        (["--lengths", "1"], ">= 2"),
        (["--window", "-4"], ">= 1"),
        (["--split", "train"], "argument --split: invalid choice"),
        (["--eps", "1"], "argument --eps: must be in (0, 1)"),
        (["--targets", "0"], "argument --targets: must be >= 1"),
    ],
)
def test_eval_bad_input(tiny_runs, capsys, argv, needle):
    assert main(["eval", str(tiny_runs["alibi"]), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_eval_missing_run(tmp_path, capsys):
    assert main(["eval", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_window_auto_uses_the_trf_and_matches_exact_attention(tiny_runs):
    """--window auto: attention limited to TRF(eps) keys of the trained ALiBi bias, within 0.1% of exact."""
    rep = evaluate_run(
        tiny_runs["alibi"],
        lengths=[32, 2048],
        protocol="nonoverlapping",
        tokens=2048,
        window="auto",
        eps=1e-2,
        exact_check_max=2048,
    )
    info = rep["window"]
    assert info["mode"] == "auto" and isinstance(info["size"], int) and "TRF" in info["reason"]
    long = rep["results"][1]
    assert long["window"] == info["size"] < 2048  # the window was actually used at L = 2048
    assert long["window_rel_diff"] < 1e-3
    none = evaluate_run(
        tiny_runs["type1"], lengths=[32, 64], protocol="nonoverlapping", tokens=256, window="auto", eps=1e-2
    )
    assert none["window"]["mode"] == "auto"  # type1's TRF(1e-2) is 61: used only where it is below L_ex
