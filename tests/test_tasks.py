"""Retrieval tasks (extrap.tasks): generators, the task sampler, training on a task, scoring, CLI."""

from __future__ import annotations

import json
import re
import sysconfig
from pathlib import Path

import pytest
import torch

import extrap.cli as cli
from extrap.data import ByteTokenizer, get_tokenizer, load_corpus
from extrap.errors import ExtrapError
from extrap.model import GPT, ModelConfig, Output
from extrap.tasks import (
    IGNORE_INDEX,
    TASKS,
    TOPICS,
    Example,
    Filler,
    TaskReport,
    TaskRun,
    TaskSampler,
    TaskSettings,
    make_example,
    min_length,
    sanitize,
    score_candidates,
    score_continuations,
    score_task,
)

BYTES = ByteTokenizer()


# ---------------------------------------------------------------------------
# fixtures: a small real-text corpus, its filler, a tiny BPE
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def _isolated_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXTRAP_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def corpus_spec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    src = Path(sysconfig.get_paths()["stdlib"])
    for p in sorted(src.glob("*.py"))[:40]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return f"text:{folder}"


@pytest.fixture(scope="module")
def filler(corpus_spec):
    return Filler(load_corpus(corpus_spec).splits["train"], "tiny")


@pytest.fixture(scope="module")
def bpe(corpus_spec):
    return get_tokenizer("bpe:400", load_corpus(corpus_spec))


@pytest.fixture
def with_task_cli(monkeypatch):
    if "extrap.commands.task" not in cli.COMMAND_MODULES:
        monkeypatch.setattr(cli, "COMMAND_MODULES", [*cli.COMMAND_MODULES, "extrap.commands.task"])


# ---------------------------------------------------------------------------
# generators
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_same_seed_same_example_other_seed_differs(task, filler):
    a = make_example(task, BYTES, 400, seed=7, filler=filler)
    b = make_example(task, BYTES, 400, seed=7, filler=filler)
    c = make_example(task, BYTES, 400, seed=8, filler=filler)
    assert a == b
    assert a.prompt != c.prompt and a.answer != c.answer
    assert Example.from_json(json.loads(json.dumps(a.to_json()))) == a  # the JSON round trip
    assert list(a.to_json())[:3] == ["task", "seed", "length"] and ("topics" in a.to_json()) == (task == "topic")


@pytest.mark.parametrize("tok_name", ["bytes", "bpe"])
@pytest.mark.parametrize("task", TASKS)
def test_answer_once_and_length_within_tolerance(task, tok_name, filler, bpe):
    tok = BYTES if tok_name == "bytes" else bpe
    for include in (False, True):
        need = min_length(task, tok, include_target=include)
        for L, seed in [(need, s) for s in range(4)] + [(need + 17, 0), (300, 1), (300, 2), (1200, 3)]:
            if True:
                ex = make_example(task, tok, L, seed=seed, filler=filler, include_target=include)
                total = ex.prompt_tokens + (ex.target_tokens if include else 0)
                assert 0.9 * L <= total <= L, (task, L, seed, total)
                assert ex.prompt_tokens == len(tok.encode(ex.prompt))
                assert ex.prompt.count(ex.answer) == 1
                assert ex.target == f" {ex.answer}\n"
                cands = ex.candidates
                assert cands[0] == ex.answer and len(set(cands)) == len(cands) >= 2
                assert 0.0 <= ex.depth <= 1.0
    ex = make_example("line", tok, 1200, seed=0)
    assert all(ex.prompt.count(v) == 1 for v in ex.candidates)  # other values come from the prompt


def test_topic_candidates_are_topics_of_the_conversation_each_once(filler):
    ex = make_example("topic", BYTES, 2000, seed=3, filler=filler, depth=0.0)
    assert ex.answer == ex.topics[0] and set(ex.candidates) <= set(ex.topics)
    assert all(ex.prompt.lower().count(t) == 1 for t in ex.topics)
    assert ex.prompt.startswith(f"USER: Let's talk about {ex.answer}.")
    assert ex.prompt.endswith("ASSISTANT: The first topic was")


def test_topic_names_are_not_substrings_of_each_other():
    assert len(set(TOPICS)) == len(TOPICS)
    assert not [(a, b) for a in TOPICS for b in TOPICS if a != b and a in b]


@pytest.mark.parametrize("tok_name", ["bytes", "bpe"])
@pytest.mark.parametrize("task", ["passkey", "line"])
def test_depth_places_the_needle_where_asked(task, tok_name, filler, bpe):
    tok = BYTES if tok_name == "bytes" else bpe
    for want in (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0):
        ex = make_example(task, tok, 1500, seed=1, filler=filler, depth=want)
        assert abs(ex.depth - want) < 0.04, (want, ex.depth)
        needle = "The pass key is " if task == "passkey" else f"line {ex.key}:"
        start = ex.prompt.index(needle)
        assert ex.needle_token == len(tok.encode(ex.prompt[:start]))
        rel = ex.needle_token / ex.prompt_tokens
        assert abs(rel - want) < 0.12  # the final question (and line's header) sit outside the haystack


def test_topic_depth_moves_the_first_topic(filler):
    depths = [
        make_example("topic", BYTES, 2000, seed=2, filler=filler, depth=d, n_topics=4).depth for d in (0.0, 0.25, 0.5)
    ]
    assert depths[0] == 0.0 and depths == sorted(depths) and abs(depths[2] - 0.5) < 0.08


@pytest.mark.parametrize("task", TASKS)
def test_too_short_length_is_an_error(task, filler):
    need = min_length(task, BYTES)
    with pytest.raises(ExtrapError, match="below the minimum"):
        make_example(task, BYTES, need - 5, filler=filler)
    make_example(task, BYTES, need, filler=filler)  # the minimum itself works
    with pytest.raises(ExtrapError, match="depth"):
        make_example(task, BYTES, 500, filler=filler, depth=1.5)
    with pytest.raises(ExtrapError, match="unknown task"):
        make_example("haystack", BYTES, 500)


def test_filler_is_sanitised():
    clean = sanitize("x = 42  # the pass key\nUSER: hi\nprint(3.14)\nThe topic is\n\tdef f(a):  return a\ncafé ok\n")
    assert clean == "print(.)\ndef f(a): return a\ncaf ok"
    with pytest.raises(ExtrapError, match="usable characters"):
        Filler("1 2 3 4")


# ---------------------------------------------------------------------------
# task sampler
# ---------------------------------------------------------------------------
def test_task_sampler_scores_only_the_answer(filler, bpe):
    for tok in (BYTES, bpe):
        s = TaskSampler("passkey", tok, batch_size=3, length=128, seed=0, filler=filler)
        x, y = s.next()
        assert x.shape == y.shape == (3, 128)
        for r in range(3):
            ex = s.example(r)
            scored = y[r][y[r] != IGNORE_INDEX].tolist()
            assert tok.decode(scored) == ex.target
            n = ex.prompt_tokens + ex.target_tokens
            assert torch.equal(x[r, 1 : n - 1], torch.tensor(tok.encode(ex.prompt) + tok.encode(ex.target))[1:-1])


def test_task_sampler_resumes_exactly_and_mixes_lm(filler):
    from extrap.data import BatchSampler

    stream = torch.randint(0, 256, (5000,), dtype=torch.int32)

    def make():
        lm = BatchSampler(stream, 4, 192, seed=5)
        return TaskSampler("line", BYTES, 4, 192, seed=5, filler=filler, lm=lm, mix=0.5)

    a = make()
    ref = [a.next() for _ in range(8)]
    kinds = [bool((y == IGNORE_INDEX).any()) for _, y in ref]
    assert any(kinds) and not all(kinds)  # both task and LM batches
    b = make()
    for _ in range(3):
        b.next()
    state = b.state_dict()
    c = make()
    c.load_state_dict(state)
    for k in range(3, 8):
        x, y = c.next()
        assert torch.equal(x, ref[k][0]) and torch.equal(y, ref[k][1])
    with pytest.raises(ExtrapError, match="cannot resume"):
        TaskSampler("passkey", BYTES, 4, 192, seed=5, filler=filler).load_state_dict(state)
    # two ranks of 2 rows see the rows of one process with 4
    one = TaskSampler("passkey", BYTES, 4, 96, seed=1, filler=filler).next()[0]
    ranks = [
        TaskSampler("passkey", BYTES, 2, 96, seed=1, rank=r, world_size=2, filler=filler).next()[0] for r in range(2)
    ]
    assert torch.equal(torch.cat(ranks), one)
    with pytest.raises(ExtrapError, match="training length"):
        TaskSampler("topic", BYTES, 2, 64, filler=filler)


# ---------------------------------------------------------------------------
# training on a task
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def passkey_run(tmp_path_factory, corpus_spec):
    from extrap.train import build_configs, train

    m, t = build_configs(
        "alibi",
        "smoke",
        overrides=dict(steps=40, train_length=128, corpus=corpus_spec, task="passkey", log_every=2, save_every=20),
    )
    run = tmp_path_factory.mktemp("task-run") / "passkey"
    train(run, m, t, progress=False)
    return run


def test_training_on_passkey_lowers_the_answer_loss(passkey_run):
    cfg = json.loads((passkey_run / "config.json").read_text())
    assert cfg["train"]["task"] == "passkey" and cfg["train"]["task_mix"] == 0.0
    losses = [json.loads(ln)["loss"] for ln in (passkey_run / "metrics.jsonl").read_text().splitlines()]
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert first > 4.0 and last < first - 1.5, losses  # ln 256 = 5.5 at the start; digits are ln 10 = 2.3


def test_task_training_resumes_bit_identically(tmp_path, corpus_spec):
    from extrap.train import build_configs, train

    over = dict(steps=8, train_length=96, corpus=corpus_spec, task="passkey", task_mix=0.25, save_every=4, batch_size=4)
    m, t = build_configs("alibi", "smoke", overrides=over)
    ref = train(tmp_path / "ref", m, t, progress=False)
    m, t = build_configs("alibi", "smoke", overrides=over)
    train(tmp_path / "cut", m, t, progress=False, stop_after=4)
    m, t = build_configs("alibi", "smoke", overrides=over)
    resumed = train(tmp_path / "cut", m, t, progress=False, resume=True)
    assert resumed.final_loss == ref.final_loss


# ---------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------
def _line_value(s: str) -> str:
    key = re.search(r"in line (\w+)\? It is", s)[1]
    return re.search(f"line {key}: REGISTER_CONTENT is ([0-9]+)", s)[1]


_SOLVERS = {
    "passkey": ("What is the pass key? The pass key is", lambda s: re.search(r"The pass key is (\d+)\. Re", s)[1]),
    "line": ("? It is", _line_value),
    "topic": ("ASSISTANT: The first topic was", lambda s: re.search(r"Let's talk about ([a-z ]+)\.", s)[1]),
}


class Oracle(torch.nn.Module):
    """Reads the prompt (bytes) and predicts the target one-hot; ``wrong`` predicts another answer."""

    def __init__(self, task: str, wrong: bool = False):
        super().__init__()
        self.suffix, self.solve = _SOLVERS[task]
        self.wrong = wrong

    def forward(self, idx, positions=None, *, window=None, last=None, return_probs=False):
        B, L = idx.shape
        logits = torch.zeros(B, L, 256)
        for b in range(B):
            text = bytes(idx[b].tolist()).decode("ascii", errors="replace")
            end = text.rfind(self.suffix) + len(self.suffix)
            answer = self.solve(text[:end])
            if self.wrong:
                answer = answer[:-1] + ("x" if answer[-1] != "x" else "y")
            for k, ch in enumerate(f" {answer}\n"):
                if end - 1 + k < L:
                    logits[b, end - 1 + k, ord(ch)] = 10.0
        return Output(logits=logits if last is None else logits[:, -last:])


@pytest.mark.parametrize("task", TASKS)
def test_oracle_scores_one_and_a_wrong_oracle_zero(task, filler):
    lengths = [min_length(task, BYTES) + 10, 400]
    for method in ("greedy", "rank"):
        rep = score_task(
            Oracle(task), BYTES, TaskSettings(task, lengths, n=10, seed=1, method=method, filler=filler, details=True)
        )
        assert rep.accuracy == 1.0 and all(r.accuracy == 1.0 for r in rep.results)
        assert {"task", "method", "n", "seed", "buckets", "temperature", "results", "by_depth"} <= set(rep.to_json())
        assert TaskReport.from_json(json.loads(json.dumps(rep.to_json()))).to_json() == rep.to_json()
        r = rep.results[1]
        assert {"length", "n", "correct", "accuracy", "mean_prompt_tokens", "seconds", "by_depth"} <= set(r.to_json())
        assert len(r.by_depth) == 5 and sum(b.n for b in r.by_depth) == 10
        assert sum(b.n for b in rep.by_depth) == 20 and len(rep.examples) == 20
        assert all(e.prediction == e.answer for e in rep.examples)
    rep = score_task(Oracle(task, wrong=True), BYTES, TaskSettings(task, lengths, n=10, seed=1, filler=filler))
    assert rep.accuracy == 0.0
    if task == "passkey":  # stratified depths fill every bucket (line and topic: as finely as lines allow)
        assert all(1 <= b.n <= 3 for b in rep.results[1].by_depth)


def test_greedy_scoring_equals_greedy_decoding(filler):
    from extrap.model.generate import generate

    torch.manual_seed(0)
    model = GPT(ModelConfig(pe="alibi", n_layer=1, d_model=16, n_head=2)).eval()
    examples = [make_example("passkey", BYTES, 90 + 7 * i, seed=i, filler=filler) for i in range(3)]
    prompts = [BYTES.encode(e.prompt) for e in examples]
    targets = [BYTES.encode(e.target) for e in examples]
    scored = score_continuations(model, list(zip(prompts, targets)), batch=2)
    for p, t, s in zip(prompts, targets, scored):
        out = generate(model, torch.tensor([p]), len(t))[0, len(p) :].tolist()
        assert s.greedy == (out == t)
        assert out[: len(s.prediction)] == s.prediction
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([p + t])).logits[0, len(p) - 1 : -1], -1)
        assert s.loglik == pytest.approx(float(logp.gather(1, torch.tensor(t)[:, None]).sum()), abs=1e-4)


@pytest.mark.parametrize("pe", ["t5", "alibi", "rope", "sinusoidal"])
def test_ranking_shares_the_prompt_and_equals_one_pass_per_candidate(pe, filler, monkeypatch):
    torch.manual_seed(0)
    model = GPT(ModelConfig(pe=pe, n_layer=2, d_model=16, n_head=2)).eval()
    ex = make_example("topic", BYTES, 300, seed=0, filler=filler)  # candidates of different token lengths
    prompt, conts = BYTES.encode(ex.prompt), [BYTES.encode(f" {c}\n") for c in ex.candidates]
    for tau in (1.0, 0.7):
        model.set_temperature(tau)
        shared = score_candidates(model, prompt, conts)
        single = score_continuations(model, [(prompt, c) for c in conts])
        for a, b in zip(shared, single):
            assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
            assert (a.greedy, a.prediction) == (b.greedy, b.prediction)
    calls = []  # one pass over the prompt, however many candidates: forward() is never called
    monkeypatch.setattr(model, "forward", lambda *a, **k: calls.append(1))
    rep = score_task(model, BYTES, TaskSettings("topic", [300], n=2, method="rank", filler=filler))
    assert not calls and rep.results[0].n == 2


def test_temperature_is_applied_then_restored(filler, monkeypatch):
    model = GPT(ModelConfig(pe="alibi", n_layer=2, d_model=16, n_head=2)).eval()
    seen = []
    real = model.forward

    def spy(*a, **k):
        seen.append([float(b.attn.temperature) for b in model.blocks])
        return real(*a, **k)

    monkeypatch.setattr(model, "forward", spy)
    rep = score_task(model, BYTES, TaskSettings("passkey", [100], n=2, temperature=0.7, filler=filler))
    assert rep.temperature == 0.7 and rep.results[0].temperature == 0.7
    assert seen and all(t == pytest.approx([0.7, 0.7]) for t in seen)
    assert [float(b.attn.temperature) for b in model.blocks] == [1.0, 1.0]
    with pytest.raises(ExtrapError, match="temperature"):
        score_task(model, BYTES, TaskSettings("passkey", [100], n=2, temperature="hot", filler=filler))
    try:
        from extrap.align import aligned_temperature  # noqa: F401
    except ImportError:
        with pytest.raises(ExtrapError, match="temperature auto needs extrap.align"):
            score_task(model, BYTES, TaskSettings("passkey", [100], n=2, temperature="auto", filler=filler))
    else:  # 004 Algorithm 1 on the task prompts: nothing to align at L_tr, a grid τ beyond it
        with pytest.raises(ExtrapError, match="training length"):
            score_task(model, BYTES, TaskSettings("passkey", [100], n=2, temperature="auto", filler=filler))
        with pytest.raises(ExtrapError, match="mode"):
            score_task(model, BYTES, TaskSettings("passkey", [100], n=2, temperature="auto:magic", train_length=100))
        rep = score_task(
            model, BYTES, TaskSettings("passkey", [100, 300], n=2, temperature="auto", train_length=100, filler=filler)
        )
        taus = [r.temperature for r in rep.results]
        assert rep.temperature == "auto" and taus[0] == 1.0 and 0.5 <= taus[1] <= 1.0, rep
        assert [float(b.attn.temperature) for b in model.blocks] == [1.0, 1.0]
    with pytest.raises(ExtrapError, match="below the minimum"):
        score_task(model, BYTES, TaskSettings("line", [50, 400], n=2))
    with pytest.raises(ExtrapError, match="method"):
        score_task(model, BYTES, TaskSettings("line", [400], n=2, method="beam"))


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def test_cli_sample_prints_an_example(with_task_cli, capsys, corpus_spec):
    assert cli.main(["task", "sample", "--task", "line", "--length", "300", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "REGISTER_CONTENT" in out and "--- target" in out
    assert cli.main(["task", "sample", "--task", "passkey", "--length", "200", "--corpus", corpus_spec, "--json"]) == 0
    ex = json.loads(capsys.readouterr().out)
    assert ex["prompt"].count(ex["answer"]) == 1 and ex["prompt_tokens"] <= 200


def test_cli_score_a_task_run(with_task_cli, capsys, passkey_run, tmp_path):
    out_file = tmp_path / "score.json"
    assert (
        cli.main(
            ["task", "score", str(passkey_run), "--lengths", "128,256", "--n", "5", "--json", "--out", str(out_file)]
        )
        == 0
    )
    rep = json.loads(capsys.readouterr().out)
    assert rep["task"] == "passkey" and rep["train_length"] == 128
    assert [r["length"] for r in rep["results"]] == [128, 256]
    assert json.loads(out_file.read_text())["accuracy"] == rep["accuracy"]
    assert TaskRun.from_json(rep).to_json() == rep  # the run, the report and the provenance read back
    assert (
        cli.main(
            [
                "task",
                "score",
                str(passkey_run),
                "--lengths",
                "128",
                "--n",
                "3",
                "--score",
                "rank",
                "--temperature",
                "0.9",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "task=passkey" in table and "0.0-0.2" in table


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["task", "sample", "--task", "passkey", "--length", "10"], "below the minimum"),
        (["task", "sample", "--task", "bogus", "--length", "300"], "invalid choice"),
        (["task", "sample", "--task", "line", "--length", "300", "--depth", "2"], "depth"),
        (["task", "score", "NOPE", "--task", "line"], "does not exist"),
        (["task", "score", "RUN", "--temperature", "hot"], "temperature"),
        (["task", "score", "RUN", "--lengths", "20"], "below the minimum"),
        (["task", "score", "RUN", "--temperature", "auto:magic"], "mode"),
        (["train", "--pe", "alibi", "--task", "bogus", "--out", "OUT"], "unknown task"),
        (["train", "--pe", "alibi", "--task-mix", "0.5", "--out", "OUT"], "task_mix needs a task"),
        (["train", "--pe", "alibi", "--task", "line", "--task-mix", "1.5", "--out", "OUT"], "task_mix must be"),
    ],
)
def test_cli_bad_input_is_one_line_and_status_2(with_task_cli, capsys, passkey_run, tmp_path, argv, needle):
    argv = [str(passkey_run) if a == "RUN" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
