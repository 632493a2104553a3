"""--extend from the command line and the Python API on an extrap rope run: eval (every method), eval --file
(a bounded method streams), task score, generate, align, the refusals (exit 2, one line, nothing written), and
--extend with --temperature (a τ or 004's search on the extended model) against a dense reference."""

import json
import math

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.extend import extend_run, parse

L_TR = 32
SPECS = ["sinks:n=2,window=16", "lm-infinite:global=2,local=16", "self-extend:group=2,window=8", "dca",
         "rerope:window=4", "leaky-rerope:window=4,k=4", "string"]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A rope run and an alibi run, trained a few smoke steps on stdlib source."""
    import sysconfig
    from pathlib import Path

    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("extend_runs")
    folder = root / "corpus"
    folder.mkdir()
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    out = {}
    for pe, steps in (("rope", 20), ("alibi", 2)):
        m, t = build_configs(pe, "smoke", overrides=dict(steps=steps, corpus=f"text:{folder}", train_length=L_TR))
        train(root / pe, m, t, progress=False)
        out[pe] = root / pe
    return out


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("extrap: error:"), err
    return err


@pytest.mark.parametrize("spec", SPECS)
def test_eval_with_every_method_cli_equals_python_api(runs, spec, capsys):
    from extrap.evaluate import EvalSettings, evaluate_run

    rc = main(["eval", str(runs["rope"]), "--lengths", "32,64", "--tokens", "128", "--extend", spec, "--json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    full = parse(spec, L_TR).spec
    assert rep["pe"] == f"rope+{full}" and rep["rope"]["extend"] == full
    assert all(math.isfinite(r["ppl"]) for r in rep["results"])
    run = extrap.load(runs["rope"])
    extend_run(run, spec)
    want = evaluate_run(run, EvalSettings(lengths=[32, 64], tokens=128)).to_json()
    assert [r["loss"] for r in rep["results"]] == pytest.approx([r["loss"] for r in want["results"]], abs=1e-6)


def test_an_extension_changes_the_loss_only_where_its_map_differs(runs):
    from extrap.evaluate.protocols import eval_nonoverlapping
    from extrap.run import eval_stream

    plain = extrap.load(runs["rope"])
    stream = eval_stream(plain, "validation", 257)
    for spec in ("rerope:window=31", "self-extend:group=2,window=8"):
        run = extrap.load(runs["rope"])
        extend_run(run, spec)
        longer = eval_nonoverlapping(run.model, stream, 64, 256)  # t up to 63 > 31: the maps differ
        assert torch.isfinite(longer).all() and not torch.equal(
            longer, eval_nonoverlapping(plain.model, stream, 64, 256)
        )
    run = extrap.load(runs["rope"])
    extend_run(run, "rerope:window=31")  # sequences of 31: d = t everywhere, plain RoPE bit for bit
    assert torch.equal(
        eval_nonoverlapping(run.model, stream, 31, 124), eval_nonoverlapping(plain.model, stream, 31, 124)
    )


def test_eval_file_streams_a_bounded_method(runs, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("def f(x):\n    return x + 1\n" * 30)
    rc = main(["eval", str(runs["rope"]), "--file", str(text), "--extend", "sinks:n=2,window=16", "--json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"].startswith("rope+sinks") and math.isfinite(rep["ppl"])


def test_task_generate_align_take_the_flag(runs, capsys):
    base = ["--extend", "self-extend:group=2,window=8"]
    assert (
        main(["task", "score", str(runs["rope"]), "--task", "passkey", "--lengths", "96", "--n", "2", "--json", *base])
        == 0
    )
    rep = json.loads(capsys.readouterr().out)
    assert "+self-extend" in rep["pe"]
    assert main(["generate", str(runs["rope"]), "--prompt", "def ", "--tokens", "40", "--json", *base]) == 0
    assert "+self-extend" in json.loads(capsys.readouterr().out)["pe"]
    assert main(["align", str(runs["rope"]), "--lengths", "64", "--segments", "1", "--json", *base]) == 0
    assert "+self-extend" in json.loads(capsys.readouterr().out)["pe"]


def test_generate_with_an_extension_matches_greedy_full_passes(runs):
    from extrap.model.generate import generate

    run = extrap.load(runs["rope"])
    extend_run(run, "dca:chunk=12,local=2")
    prompt = torch.tensor([run.tokenizer.encode("import os\n")])
    out = generate(run.model, prompt, 30, greedy=True)
    x = prompt
    with torch.no_grad():
        for _ in range(30):
            x = torch.cat([x, run.model(x).logits[:, -1:].argmax(-1)], 1)
    assert torch.equal(out, x)


REFUSED = [
    ["--extend", "nope"],
    ["--extend", "rerope:w=3"],
    ["--extend", "self-extend:group=0"],
    ["--extend", "leaky-rerope:k=0"],
    ["--extend", "sinks:n=-1"],
    ["--extend", "rerope:window=32"],
    ["--extend", "string:shift=40"],
    ["--extend", "rerope", "--rope", "linear", "--factor", "2"],
    ["--extend", "rerope", "--window", "16"],
    ["--extend", "rerope", "--cache-window", "16"],
    ["--extend", "rerope", "--temperature", "1.2", "--rope", "linear", "--factor", "2"],
    ["--extend", "rerope", "--temperature", "auto", "--window", "16"],
]


@pytest.mark.parametrize("extra", REFUSED, ids=[" ".join(r) for r in REFUSED])
def test_refusals_exit_2_in_one_line_and_write_nothing(runs, extra, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(runs["rope"]), "--lengths", "64", "--out", str(out), *extra]) == 2
    _one_error_line(capsys)
    assert not out.exists()


def test_a_non_rotary_run_is_refused(runs, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(runs["alibi"]), "--lengths", "64", "--extend", "rerope", "--out", str(out)]) == 2
    assert "rotary" in _one_error_line(capsys) and not out.exists()
    assert main(["generate", str(runs["rope"]), "--prompt", "x", "--extend", "sinks", "--cache-window", "8"]) == 2
    _one_error_line(capsys)


def test_pe_list_and_theory_cli(capsys, tmp_path):
    assert main(["pe", "list", "--extend", "--json"]) == 0
    names = [m["name"] for m in json.loads(capsys.readouterr().out)["methods"]]
    assert names == ["sinks", "lm-infinite", "self-extend", "dca", "rerope", "leaky-rerope", "string"]
    assert main(["theory", "--extend", "self-extend:group=8,window=1024", "--train-length", "4096",
                 "--length", "8192", "--json"]) == 0  # fmt: skip
    r = json.loads(capsys.readouterr().out)["extension"]
    assert r["max_distance"] == 8191 // 8 + 1024 - 128 and r["in_distribution"] and r["in_distribution_up_to"] == 25600
    assert (
        main(["theory", "--extend", "string", "--train-length", "4096", "--length", "16384", "--head-dim", "64"]) == 0
    )
    assert "turned past training's angles: 9" in capsys.readouterr().out
    csv = tmp_path / "t.csv"
    assert main(["theory", "--extend", "rerope", "--train-length", "64", "--length", "200", "--csv", str(csv)]) == 0
    assert "max_distance" in csv.read_text() and "in distribution" in capsys.readouterr().out
    for bad in (["--extend", "x", "--train-length", "64", "--length", "9"], ["--extend", "rerope", "--length", "9"],
                ["--extend", "rerope:window=64", "--train-length", "64", "--length", "9"],
                ["alibi", "--extend", "rerope", "--train-length", "64", "--length", "9"]):  # fmt: skip
        assert main(["theory", *bad]) == 2
        _one_error_line(capsys)


# ---- --extend with --temperature: logit(i, j) = s(i) · (R(d_ij) q_i)·k_j / (τ √D), written here from the definitions
class DenseReference:
    """A GPT layer's attention, dense and in float64: ReRoPE's distance d = min(t, w) (Su 2023), the query
    rotated by d (Su et al. 2021, Eq. 34, rotate-half, θ_k = 10000^(-2k/D)), times s(i), over τ√D, causal."""

    def __init__(self, window: int, tau: float, log_length: int | None = None):
        self.w, self.tau, self.log_length = window, tau, log_length

    def __call__(self, attn, q, k, v, positions, cache=None, seq_len=None, window=None, record=None, rows=None):
        assert cache is None and window is None and record is None and rows is None
        D = q.shape[-1]
        i = positions.double()
        t = i[:, None] - i[None, :]
        ang = t.clamp(max=self.w)[..., None] * 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
        cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
        qd = q.double()[:, :, :, None, :]  # (B, H, L, 1, D): query i rotated by d_ij for every j
        half = torch.cat([-qd[..., D // 2 :], qd[..., : D // 2]], -1)
        s = ((qd * cos + half * sin) * k.double()[:, :, None]).sum(-1) / (self.tau * math.sqrt(D))
        if self.log_length is not None:  # bojone/rerope: max(1, ln(i + 1) / ln L_tr) on query i
            s = s * (torch.log(i + 1) / math.log(self.log_length)).clamp(min=1.0)[:, None]
        p = torch.softmax(s.masked_fill(t < 0, -torch.inf), -1)
        return (p @ v.double()).to(q.dtype), None


def _dense_run(path, reference):
    run = extrap.load(path)
    for blk in run.model.blocks:
        blk.attn.extend = reference
    return run


IDS = torch.randint(0, 256, (2, 80), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("spec,log_length", [("rerope:window=4", None), ("rerope:window=4,log=1", L_TR)])
def test_extend_with_a_temperature_equals_the_dense_reference(runs, spec, log_length, capsys):
    from extrap.evaluate import EvalSettings, evaluate_run

    tau = 0.7
    run = extrap.load(runs["rope"])
    extend_run(run, spec)
    run.model.set_temperature(tau)  # as eval sets it
    ref = _dense_run(runs["rope"], DenseReference(4, tau, log_length))
    with torch.no_grad():
        got, want = run.model(IDS).logits, ref.model(IDS).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # measured: 2.4e-7 (float32 model)
    for other in (DenseReference(4, 1.0, log_length), DenseReference(4, tau, None if log_length else L_TR)):
        with torch.no_grad():  # without τ, or with the log-length factor toggled: 0.01-0.04 away
            assert (_dense_run(runs["rope"], other).model(IDS).logits - got).abs().max() > 1e-3
    rc = main(["eval", str(runs["rope"]), "--lengths", "64", "--tokens", "128", "--extend", spec,
               "--temperature", str(tau), "--json"])  # fmt: skip
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"] == f"rope+{spec}" and rep["rope"]["extend"] == spec
    assert rep["temperature"] == {"mode": "fixed", "tau": tau}
    assert [(r["length"], r["temperature"]) for r in rep["results"]] == [(32, tau), (64, tau)]
    dense = evaluate_run(ref, EvalSettings(lengths=[64], tokens=128)).to_json()["results"]  # L_tr = 32 and 64
    assert [r["loss"] for r in rep["results"]] == pytest.approx([r["loss"] for r in dense], rel=1e-5)


def test_a_temperature_of_one_is_the_extension_alone(runs, capsys):
    base = ["eval", str(runs["rope"]), "--lengths", "32,64", "--tokens", "128", "--extend", "rerope:window=4,log=1"]
    assert main([*base, "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main([*base, "--temperature", "1", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert [r["loss"] for r in one["results"]] == [r["loss"] for r in alone["results"]]  # bit for bit
    assert one["temperature"] == {"mode": "fixed", "tau": 1.0} and "temperature" not in alone


def test_auto_temperature_searches_the_extended_model(runs, capsys, monkeypatch):
    from extrap import align
    from extrap.align.search import algorithm1

    seen = []

    def spy(model, stream, train_length, length, *a, **kw):
        tau = aligned(model, stream, train_length, length, *a, **kw)
        seen.append((length, model.extension.method.spec if model.extension else None, stream, tau))
        return tau

    aligned = align.aligned_temperature
    monkeypatch.setattr(align, "aligned_temperature", spy)
    rc = main(["eval", str(runs["rope"]), "--lengths", "64", "--tokens", "128", "--extend", "rerope:window=4",
               "--temperature", "auto", "--json"])  # fmt: skip
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"] == "rope+rerope:window=4" and rep["temperature"]["mode"] == "auto"
    assert [L for L, *_ in seen] == [32, 64]  # 32 = L_tr: τ = 1 without a search
    _, spec, stream, tau = seen[1]
    assert spec == "rerope:window=4" and rep["temperature"]["tau"]["64"] == tau == rep["results"][1]["temperature"]
    ext, plain = extrap.load(runs["rope"]), extrap.load(runs["rope"])
    extend_run(ext, "rerope:window=4")
    on_ext, on_plain = (algorithm1(r.model, stream, L_TR, 64).search for r in (ext, plain))
    assert on_ext.tau == tau and on_ext.curve != on_plain.curve  # the search read the extended attention
    assert aligned(ext.model, stream, L_TR, 64, "prop2") != aligned(plain.model, stream, L_TR, 64, "prop2")


def test_task_score_runs_the_extension_at_the_temperature(runs, capsys, monkeypatch):
    from extrap.extend.apply import GptExtension

    seen, call = set(), GptExtension.__call__

    def spy(self, attn, *a, **kw):
        seen.add((self.method.spec, round(float(attn.temperature), 6)))
        return call(self, attn, *a, **kw)

    monkeypatch.setattr(GptExtension, "__call__", spy)
    rc = main(["task", "score", str(runs["rope"]), "--task", "passkey", "--lengths", "96", "--n", "2",
               "--extend", "rerope:window=4", "--temperature", "0.8", "--json"])  # fmt: skip
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pe"] == "rope+rerope:window=4" and rep["temperature"] == 0.8 == rep["results"][0]["temperature"]
    assert seen == {("rerope:window=4", 0.8)}  # every attention call of the scoring, extended and at τ
    assert main(["task", "score", str(runs["rope"]), "--task", "niah_single", "--lengths", "256", "--n", "2",
                 "--extend", "rerope", "--temperature", "0.8"]) == 2  # fmt: skip
    assert "RULER" in _one_error_line(capsys)
