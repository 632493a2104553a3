"""Tokenizers: raw UTF-8 bytes, or byte-level BPE trained on a corpus's train split.

Both are *byte-level*, so every string round-trips exactly and there is no
unknown token: a model's perplexity at long context is never distorted by
normalisation.  A trained BPE is cached per (corpus hash, vocabulary size), and
any tokenizer can be saved into a run folder as ``tokenizer.json`` and loaded
back without its corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from extrap.data.cache import cache_root
from extrap.data.corpora import Corpus
from extrap.errors import ExtrapError
from extrap.io import atomic_write_text

FILENAME = "tokenizer.json"
_CHUNK_CHARS = 1 << 20
_TRAIN_FORMAT = 1  # bump when training settings change, so cached tokenizers are retrained


class Tokenizer:
    """What the rest of extrap needs from a tokenizer."""

    name: str
    vocab_size: int

    def encode(self, text: str) -> list[int]:
        return self.encode_array(text).tolist()

    def encode_array(self, text: str) -> np.ndarray:
        """Token ids as a 1-D integer array (the fast path for whole splits)."""
        raise NotImplementedError

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def fingerprint(self) -> str:
        """Short hash of the full definition (two ``bpe:V`` trained on different data differ)."""
        blob = json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()[:16]

    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``<directory>/tokenizer.json`` (atomically); return its path."""
        path = Path(directory) / FILENAME
        atomic_write_text(path, json.dumps(self.to_json(), ensure_ascii=False))
        return path

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, vocab_size={self.vocab_size})"


class ByteTokenizer(Tokenizer):
    """One token per UTF-8 byte (vocabulary 256)."""

    name = "bytes"
    vocab_size = 256

    def encode_array(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        return bytes(np.asarray(ids, dtype=np.uint8).tobytes()).decode("utf-8", errors="replace")

    def to_json(self) -> dict[str, Any]:
        return {"type": "bytes"}


class BPETokenizer(Tokenizer):
    """A Hugging Face ``tokenizers`` byte-level BPE; saved as its standard JSON."""

    def __init__(self, hf_tokenizer: Any) -> None:
        self._tok = hf_tokenizer
        self.vocab_size = int(hf_tokenizer.get_vocab_size())
        self.name = f"bpe:{self.vocab_size}"

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text).ids)

    def encode_array(self, text: str) -> np.ndarray:
        chunks = list(_chunks(text))
        ids = [np.asarray(e.ids, dtype=np.int32) for e in self._tok.encode_batch(chunks)] if chunks else []
        return np.concatenate(ids) if ids else np.zeros(0, dtype=np.int32)

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        return self._tok.decode([int(i) for i in ids])

    def to_json(self) -> dict[str, Any]:
        return json.loads(self._tok.to_str())


# a newline between two visible ASCII characters (ASCII so Python's and Rust's idea of "space" agree)
_SAFE_CUT = re.compile(r"(?<=[!-~])\n(?=[!-~])")


def _chunks(text: str, size: int = _CHUNK_CHARS) -> Iterator[str]:
    """Pieces of ``text`` that encode to exactly the tokens of the whole.

    Cuts fall right after a lone newline between two visible characters: the
    byte-level pre-tokenizer (GPT-2 regex) then makes that newline a pre-token
    of its own whether or not the text continues, and no pre-token, hence no
    BPE merge, spans the cut.  (A newline after spaces would not be safe: at the
    end of a chunk it would join the spaces.)  This lets ``encode_batch``
    use every core on a multi-megabyte split.
    """
    start = 0
    while len(text) - start > size:
        m = _SAFE_CUT.search(text, start + size)
        if m is None:
            break
        yield text[start : m.end()]
        start = m.end()
    if start < len(text):
        yield text[start:]


def parse_spec(spec: str) -> int | None:
    """``bytes`` -> None; ``bpe:V`` -> V (checked)."""
    spec = spec.strip()
    if spec == "bytes":
        return None
    m = re.fullmatch(r"bpe:(\d+)", spec)
    if not m:
        raise ExtrapError(f"unknown tokenizer {spec!r}; use 'bytes' or 'bpe:V' with V >= 257 (e.g. bpe:8192)")
    vocab = int(m.group(1))
    if vocab < 257:
        raise ExtrapError(
            f"tokenizer {spec!r}: a byte-level BPE needs V >= 257 (256 bytes + merges); use e.g. bpe:8192"
        )
    return vocab


def _train_bpe(text: str, vocab: int) -> Any:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = HFTokenizer(models.BPE())
    # add_prefix_space=False keeps decode(encode(s)) == s
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    tok.train_from_iterator(_chunks(text, 1 << 16), trainer=trainer)
    return tok


def get_tokenizer(spec: str, corpus: Corpus, cache_dir: str | os.PathLike | None = None) -> Tokenizer:
    """``bytes``, or ``bpe:V`` trained on ``corpus``'s train split (cached by corpus hash and V)."""
    vocab = parse_spec(spec)
    if vocab is None:
        return ByteTokenizer()
    path = cache_root(cache_dir) / "tokenizers" / f"{corpus.hash[:16]}-bpe{vocab}-v{_TRAIN_FORMAT}.json"
    if path.is_file():
        try:
            return load_tokenizer(path)
        except (ValueError, ExtrapError):
            pass  # damaged cache entry: retrain
    from tokenizers import Tokenizer as HFTokenizer

    tok = _train_bpe(corpus.splits["train"], vocab)
    if tok.get_vocab_size() != vocab:
        raise ExtrapError(
            f"corpus {corpus.name!r} is too small to learn bpe:{vocab} "
            f"(only {tok.get_vocab_size()} tokens); use a smaller V or a larger corpus"
        )
    try:
        atomic_write_text(path, tok.to_str())
    except OSError:
        pass
    return BPETokenizer(HFTokenizer.from_str(tok.to_str()))


def load_tokenizer(source: str | os.PathLike | dict[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from ``to_json()`` output, a ``tokenizer.json``, or a folder holding one."""
    if isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        if path.is_dir():
            path = path / FILENAME
        if not path.is_file():
            raise ExtrapError(f"no tokenizer at {path}; pass a run folder containing {FILENAME}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise ExtrapError(f"{path} is not valid JSON ({e}); re-create it with `extrap corpus prepare`") from e
    if data.get("type") == "bytes":
        return ByteTokenizer()
    if isinstance(data.get("model"), dict) and data["model"].get("type") == "BPE":
        from tokenizers import Tokenizer as HFTokenizer

        return BPETokenizer(HFTokenizer.from_str(json.dumps(data)))
    raise ExtrapError("unrecognised tokenizer JSON (expected {'type': 'bytes'} or a Hugging Face BPE tokenizer)")
