"""Evaluation protocols on tiny trained models, and the Definition 0.1 verdict."""

import json
import math

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.evaluate import (
    PROTOCOLS,
    EvalSettings,
    LengthResult,
    eval_last_token,
    eval_nonoverlapping,
    eval_sliding,
    evaluate,
    evaluate_run,
    last_token_targets,
    verdict,
)
from extrap.model.protocol import ModelShape
from extrap.results import WindowInfo
from extrap.theory.receptive import WINDOW_AUTO_TRF
from golden import R32  # tests/golden.py: a float32 statistic's relative rounding


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
    for p, rs in res.items():  # the same losses in other batch shapes: float32 rounding, 2 R32 l (tests/golden.py)
        assert max(r.loss for r in rs) - min(r.loss for r in rs) <= 2 * R32 * max(r.loss for r in rs), p


def test_sliding_with_stride_l_equals_nonoverlapping_and_scores_each_token_once(tiny_runs):
    model, _, _ = extrap.load(tiny_runs["alibi"])
    stream = torch.randint(0, 256, (3000,), generator=torch.Generator().manual_seed(1))
    a = eval_nonoverlapping(model, stream, 64, 1024)  # per-token losses, in stream order
    b = eval_sliding(model, stream, 64, 1024, stride=64)
    assert a.numel() == b.numel() == 1024
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    c = eval_sliding(model, stream, 64, 1024, stride=16)
    assert c.numel() == 1024 and math.isfinite(float(c.mean()))


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
    rep_exact = evaluate_run(
        extrap.load(tiny_runs["alibi"]), EvalSettings(lengths=[32, 64], protocol="nonoverlapping", tokens=256)
    ).to_json()
    rep_win = evaluate_run(
        extrap.load(tiny_runs["alibi"]),
        EvalSettings(lengths=[32, 64], protocol="nonoverlapping", tokens=256, window="64"),
    ).to_json()
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
        extrap.load(tiny_runs["alibi"]),
        EvalSettings(
            lengths=[32, 2048], protocol="nonoverlapping", tokens=2048, window="auto", eps=1e-2, exact_check_max=2048
        ),
    ).to_json()
    info = rep["window"]
    assert info["mode"] == "auto" and isinstance(info["size"], int) and "TRF" in info["reason"]
    long = rep["results"][1]
    assert long["window"] == info["size"] < 2048  # the window was actually used at L = 2048
    assert long["window_rel_diff"] < 1e-3
    none = evaluate_run(
        extrap.load(tiny_runs["type1"]),
        EvalSettings(lengths=[32, 64], protocol="nonoverlapping", tokens=256, window="auto", eps=1e-2),
    ).to_json()
    assert none["window"]["mode"] == "auto"  # type1's TRF(1e-2) is 61: used only where it is below L_ex


# ---------------------------------------------------------------------------
# the window's cost is measured on the same tokens
# ---------------------------------------------------------------------------
class _Spy(torch.nn.Module):
    """Logits that depend only on the current token (so the window cannot matter); records what it sees."""

    def __init__(self):
        super().__init__()
        self.seen = {None: [], "window": []}  # the scored target tokens, by pass
        self.shape = ModelShape(n_layer=2, n_head=1, d_model=8, vocab_size=256, pe="spy")

    def temperatures(self):
        return [1.0]

    def set_temperature(self, tau):
        pass

    @staticmethod
    def _logits(x):
        return torch.nn.functional.one_hot(x % 7, 256).float() * 3.0  # a token-dependent distribution

    def forward(self, x, window=None, last=None):
        self.seen[window].append(x[:, -(last or x.shape[1]) :].clone())
        logits = self._logits(x)
        return type("O", (), {"logits": logits if last is None else logits[:, -last:]})()

    def new_cache(self, window=None, seq_len=None):
        return []

    def step(self, idx, start, cache):
        self.seen["window"].append(idx.clone())
        return self._logits(idx)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exact_side_scores_the_same_tokens_as_the_window(protocol):
    """At every length, not only the longest, the exact pass scores exactly the windowed pass's tokens."""
    spy = _Spy()
    stream = torch.randint(0, 256, (2000,), generator=torch.Generator().manual_seed(3))
    rs = evaluate(
        spy, stream, [16, 32, 64], protocol, tokens=256, targets=8, window_for=lambda L: 4, exact_check_max=64
    )
    assert spy.seen[None] and spy.seen["window"]
    for r in rs:
        d = r.to_json()
        assert r.tokens > 0 and d["exact_ppl"] == d["ppl"] and d["window_rel_diff"] == 0.0, r.length


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_window_covering_the_whole_context_changes_nothing(tiny_runs, monkeypatch, protocol):
    """W >= L drops no key: the windowed and exact PPL are the same number at every length."""
    from extrap.evaluate import driver

    def whole(run, mode, eps):  # a window of L keys at length L covers the whole context
        return (lambda L: L), WindowInfo("fixed", None, "W = L")

    monkeypatch.setattr(driver, "resolve_window", whole)
    rep = evaluate_run(
        extrap.load(tiny_runs["alibi"]), EvalSettings(lengths=[32, 64, 128], protocol=protocol, targets=8, window="1")
    ).to_json()
    assert [r["window"] for r in rep["results"]] == [32, 64, 128]
    for r in rep["results"]:
        assert r["window_rel_diff"] == 0.0 and r["exact_ppl"] == r["ppl"], (protocol, r)
    assert len({r["tokens"] for r in rep["results"]}) == 1  # every length scores the same number of tokens


def test_a_failing_exact_comparison_is_recorded(tiny_runs, monkeypatch):
    from extrap.evaluate import protocols

    real = protocols.eval_nonoverlapping

    def exact_fails(model, stream, length, tokens, window=None, batch=8, on_tokens=None):
        if window is None:
            raise RuntimeError("out of memory")
        return real(model, stream, length, tokens, window, batch, on_tokens)

    monkeypatch.setattr(protocols, "eval_nonoverlapping", exact_fails)
    rep = evaluate_run(
        extrap.load(tiny_runs["alibi"]), EvalSettings(lengths=[32, 64], tokens=128, window="16")
    ).to_json()
    r = rep["results"][0]
    assert r["exact_ppl"] is None and r["window_rel_diff"] is None and "out of memory" in r["exact_error"]
    assert math.isfinite(r["ppl"])
    json.dumps(rep, allow_nan=False)


# ---------------------------------------------------------------------------
# no verdict without evidence; strict JSON
# ---------------------------------------------------------------------------
def test_no_verdict_without_a_length_above_the_training_length(tiny_runs, capsys):
    run = str(tiny_runs["alibi"])  # L_tr = 32
    assert main(["eval", run, "--lengths", "16,32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["extrapolates"] is None and out["worst_ratio"] is None
    assert "no length above L_tr = 32" in out["verdict_reason"]
    assert main(["eval", run, "--lengths", "32"]) == 0
    assert "no verdict (no length above L_tr = 32 was evaluated)" in capsys.readouterr().out
    ok = LengthResult(32, math.log(10.0), 1, 0)
    failed = LengthResult(64, math.nan, 0, 0, error="out of memory")
    v = verdict([ok, failed], 32)
    assert v.extrapolates is None and v.worst_ratio is None and "without error" in v.reason
    v = verdict([ok, LengthResult(64, math.log(10.1), 1, 0)], 32)
    assert v.extrapolates is True and v.reason is None and v.worst_ratio == pytest.approx(0.01)


def test_a_failing_length_gives_strict_json(tiny_runs, monkeypatch, capsys, tmp_path):
    """A length that fails has null loss, ppl and bits (never NaN), its error, and no verdict from it."""
    from extrap.evaluate import protocols

    real = protocols.eval_last_token

    def fails_at_128(model, stream, length, targets, window=None, batch=8, on_tokens=None):
        if length == 128:
            raise RuntimeError("CUDA out of memory\nmore lines")
        return real(model, stream, length, targets, window, batch, on_tokens)

    monkeypatch.setattr(protocols, "eval_last_token", fails_at_128)
    argv = ["eval", str(tiny_runs["alibi"]), "--lengths", "32,128", "--protocol", "last-token", "--targets", "8"]
    assert main([*argv, "--json", "--out", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out

    def refuse(name):
        raise AssertionError(f"not strict JSON: {name}")

    for doc in (text, (tmp_path / "r.json").read_text()):
        out = json.loads(doc, parse_constant=refuse)
        bad = out["results"][1]
        assert bad["error"] == "CUDA out of memory" and bad["loss"] is bad["ppl"] is bad["bits_per_token"] is None
        assert out["extrapolates"] is None and "without error" in out["verdict_reason"]
        json.dumps(out, allow_nan=False)
    assert main(argv) == 0
    assert "failed: CUDA out of memory" in capsys.readouterr().out


def test_learned_ape_beyond_its_table_is_a_recorded_failure():
    from extrap.model import GPT, ModelConfig

    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=50, n_layer=1, d_model=32, n_head=2, pe="learned:max_positions=32"))
    stream = torch.randint(0, 50, (400,), generator=torch.Generator().manual_seed(0))
    rs = evaluate(model, stream, [16, 64], "nonoverlapping", tokens=128)
    assert rs[0].error is None and "max_positions" in rs[1].error
    d = [r.to_json() for r in rs]
    json.dumps(d, allow_nan=False)
    assert d[1]["loss"] is None and d[1]["ppl"] is None


# ---------------------------------------------------------------------------
# values that no length can be evaluated with are refused up front
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--lengths", ""], "argument --lengths: is empty"),
        (["--lengths", " , "], "argument --lengths: is empty"),
        (["--stride", "0", "--protocol", "sliding"], "argument --stride: must be >= 1"),
        (["--stride", "-4", "--protocol", "sliding"], "argument --stride: must be >= 1"),
        (["--lengths", "128", "--tokens", "100"], "--tokens 100 is fewer than the longest length 128"),
        (["--lengths", "128", "--tokens", "100", "--protocol", "sliding"], "sliding needs --tokens >= 128"),
        (["--lengths", "32,64", "--stride", "40", "--protocol", "sliding"], "--stride 40"),
        (["--lengths", "16", "--tokens", "20"], "at least 32 tokens are needed"),  # L_tr = 32 is always evaluated
    ],
)
def test_eval_refuses_settings_up_front(tiny_runs, capsys, argv, needle):
    assert main(["eval", str(tiny_runs["alibi"]), *argv]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert "L_ex=" not in cap.out + cap.err  # nothing was evaluated


def test_library_refuses_settings_before_evaluating(tiny_runs):
    spy = _Spy()
    stream = torch.zeros(1000, dtype=torch.long)
    for kwargs, needle in (
        (dict(lengths=[], protocol="nonoverlapping"), "empty"),
        (dict(lengths=[16, 32], protocol="sliding", stride=0), "stride"),
        (dict(lengths=[16, 128], protocol="nonoverlapping", tokens=100), "at least 128 tokens"),
        (dict(lengths=[16, 128], protocol="sliding", tokens=100), "at least 128 tokens"),
    ):
        with pytest.raises(ExtrapError, match=needle):
            evaluate(spy, stream, **kwargs)
        assert spy.seen == {None: [], "window": []}
    with pytest.raises(ExtrapError, match="empty"):
        EvalSettings(lengths=[])
    with pytest.raises(ExtrapError, match="stride"):
        EvalSettings(lengths=[32, 64], protocol="sliding", stride=0)
    # last-token scores fixed targets: tokens and stride do not apply to it
    rs = evaluate(spy, torch.arange(400) % 256, [16, 32], "last-token", tokens=3, targets=4)
    assert [r.tokens for r in rs] == [4, 4]


def test_window_auto_line_names_its_eps_and_reduction(tiny_runs, capsys):
    run = str(tiny_runs["alibi"])
    assert main(["eval", run, "--lengths", "32,2048", "--tokens", "2048", "--window", "auto", "--eps", "1e-2"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "window=auto W=" in first and "TRF eps=0.01, max over layers and heads" in first
    argv = ["eval", run, "--lengths", "32,64", "--window", "auto", "--json"]
    assert main(argv) == 0
    w = json.loads(capsys.readouterr().out)["window"]
    assert (w["trf_eps"], w["trf_reduce"]) == (WINDOW_AUTO_TRF.eps, WINDOW_AUTO_TRF.reduce)
