"""The tokenizer of a Hugging Face folder behind extrap's tokenizer interface."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np


class HFTokenizer:
    """An HF tokenizer behind extrap's tokenizer interface (no special tokens are added)."""

    def __init__(self, tok, folder: Path):
        self.tok = tok
        tok.model_max_length = int(1e30)  # no "sequence longer than" warnings: we cut windows ourselves
        files = sorted(
            f
            for f in folder.iterdir()
            if f.name.startswith(("tokenizer", "vocab", "merges", "special_tokens", "spiece"))
        )
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode())
            h.update(f.read_bytes())
        self.fingerprint = h.hexdigest()[:16]
        self.name = "hf"
        self.vocab_size = len(tok)

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def encode_array(self, text: str) -> np.ndarray:
        ids: list[int] = []
        lines = text.splitlines(keepends=True)
        chunk = 2000  # lines per call: bounded memory, identical ids for line-separated text
        for i in range(0, len(lines), chunk):
            ids.extend(self.encode("".join(lines[i : i + chunk])))
        return np.asarray(ids, dtype=np.int64)

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])
