"""Filler ("haystack") text for the retrieval tasks: real text from a project corpus, sanitised.

The passkey and topic tasks hide their needle in real text rather than in a
repeated junk sentence.  The text comes from a corpus split (``stdlib`` by
default, or any ``text:PATH``) and is sanitised once so that no task answer can
ever occur in it by accident:

* ASCII only, control characters dropped, runs of whitespace collapsed, one
  line per source line (indentation removed) that is at least half letters
  (after the digits are gone: no lines of bare punctuation);
* **no digits at all**, so a numeric answer (passkey, line value) occurs only
  where the task puts it;
* lines containing a task's own markers (``pass key``, ``REGISTER_CONTENT``,
  ``USER:``, ``ASSISTANT:``, ``topic``) are dropped, so the filler never
  imitates a needle or a conversation turn.

A chunk is read from a random word-aligned offset and wraps around at the end
of the text, so any length can be served from any non-trivial split.
"""

from __future__ import annotations

import random
import re
from typing import Any

from extrap.errors import ExtrapError

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DIGITS = re.compile(r"[0-9]")
_MARKERS = re.compile(r"pass ?key|register_content|\buser\s*:|\bassistant\s*:|topic", re.IGNORECASE)
MIN_CHARS = 200  # a filler shorter than this is refused (it would repeat every few sentences)

_CACHE: dict[tuple[str, str, str], Filler] = {}


def sanitize(text: str) -> str:
    """ASCII, digit-free, marker-free lines of collapsed whitespace (see the module docstring)."""
    text = text.encode("ascii", "ignore").decode("ascii")
    text = _DIGITS.sub("", text)
    out = []
    for ln in text.splitlines():
        ln = " ".join(_CONTROL.sub(" ", ln).split())
        letters = sum(c.isalpha() for c in ln)
        if letters >= 2 and 2 * letters >= len(ln) - ln.count(" ") and not _MARKERS.search(ln):
            out.append(ln)
    return "\n".join(out)


class Filler:
    """Sanitised text served as contiguous, word-aligned chunks (wrapping around at the end)."""

    def __init__(self, text: str, name: str = "text", *, clean: bool = False) -> None:
        self.text = text if clean else sanitize(text)
        self.name = name
        if len(self.text) < MIN_CHARS:
            raise ExtrapError(
                f"filler {name!r} has only {len(self.text)} usable characters after sanitising "
                f"(need >= {MIN_CHARS}); use a larger corpus, e.g. stdlib"
            )
        self._ratio: dict[Any, float] = {}

    def __repr__(self) -> str:
        return f"Filler({self.name!r}, {len(self.text):,} chars)"

    def random_offset(self, rng: random.Random) -> int:
        """A uniformly random start, moved to the beginning of the next word."""
        pos = rng.randrange(len(self.text))
        nxt = min((i for i in (self.text.find(" ", pos), self.text.find("\n", pos)) if i != -1), default=-1)
        return 0 if nxt == -1 or nxt + 1 >= len(self.text) else nxt + 1

    def take(self, offset: int, n_chars: int) -> str:
        """About ``n_chars`` characters from ``offset`` (wrapping), cut back to a whole word."""
        if n_chars <= 0:
            return ""
        parts, need, pos = [], n_chars + 1, offset  # one more char to see whether the last word is cut
        while need > 0:
            piece = self.text[pos : pos + need]
            parts.append(piece)
            need -= len(piece)
            if need > 0:
                parts.append("\n")
                need -= 1
            pos = 0
        s = "".join(parts)
        if len(s) > n_chars and not s[n_chars].isspace():  # the last word is incomplete: drop it
            cut = max(s.rfind(" ", 0, n_chars), s.rfind("\n", 0, n_chars))
            s = s[: max(cut, 0)]
        else:
            s = s[:n_chars]
        return s.strip()

    def chars_per_token(self, tokenizer) -> float:
        """Characters per token of this text for ``tokenizer`` (measured on a sample, cached)."""
        key = (tokenizer.name, id(tokenizer))
        if key not in self._ratio:
            sample = self.text[:20000]
            self._ratio[key] = max(1.0, len(sample) / max(1, len(tokenizer.encode_array(sample))))
        return self._ratio[key]


def get_filler(source: Any = None, split: str = "validation") -> Filler:
    """A :class:`Filler` from ``source``.

    ``source`` is a :class:`Filler` (returned as is), a loaded
    :class:`~extrap.data.Corpus`, a corpus spec (``stdlib``, ``text:PATH``, ...)
    or ``None`` for ``stdlib``.  The split's text is sanitised once per process.
    """
    if isinstance(source, Filler):
        return source
    from extrap.data import SPLITS, Corpus, load_corpus

    if split not in SPLITS:
        raise ExtrapError(f"unknown split {split!r}; use one of: {', '.join(SPLITS)}")
    corpus = source if isinstance(source, Corpus) else load_corpus(source or "stdlib")
    key = (corpus.hash, corpus.name, split)  # the name too: the report names the filler it used
    if key not in _CACHE:
        _CACHE[key] = Filler(corpus.splits[split], f"{corpus.name}/{split}")
    return _CACHE[key]
