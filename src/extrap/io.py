"""Atomic writes and run metadata shared by every command that writes results."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from extrap.errors import DiskFullError


FULL = (errno.ENOSPC, errno.EDQUOT)  # the file system (or the user's quota) has no room left


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, then rename.

    A reader never sees a half-written file, and a crash or a full disk leaves the old file intact.
    """
    path = Path(path)
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


def strict_dataclass(cls, d: dict, label: str):
    """Build dataclass ``cls`` from ``d``, refusing unknown keys with a one-line error."""
    from dataclasses import fields

    from extrap.errors import ExtrapError

    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise ExtrapError(f"{label}: unknown key(s) {', '.join(unknown)}")
    return cls(**d)


def slug(text: str, fallback: str = "item") -> str:
    """A file- and folder-name-safe form of a scheme spec or formula (at most 80 characters)."""
    s = re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_")
    return s[:80] or fallback
