"""Atomic writes and run metadata shared by every command that writes results."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from extrap.errors import DiskFullError, ExtrapError

FULL = (errno.ENOSPC, errno.EDQUOT)  # the file system (or the user's quota) has no room left


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, then rename.

    A reader never sees a half-written file, and a crash or a full disk leaves the old file intact.
    """
    path = Path(path)
    if path.is_dir():
        raise ExtrapError(f"{path} is a directory; give a file name to write to")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in FULL:
            raise DiskFullError(f"no space left on device while writing {path}") from None
        raise


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line and sync it; a full disk raises :class:`DiskFullError` naming the file.

    An append cut short by a kill can leave a partial last line: readers of such logs drop it.
    """
    try:
        with open(path, "a") as f:
            f.write(line.rstrip("\n") + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        if e.errno in FULL:
            raise DiskFullError(f"no space left on device while writing {path}") from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def run_metadata(seed: int | None = None, corpus_hash: str | None = None) -> dict[str, Any]:
    """What every result JSON records so that it can be reproduced."""
    from extrap.version import __version__

    return {
        "seed": seed,
        "corpus_hash": corpus_hash,
        "extrap_version": __version__,
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
    }


_SIMPLE_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "None": type(None), "dict": dict, "list": list}


def _type_error(value: Any, annotation: str) -> str | None:
    """Why ``value`` does not fit a simple annotation such as ``int``, ``float`` or ``str | None`` (None: it fits)."""
    names = [a.strip() for a in annotation.split("|")]
    if any(n not in _SIMPLE_TYPES for n in names):
        return None  # not a simple annotation: the dataclass checks it itself
    if isinstance(value, bool) and "bool" not in names:
        return f"expected {annotation}, got {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and "float" in names:
        return None if math.isfinite(value) else f"must be a finite number, got {value!r}"
    if any(isinstance(value, _SIMPLE_TYPES[n]) for n in names):
        return None
    return f"expected {annotation}, got {type(value).__name__} {value!r}"


def strict_dataclass(cls, d: Any, label: str):
    """Build dataclass ``cls`` from ``d``, refusing a non-mapping, unknown keys and values of the wrong type."""
    from dataclasses import fields

    if not isinstance(d, dict):
        raise ExtrapError(f"{label}: expected a mapping of settings, got {type(d).__name__}")
    known = {f.name: f for f in fields(cls) if f.init}
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ExtrapError(f"{label}: unknown key(s) {', '.join(map(str, unknown))}")
    for key, value in d.items():
        why = _type_error(value, str(known[key].type))
        if why:
            raise ExtrapError(f"{label}: {key}: {why}")
    return cls(**d)


def slug(text: str, fallback: str = "item") -> str:
    """A file- and folder-name-safe form of a scheme spec or formula (at most 80 characters)."""
    s = re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_")
    return s[:80] or fallback
