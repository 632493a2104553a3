"""LongPPL (``extrap eval --longppl``, Fang et al., ICLR 2025): the key-token rule by hand, the truncated contexts
by brute force, the rows of every protocol, parity with the authors' ``longppl`` package on a tiny hf: Llama,
windows, the records, and hostile flags."""

import csv as csv_module
import io
import json
import math
import random
import sysconfig
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import extrap
from extrap.cli import main
from extrap.errors import ExtrapError
from extrap.evaluate import EvalSettings
from extrap.evaluate.driver import evaluation_stream
from extrap.evaluate.longppl import (
    LongPPLSettings,
    Row,
    evaluator_losses,
    key_loss,
    key_tokens,
    longppl_report,
    protocol_rows,
    short_segments,
)
from extrap.evaluate.protocols import Plan
from extrap.evaluate.streaming import token_nll
from extrap.results.longppl import LongPPLReport


# --------------------------------------------------------------------------- the rule, by hand
def test_key_tokens_by_hand_strict_inequalities():
    # LSD = short - full: 2.01, 2.0, 2.51, 3.0, 2.0, 5.0; full: 1.0, 1.0, 1.99, 2.0, 0.5, 3.0
    full = torch.tensor([1.0, 1.0, 1.99, 2.0, 0.5, 3.0])
    short = torch.tensor([3.01, 3.0, 4.5, 5.0, 2.5, 8.0])
    assert key_tokens(full, short).tolist() == [True, False, True, False, False, False]  # α = 2, β = -2
    assert key_tokens(full, short, alpha=1.0, beta=-2.5).tolist() == [True, True, True, True, True, False]
    assert key_tokens(full, short, alpha=2.6, beta=-10.0).tolist() == [False, False, False, True, False, True]
    nll = torch.tensor([0.5, 9.0, 1.5, 9.0, 9.0, 9.0])
    assert key_loss(nll, key_tokens(full, short)) == pytest.approx(1.0)  # LongPPL = e^1
    assert key_loss(nll, torch.zeros(6, dtype=torch.bool)) is None


def test_blocks_mirror_the_authors_start_tokens():
    # the authors: for start in range(0, N - trunc, block), tokens start+trunc .. start+trunc+block-1 (N tokens)
    # here a row of T inputs is N = T + 1 tokens and position j predicts token j + 1
    T, trunc, block = 30, 8, 4
    segs = short_segments(Row(0, T, T), trunc, block)
    theirs = [(s, min(T + 1, s + trunc + block) - 1) for s in range(0, T + 1 - trunc, block)]
    assert segs == theirs
    assert short_segments(Row(0, T, 3), trunc, block) == [(20, 30)]  # only the blocks of the scored tail
    assert short_segments(Row(0, 7, 7), trunc, block) == []  # nothing cut: fewer than trunc tokens before any


class CopyModel(torch.nn.Module):
    """Predicts the token P back (a logit of 20) when the sequence holds it, else every token equally."""

    def __init__(self, vocab: int, period: int):
        super().__init__()
        self.vocab, self.period = vocab, period
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # so that model_device finds the cpu
        self.shape = SimpleNamespace(vocab_size=vocab, n_layer=1)

    def forward(self, idx, positions=None, *, window=None, last=None):
        B, T = idx.shape
        logits = torch.zeros(B, T, self.vocab)
        for j in range(self.period - 1, T):
            logits[:, j].scatter_(1, idx[:, j + 1 - self.period, None], 20.0)
        return SimpleNamespace(logits=logits if last is None else logits[:, -last:])


def test_key_tokens_of_a_copy_model_counted_by_hand():
    """Period 10, trunc 8, blocks of 4: position j copies with the whole row when j >= 9, and with block
    context 8 + k only when k >= 2; key: j >= 9 with k = (j - 7) mod 4 in {0, 1}."""
    model, stream = CopyModel(16, 10), torch.arange(200) % 10
    full, short = evaluator_losses(model, stream, [Row(0, 32, 32)], trunc=8, block=4)
    key = key_tokens(full, short)
    hand = [11, 12, 15, 16, 19, 20, 23, 24, 27, 28, 31]
    assert torch.nonzero(key).flatten().tolist() == hand
    assert float(short[11] - full[11]) == pytest.approx(math.log(16), abs=1e-4)  # uniform against a sure copy
    nll = torch.arange(32, dtype=torch.float32) / 10  # an evaluated model's losses
    assert math.exp(key_loss(nll, key)) == pytest.approx(math.exp(sum(hand) / 110), rel=1e-6)
    # rows scored only in part (sliding, last-token), and at another start: the same rule in row coordinates
    full, short = evaluator_losses(model, stream, [Row(0, 32, 10), Row(50, 32, 1), Row(3, 20, 20)], 8, 4)
    got = torch.nonzero(key_tokens(full, short)).flatten().tolist()
    assert got == [1, 2, 5, 6, 9] + [10] + [11 + j for j in (11, 12, 15, 16, 19)]


def test_failures_are_recorded_per_length():
    from extrap.evaluate.longppl import longppl_at
    from extrap.results.evaluation import LengthResult

    stream, spec = torch.arange(200) % 10, LongPPLSettings()
    plan = Plan(None, stream, "nonoverlapping", 64, None, 8, 8, 32)
    failed = LengthResult(32, None, 0, 0.1, error="out of memory")
    assert longppl_at(failed, CopyModel(16, 10), plan, 8, 4, spec).error == "the evaluation failed at this length"
    ok = LengthResult(32, 0.5, 64, 0.1, nll=torch.full((64,), 0.5))

    class Broken(CopyModel):
        def forward(self, idx, positions=None, *, window=None, last=None):
            raise RuntimeError("position 40 is beyond the table\nmore")

    class NaNModel(CopyModel):
        def forward(self, idx, positions=None, *, window=None, last=None):
            out = super().forward(idx, positions, window=window, last=last)
            return SimpleNamespace(logits=out.logits * math.nan)

    r = longppl_at(ok, Broken(16, 10), plan, 8, 4, spec)
    assert r.error == "the evaluator failed: position 40 is beyond the table" and r.ppl == pytest.approx(math.e**0.5)
    assert longppl_at(ok, NaNModel(16, 10), plan, 8, 4, spec).error == "the evaluator's loss is not finite"
    good = longppl_at(ok, CopyModel(16, 10), plan, 8, 4, spec)  # two rows of 32: 11 key tokens each
    assert (good.key_tokens, good.tokens, good.error) == (22, 64, None) and good.longppl == pytest.approx(math.e**0.5)


# --------------------------------------------------------------------------- a tiny extrap run
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("lp")
    folder = root / "corpus"
    folder.mkdir()
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:40]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    m, t = build_configs("alibi", "smoke", overrides=dict(steps=6, corpus=f"text:{folder}", train_length=32))
    train(root / "run", m, t, progress=False)
    return root / "run"


@pytest.fixture(scope="module")
def run(run_dir):
    return extrap.load(run_dir)


@pytest.mark.parametrize(
    "protocol,extra", [("nonoverlapping", {}), ("sliding", {"stride": 16}), ("last-token", {"targets": 6})]
)
def test_rows_are_the_evaluations_own(run, protocol, extra):
    """With itself as evaluator and exact attention, the evaluator's whole-row losses are the evaluation's."""
    s = EvalSettings(lengths=(32, 80), protocol=protocol, tokens=None if extra.get("targets") else 240, **extra)
    rep = longppl_report(run, s, spec=LongPPLSettings(alpha=0.0, beta=-100.0))
    stream, tokens = evaluation_stream(run, s, [32, 80])
    plan = Plan(run.model, stream, protocol, tokens or 80, s.stride, s.targets, s.batch, 80)
    for r in rep.report.results:
        rows = protocol_rows(plan, r.length)
        full, short = evaluator_losses(run.model, stream, rows, 32, 8)
        torch.testing.assert_close(full, r.nll.float(), atol=1e-4, rtol=1e-4)
        lp = rep.longppl.result_at(r.length)
        assert lp.tokens == r.tokens == full.numel() and lp.ppl == pytest.approx(r.ppl)
        assert torch.equal(lp.key, key_tokens(full, short, 0.0, -100.0))
    assert rep.longppl.result_at(80).key_tokens > 0  # α = 0: any gain from the cut context is key


@torch.no_grad()
def test_truncated_losses_by_brute_force(run):
    """Every position's loss_short is the model's loss on the block's cut context alone, one forward each."""
    stream = torch.arange(0, 2000) * 7 % 251
    trunc, block, T = 32, 8, 70
    full, short = evaluator_losses(run.model, stream, [Row(5, T, T)], trunc, block, batch=3)
    x, y = stream[5 : 5 + T].long(), stream[6 : 6 + T + 1].long()
    for j in range(T):
        s = 0 if j < trunc - 1 else (j - trunc + 1) // block * block  # the authors' start_token of its block
        want = token_nll(run.model, x[None, s : j + 1], y[None, s : j + 1])[0, -1]
        assert float(short[j]) == pytest.approx(float(want), abs=1e-5), j
        whole = token_nll(run.model, x[None, : j + 1], y[None, : j + 1])[0, -1]
        assert float(full[j]) == pytest.approx(float(whole), abs=1e-5), j


def test_defaults_at_4k_are_the_packages_and_the_help_says_so(capsys):
    """The longppl package's compute_longppl defaults are trunc_len=4096, sliding_window=1024 (0.3.0)."""
    assert LongPPLSettings().block_size(4096) == 1024
    assert LongPPLSettings().block_size(128) == 32  # scaled with L_tr, not fixed
    assert main(["eval", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "default 0.25: 1024 tokens at L_tr = 4096" in text and "4096 for a run trained at 4k" in text


def cli_json(capsys, argv):
    assert main([str(a) for a in argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_window_json_csv_and_records(run_dir, capsys, tmp_path):
    """--window: the evaluated losses are streamed, the evaluator stays exact, so the key tokens do not change."""
    base = ["eval", run_dir, "--lengths", "32,96", "--tokens", "192", "--json"]
    lp = ["--longppl", "--longppl-alpha", "0", "--longppl-beta", "-100", "--longppl-block", "0.5"]
    plain = cli_json(capsys, base)
    assert "longppl" not in plain
    exact = cli_json(capsys, base + lp)
    csv = tmp_path / "lp.csv"
    windowed = cli_json(capsys, base + lp + ["--window", "8", "--csv", csv])
    assert set(exact) - {"longppl"} == set(plain)  # the report itself is unchanged: only the key is added
    assert [r["loss"] for r in exact["results"]] == [r["loss"] for r in plain["results"]]
    info = exact["longppl"]
    assert (info["alpha"], info["beta"], info["trunc_len"], info["block"], info["evaluator"]) == (
        0.0,
        -100.0,
        32,
        16,
        str(run_dir),
    )
    for e, w, r in zip(info["results"], windowed["longppl"]["results"], windowed["results"], strict=True):
        assert e["key_tokens"] == w["key_tokens"] and w["ppl"] == pytest.approx(r["ppl"])
    long_ = windowed["longppl"]["results"][1]
    assert long_["key_tokens"] > 0 and long_["longppl"] == pytest.approx(math.exp(long_["key_loss"]))
    assert windowed["results"][1]["window"] == 8
    rows = list(csv_module.DictReader(io.StringIO(csv.read_text())))
    assert len(rows) == 2 and rows[1]["longppl.key_tokens"] == str(long_["key_tokens"])
    assert float(rows[1]["longppl.longppl"]) == long_["longppl"] and rows[1]["longppl.evaluator"] == str(run_dir)
    back = LongPPLReport.from_json(windowed)
    assert back.to_json() == windowed
    assert "longppl" not in back.report.provenance.source
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--lengths", "32,96", "--tokens", "192", "--longppl"]) == 0
    assert "LongPPL (Fang et al. 2025)" in capsys.readouterr().out


# --------------------------------------------------------------------------- parity with the authors' package
@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """Two tiny random hf: Llamas (seeds 0 and 1) on one word-level tokenizer (no special tokens, clean offsets),
    and a corpus of words with repeated phrases."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    root = tmp_path_factory.mktemp("llama")
    words = [f"w{i}" for i in range(40)]
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    wl = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    wl.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=wl, unk_token="[UNK]")
    rng = random.Random(0)
    phrases = [[rng.choice(words) for _ in range(12)] for _ in range(6)]
    lines = [" ".join(rng.choice(phrases) if rng.random() < 0.5 else rng.choices(words, k=12)) for _ in range(3000)]
    (root / "corpus.txt").write_text("\n".join(lines) + "\n")
    folders = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        cfg = transformers.LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            initializer_range=0.3,  # peaked, context-dependent predictions: key tokens at α = 2
        )
        folder = root / f"llama{seed}"
        transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
        tok.save_pretrained(folder)
        folders.append(folder)
    return SimpleNamespace(folders=folders, tok=tok, corpus=f"text:{root / 'corpus.txt'}")


@pytest.mark.parametrize("alpha,beta,other", [(2.0, -2.0, False), (0.5, -4.0, False), (1.0, -3.0, True)])
def test_parity_with_the_authors_package(llama, capsys, alpha, beta, other):
    """The same text through ``longppl.compute_longppl`` (and its ``find_key_token``) and ``extrap eval --longppl``
    on the same hf: model: the same key tokens, LongPPL to 1e-5.  L = 250: the authors' last block must hold
    more than one token (one would be squeezed to a 0-d tensor, which their loop cannot iterate)."""
    reference = pytest.importorskip("longppl.longppl")
    transformers = pytest.importorskip("transformers")
    L, trunc, block = 250, 32, 8
    model, judge = llama.folders[0], llama.folders[1 if other else 0]
    hf = ["--train-length", trunc, "--corpus", llama.corpus, "--device", "cpu"]
    flags = ["--longppl", "--longppl-alpha", alpha, "--longppl-beta", beta, "--longppl-block", block / trunc]
    argv = ["eval", f"hf:{model}", "--lengths", L, "--tokens", L, *hf, *flags, "--json"]
    out = cli_json(capsys, argv + (["--evaluator", f"hf:{judge}"] if other else []))
    ours = next(r for r in out["longppl"]["results"] if r["length"] == L)

    run = extrap.load(f"hf:{model}", device="cpu", train_length=trunc, corpus=llama.corpus)
    stream, _ = evaluation_stream(run, EvalSettings(lengths=(L,), tokens=L), [trunc, L])
    ids = stream[: L + 1].tolist()
    text = llama.tok.decode(ids)
    encoded = llama.tok(text, return_offsets_mapping=True)
    assert encoded["input_ids"] == ids  # the package re-tokenizes the text: the same L + 1 tokens
    m = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    j = transformers.AutoModelForCausalLM.from_pretrained(judge, dtype=torch.float32)
    theirs = reference.compute_longppl(text, m, j, llama.tok, llama.tok, None, trunc, block, alpha, beta)
    spans = reference.find_key_token(text, j, llama.tok, trunc, block, None, alpha, beta)
    their_keys = reference.cal_overlap(encoded["offset_mapping"], spans.tolist())  # loss indices, as theirs

    mine = extrap.load(f"hf:{judge}", device="cpu", train_length=trunc, corpus=llama.corpus) if other else None
    spec = LongPPLSettings(alpha, beta, block / trunc)
    res = longppl_report(run, EvalSettings(lengths=(L,), tokens=L), mine, spec).longppl.result_at(L)
    assert torch.nonzero(res.key).flatten().tolist() == their_keys
    assert ours["key_tokens"] == theirs["n_key_token"] == len(their_keys) > 0
    assert ours["longppl"] == pytest.approx(float(theirs["longppl"]), rel=1e-5)
    assert ours["ppl"] == pytest.approx(float(theirs["ppl"]), rel=1e-5)


# --------------------------------------------------------------------------- hostile input
def refused(capsys, argv, *fragments):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.splitlines()
    errors = [line for line in err if line.startswith("extrap: error:")]
    assert rc == 2 and len(errors) == 1, (rc, err)
    assert not any("Traceback" in line for line in err), err
    for f in fragments:
        assert f in errors[0], (f, errors[0])


@pytest.mark.parametrize(
    "flags,fragment",
    [
        (["--longppl", "--longppl-alpha", "nan"], "alpha"),
        (["--longppl", "--longppl-alpha", "inf"], "alpha"),
        (["--longppl", "--longppl-alpha", "-1"], "alpha"),
        (["--longppl", "--longppl-alpha", "two"], "--longppl-alpha"),
        (["--longppl", "--longppl-beta", "0"], "beta"),
        (["--longppl", "--longppl-beta", "2"], "beta"),
        (["--longppl", "--longppl-beta", "-inf"], "beta"),
        (["--longppl", "--longppl-block", "0"], "block"),
        (["--longppl", "--longppl-block", "1.5"], "block"),
        (["--longppl", "--longppl-block", "nan"], "block"),
        (["--longppl-alpha", "1"], "only with --longppl"),
        (["--evaluator", "RUN"], "only with --longppl"),
        (["--longppl", "--evaluator", "NOPE"], "does not exist"),
        (["--longppl", "--evaluator", "EMPTY"], "not a run directory"),
        (["--longppl", "--evaluator", "hf:EMPTY"], "config.json"),
        (["--longppl", "--evaluator", "LLAMA"], "tokenizer"),
    ],
)
def test_hostile_longppl_flags(run_dir, llama, capsys, tmp_path, flags, fragment):
    (tmp_path / "empty").mkdir()
    names = {
        "RUN": str(run_dir),
        "NOPE": str(tmp_path / "nope"),
        "EMPTY": str(tmp_path / "empty"),
        "hf:EMPTY": f"hf:{tmp_path / 'empty'}",
        "LLAMA": f"hf:{llama.folders[0]}",
    }
    flags = [names.get(f, f) for f in flags]
    out, csv = tmp_path / "out.json", tmp_path / "out.csv"
    argv = ["eval", run_dir, "--lengths", "32,64", "--tokens", "128", *flags, "--out", out, "--csv", csv]
    refused(capsys, argv, fragment)
    assert not out.exists() and not csv.exists()


def test_longppl_refuses_file(run_dir, capsys, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("some text to score " * 20)
    refused(capsys, ["eval", run_dir, "--file", text, "--longppl", "--out", tmp_path / "o.json"], "not with --file")
    assert not (tmp_path / "o.json").exists()


def test_python_api_refuses_another_tokenizer(run, llama):
    other = extrap.load(f"hf:{llama.folders[0]}", device="cpu", train_length=32, corpus=llama.corpus)
    with pytest.raises(ExtrapError, match="another tokenizer"):
        longppl_report(run, EvalSettings(lengths=(32,), tokens=64), other)
    with pytest.raises(ExtrapError, match="block"):
        LongPPLSettings(block_fraction=0.0)
