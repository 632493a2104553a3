import pytest
import torch

# Tests share two cores: keep torch from oversubscribing them.
torch.set_num_threads(1)


@pytest.fixture
def tiny_text(tmp_path):
    """A small real-text corpus (stdlib source files) as text:PATH, for fast training tests."""
    import sysconfig
    from pathlib import Path

    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py"))[:60]
    folder = tmp_path / "corpus"
    folder.mkdir()
    for p in files:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return f"text:{folder}"


@pytest.fixture(scope="session")
def stdlib_corpus(tmp_path_factory) -> str:
    """30 stdlib source files as text:PATH, one folder for the whole session (fine-tune and resume tests)."""
    import sysconfig
    from pathlib import Path

    folder = tmp_path_factory.mktemp("corpus")
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:30]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return f"text:{folder}"


@pytest.fixture(scope="session")
def hf_tokenizer():
    """A byte-level BPE tokenizer of 300 tokens trained on stdlib source, for tiny hf: models."""
    import sysconfig
    from pathlib import Path

    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    root = Path(sysconfig.get_paths()["stdlib"])
    text = [p.read_text(encoding="utf-8", errors="replace")[:4000] for p in sorted(root.glob("*.py"))[:5]]
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(text, vocab_size=300, min_frequency=1, show_progress=False)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer)


def save_tiny_llama(path, tokenizer, hidden: int, max_positions: int, classes=None, **extra):
    """A random Llama-family LM (2 layers, 4 heads, 2 key heads, 300 tokens; ``classes``: (config, model)
    classes, default Llama's) with ``tokenizer`` saved under ``path``; q and k projections x 8, for sharper
    attention than the random init's, so that positions matter."""
    transformers = pytest.importorskip("transformers")
    config_cls, model_cls = classes or (transformers.LlamaConfig, transformers.LlamaForCausalLM)
    torch.manual_seed(0)
    sizes = dict(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2, num_attention_heads=4)
    cfg = config_cls(vocab_size=300, num_key_value_heads=2, max_position_embeddings=max_positions, **sizes, **extra)
    cfg.sliding_window = None
    model = model_cls(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "q_proj" in name or "k_proj" in name:
                p.mul_(8)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _tiny_corpus_dir(root):
    import sysconfig
    from pathlib import Path

    src = Path(sysconfig.get_paths()["stdlib"])
    folder = root / "corpus"
    folder.mkdir(exist_ok=True)
    for p in sorted(src.glob("*.py"))[:60]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8", errors="replace"))
    return folder


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    """Tiny models trained for a few steps on real text, shared by the evaluation tests."""
    from extrap.train import build_configs, train

    root = tmp_path_factory.mktemp("runs")
    corpus = f"text:{_tiny_corpus_dir(root)}"
    runs = {}
    for pe in ("alibi", "window:1", "type1"):
        over = dict(steps=30, corpus=corpus, train_length=32)
        m, t = build_configs(pe, "smoke", overrides=over)
        if pe == "window:1":
            m.n_layer = 1
        d = root / pe.replace(":", "_")
        train(d, m, t, progress=False)
        runs[pe] = d
    return runs


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory, hf_tokenizer):
    """A tiny random Llama (L = 32) with a byte-level BPE tokenizer, saved as an HF folder."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("llama")
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    hf_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def smoke_alibi(tmp_path_factory, stdlib_corpus):
    """An ALiBi run of the smoke preset trained 30 steps at L_tr = 64 (PPL about 64), for evaluation tests."""
    from extrap.train import build_configs, train

    m, t = build_configs("alibi", "smoke", overrides=dict(steps=30, corpus=stdlib_corpus, train_length=64))
    out = tmp_path_factory.mktemp("smoke") / "alibi"
    train(out, m, t, progress=False)
    return out
