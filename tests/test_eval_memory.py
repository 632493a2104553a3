"""A length whose evaluation cannot fit is refused before any work, in one line with the estimate and the memory
available (:func:`extrap.memory.evaluation_bytes`, :func:`extrap.evaluate.driver.check_evaluation`)."""

import pytest

import extrap
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.memory import GB, evaluation_bytes
from extrap.model.scoring import chunk_size


@pytest.fixture
def run(smoke_alibi):
    return smoke_alibi


@pytest.fixture
def one_gb(monkeypatch):
    """This machine has 1 GB available (the refusal must not depend on the RAM of the machine the test runs on)."""
    monkeypatch.setattr("extrap.memory.available_bytes", lambda: GB)


def test_the_estimate_against_a_hand_count():
    # streamed: 50 queries + W = 100 cached keys held; KV cache 2 R W d act; ids 16 B per position
    assert evaluation_bytes(2, 1000, 8, 3, 10, 100, 50, 2) == 2 * (150 * 8 * 8 * 2 + 2 * 3 * 100 * 8 * 2 + 16 * 1000)
    # exact: every position held, with its float32 logits
    assert evaluation_bytes(1, 1000, 8, 3, 10, None, 50, 4) == 1000 * (8 * 8 * 4 + 4 * 10) + 16 * 1000
    # exact, the head over chunks of 64 positions: the float32 logits of one chunk per row
    assert evaluation_bytes(2, 1000, 8, 3, 10, None, 50, 4, 64) == 2 * (1000 * 8 * 8 * 4 + 64 * 4 * 10 + 16 * 1000)


def test_an_absurd_length_is_refused_before_any_work_by_the_library(run):
    from extrap.evaluate import EvalSettings, evaluate_run

    loaded = extrap.load(run)
    said = r"of 1,000,000,000 tokens on cpu \(float32\) needs at least .* GB is available"
    with pytest.raises(ExtrapError, match=said):
        evaluate_run(loaded, EvalSettings(lengths=(10**9,)))


def _refused(capsys, argv) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if line.startswith("extrap: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines  # before it, at most the log's cost estimate
    return errors[0]


def test_eval_states_the_estimate_and_what_is_available(run, one_gb, capsys):
    loaded = extrap.load(run)
    shape = loaded.model.shape
    L = 10**7
    # bf16 activations of every position; the float32 logits of one chunk of positions (the head runs in chunks)
    need = L * 8 * shape.d_model * 2 + 4 * shape.vocab_size * chunk_size(1, shape.vocab_size) + 16 * L
    err = _refused(capsys, ["eval", str(run), "--lengths", str(L), "--dtype", "bfloat16"])
    assert f"of 10,000,000 tokens on cpu (bfloat16) needs at least {need / GB:.1f} GB" in err, err
    assert "1.0 GB is available" in err, err


def test_task_score_refuses_a_length_that_cannot_fit(run, one_gb, capsys):
    argv = ["task", "score", str(run), "--task", "passkey", "--lengths", "1000000", "--n", "1", "--batch", "4"]
    err = _refused(capsys, argv)
    assert "4 row(s) of 1,000,000 tokens on cpu (float32) needs at least" in err and "smaller --batch" in err, err


def test_an_hf_model_at_an_absurd_length_is_refused(tiny_llama, one_gb, capsys):
    argv = ["eval", f"hf:{tiny_llama}", "--lengths", "10000000", "--device", "cpu"]
    err = _refused(capsys, argv)
    assert "of 10,000,000 tokens on cpu (float32) needs at least" in err and "GB is available" in err, err
