"""T5 (encoder-decoder) from the command line: alignment of the encoder and task scoring, on tiny random T5s."""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from extrap.cli import main  # noqa: E402
from extrap.errors import ExtrapError  # noqa: E402

VOCAB = 300


@pytest.fixture(scope="module", autouse=True)
def _isolated_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXTRAP_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    import sysconfig
    from pathlib import Path

    folder = tmp_path_factory.mktemp("corpus")
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:30]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return f"text:{folder}"


def _save(folder, model, tokenizer):
    with torch.no_grad():  # bucket tables with a clearly non-zero spread, so that τ matters
        for m in model.modules():
            if hasattr(m, "relative_attention_bias"):
                m.relative_attention_bias.weight.normal_(0, 1)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _config():
    return transformers.T5Config(
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        vocab_size=VOCAB,
        dropout_rate=0.0,
        decoder_start_token_id=0,  # as in T5's released configs (its pad token)
    )


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory, hf_tokenizer):
    torch.manual_seed(0)
    return _save(tmp_path_factory.mktemp("t5"), transformers.T5ForConditionalGeneration(_config()), hf_tokenizer)


@pytest.fixture(scope="module")
def run(t5_dir):
    from extrap.run import load

    return load(f"hf:{t5_dir}", device="cpu", train_length=32)


def test_run_load_opens_t5_and_is_the_only_loader(t5_dir, run):
    """``extrap.run.load`` tells an extrap run, an hf: causal LM and an hf: T5 apart; no second loader is left."""
    import extrap
    from extrap.hf import t5_run
    from extrap.hf.t5_run import T5Model
    from extrap.model.protocol import ExtrapLM, Seq2SeqLM

    assert isinstance(run.model, T5Model) and isinstance(run.model, Seq2SeqLM)
    assert not isinstance(run.model, ExtrapLM)  # the encoder is aligned, never evaluated as a causal LM
    with pytest.raises(ExtrapError, match="encoder-decoder, not a causal LM"):
        run.model.new_cache()  # what evaluation, ERF and generation reach for is refused in one line
    assert run.train_length == 32 and run.pe == "hf:t5/t5-bias" and run.config.model_type == "t5"
    assert isinstance(extrap.load(f"hf:{t5_dir}", device="cpu").model, T5Model)
    assert not hasattr(t5_run, "load_run") and not hasattr(t5_run, "load_t5_run")
    with pytest.raises(ExtrapError, match="RoPE"):
        extrap.load(f"hf:{t5_dir}", device="cpu", rope="linear", factor=2.0)


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_align_cli_equals_python_api_and_t5_probes(t5_dir, run, corpus, capsys):
    from extrap.align import AlignSettings, align_report, segments_of
    from extrap.hf.t5 import t5_algorithm1
    from extrap.run import eval_stream

    argv = ["align", f"hf:{t5_dir}", "--train-length", "32", "--lengths", "64", "--segments", "2", "--corpus", corpus]
    cli = _json(capsys, [*argv, "--json"])
    run.use_corpus(corpus)
    stream = eval_stream(run, "validation", 65)
    report = align_report(run.model, stream, AlignSettings(32, [64], "pmax", segments=2))
    api = report.to_json()
    row, ref = cli["lengths"][0], api["lengths"][0]
    assert cli["pe"] == "hf:t5/t5-bias" and cli["reference"] == api["reference"]
    assert row["tau"] == ref["tau"] and row["after"]["pmax"] == pytest.approx(ref["after"]["pmax"])
    assert row["closed_form"]["prop2"] == pytest.approx(ref["closed_form"]["prop2"])
    assert 0.5 <= row["tau"] < 1.0 and row["after"]["pmax"] > row["before"]["pmax"]
    # extrap.hf.t5's own probes (forward hooks on every T5Attention) find the same τ on the same segments
    direct = t5_algorithm1(run.model.hf, segments_of(stream, 32, 2), segments_of(stream, 64, 2), "pmax")
    assert direct.tau == pytest.approx(report.lengths[0].tau, abs=1e-9)
    assert direct.target == pytest.approx(report.reference.stats.pmax, abs=1e-9)
    per_layer = _json(capsys, [*argv, "--per-layer", "--json"])["lengths"][0]
    api = align_report(run.model, stream, AlignSettings(32, [64], "pmax", per_layer=True, segments=2)).lengths[0]
    assert tuple(per_layer["tau"]) == api.tau and len(api.tau) == 2
    assert run.model.temperatures() == [1.0, 1.0]  # probes restore τ


def test_task_score_cli_equals_python_api(t5_dir, run, corpus, capsys):
    from extrap.tasks import TaskSettings, min_length, score_task

    L = min_length("passkey", run.tokenizer) + 20
    argv = ["task", "score", f"hf:{t5_dir}", "--task", "passkey", "--lengths", str(L), "--n", "6", "--corpus", corpus]
    for method in ("greedy", "rank"):
        cli = _json(capsys, [*argv, "--score", method, "--details", "--json"])
        settings = TaskSettings("passkey", [L], n=6, method=method, filler=corpus, details=True)
        api = score_task(run.model, run.tokenizer, settings)
        assert "error" not in cli["results"][0] and cli["results"][0]["n"] == 6
        assert cli["accuracy"] == api.accuracy
        assert [e["prediction"] for e in cli["examples"]] == [e.prediction for e in api.examples]
    cli = _json(capsys, [*argv, "--temperature", "0.9,0.7", "--json"])
    assert cli["temperature"] == [0.9, 0.7] and cli["results"][0]["temperature"] == [0.9, 0.7]
    more = ["--lengths", f"{L},{2 * L}", "--train-length", str(L), "--temperature", "auto:per-layer", "--json"]
    auto = _json(capsys, [*argv, *more])
    taus = [r["temperature"] for r in auto["results"]]
    assert taus[0] == [1.0, 1.0] and len(taus[1]) == 2 and all(0.5 <= t < 1.0 for t in taus[1])


def test_teacher_forced_loglik_is_the_decoders_and_reads_the_encoder(run, corpus):
    from extrap.tasks import make_example
    from extrap.tasks.seq2seq import encoder_ids, seq2seq_candidates, seq2seq_continuations

    tok, model = run.tokenizer, run.model
    ex = make_example("passkey", tok, 150, seed=3, filler=corpus)
    prompt, target = ex.prompt_ids(tok), tok.encode(ex.target)
    got = seq2seq_continuations(model, [(prompt, target)])[0]
    with torch.no_grad():  # transformers' own loss on the labels: mean negative log-likelihood
        loss = model.hf(input_ids=torch.tensor([encoder_ids(model, prompt)]), labels=torch.tensor([target])).loss
    assert got.loglik == pytest.approx(-float(loss) * len(target), abs=1e-4)
    other = ex.candidates[1]
    moved = tok.encode(ex.prompt.replace(ex.answer, other))
    assert moved != prompt
    changed = seq2seq_continuations(model, [(moved, target)])[0]
    assert abs(changed.loglik - got.loglik) > 1e-4  # the answer's likelihood depends on the prompt
    # a batch of prompts of different lengths (padded under the encoder mask) scores as one at a time
    short = make_example("passkey", tok, 120, seed=4, filler=corpus).prompt_ids(tok)
    both = seq2seq_continuations(model, [(prompt, target), (short, target)], batch=2)
    alone = seq2seq_continuations(model, [(short, target)])[0]
    assert both[0].loglik == pytest.approx(got.loglik, abs=1e-4)
    assert both[1].loglik == pytest.approx(alone.loglik, abs=1e-4)
    conts = [tok.encode(f" {c}\n") for c in ex.candidates]
    shared = seq2seq_candidates(model, prompt, conts)
    single = seq2seq_continuations(model, [(prompt, c) for c in conts])
    assert [s.loglik for s in shared] == pytest.approx([s.loglik for s in single], abs=1e-4)


def test_temperature_acts_on_the_encoder_only(run):
    from extrap.hf.t5 import get_t5_temperature

    model = run.model
    x = torch.randint(0, VOCAB, (1, 24))
    with torch.no_grad():
        base = model.encode(x)
        model.set_temperature([0.6, 0.9])
        try:
            assert get_t5_temperature(model.hf, "encoder") == [0.6, 0.9]
            assert set(get_t5_temperature(model.hf, "decoder") + get_t5_temperature(model.hf, "cross")) == {1.0}
            assert (model.encode(x) - base).abs().max() > 1e-3
        finally:
            model.set_temperature(1.0)
        assert torch.equal(model.encode(x), base)
    with pytest.raises(ExtrapError, match="3 values given for a model with 2 layers"):
        from extrap.tasks import TaskSettings, score_task

        score_task(model, run.tokenizer, TaskSettings("passkey", [150], n=1, temperature=[1.0, 0.9, 0.8]))


def test_encoder_only_checkpoint_aligns_but_cannot_score(tmp_path, corpus, capsys, hf_tokenizer):
    torch.manual_seed(1)
    folder = _save(tmp_path / "enc", transformers.T5EncoderModel(_config()), hf_tokenizer)
    argv = ["align", f"hf:{folder}", "--train-length", "32", "--lengths", "48", "--segments", "1", "--corpus", corpus]
    assert 0.5 <= _json(capsys, [*argv, "--json"])["lengths"][0]["tau"] <= 1.0
    assert main(["task", "score", f"hf:{folder}", "--task", "passkey", "--lengths", "200", "--corpus", corpus]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("extrap: error:")]
    assert len(err) == 1 and "decoder" in err[0], err
    # what extrap does not read is still one line
    cfg = transformers.MT5Config(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2, vocab_size=VOCAB)
    transformers.MT5ForConditionalGeneration(cfg).save_pretrained(tmp_path / "mt5")
    assert main(["align", f"hf:{tmp_path / 'mt5'}", "--lengths", "64"]) == 2
    assert "not supported" in capsys.readouterr().err
