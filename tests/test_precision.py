"""``--dtype``: an extrap run evaluated under bf16 autocast on the CPU, its default per device, its refusals."""

import json

import pytest
import torch

from extrap.cli import main
from extrap.commands.args import DTYPE_NAMES
from extrap.precision import DTYPES, autocast, default_dtype, eval_dtype


@pytest.fixture
def run(smoke_alibi):
    return smoke_alibi


def _eval(run, capsys, *extra) -> dict:
    argv = ["eval", str(run), "--lengths", "64,128", "--tokens", "2048", "--json", *extra]
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_bf16_on_the_cpu_is_close_to_float32_and_recorded(run, capsys):
    """bf16 products round to 8 significant bits; measured on this smoke run (PPL ~ 64) the PPL moves by
    about 3e-4 relative (the cpu preset trained 150 steps: 7e-5).  Tolerance 2e-3, and it must move at all."""
    base, half = _eval(run, capsys), _eval(run, capsys, "--dtype", "bfloat16")
    assert base["dtype"] == "float32" and half["dtype"] == "bfloat16"  # CPU default: float32
    for a, b in zip(base["results"], half["results"]):
        assert a["length"] == b["length"]
        assert b["ppl"] == pytest.approx(a["ppl"], rel=2e-3)
        assert b["ppl"] != a["ppl"]  # the forward really ran in bf16


def test_task_score_takes_dtype_and_records_it(run, capsys):
    argv = ["task", "score", str(run), "--task", "passkey", "--lengths", "100", "--n", "2", "--json"]
    assert main([*argv, "--dtype", "bfloat16"]) == 0
    assert json.loads(capsys.readouterr().out)["dtype"] == "bfloat16"


@pytest.mark.parametrize("command", [["eval"], ["task", "score"]])
def test_a_bad_dtype_is_one_line_and_exit_2(run, capsys, command):
    assert main([*command, str(run), "--dtype", "float64"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "invalid choice: 'float64'" in err and "bfloat16" in err, err


def test_the_default_is_bf16_on_cuda_and_float32_on_the_cpu():
    assert default_dtype("cuda") == default_dtype(torch.device("cuda:0")) == "bfloat16"
    assert default_dtype("cpu") == eval_dtype(None, "cpu") == "float32"
    assert eval_dtype("float16", "cpu") == "float16"
    assert set(DTYPE_NAMES) == set(DTYPES)  # the CLI's choices name the dtypes extrap.precision runs


def test_the_explicit_softmax_stays_float32_under_bf16_autocast():
    from extrap.model.kernel import softmax_attention

    q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))
    mask = torch.zeros(8, 8, dtype=torch.bfloat16)  # as the Toeplitz path casts r(t) to q.dtype
    with autocast("cpu", torch.bfloat16):
        out, p = softmax_attention(q, k, v, mask, 0.5, record="probs")
    assert p.dtype == torch.float32 and out.dtype == torch.bfloat16
    torch.testing.assert_close(p.sum(-1), torch.ones(1, 2, 8), rtol=0, atol=1e-6)
