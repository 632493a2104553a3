"""Atomic writes and run metadata shared by every command that writes results."""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from extrap.errors import DiskFullError, ExtrapError

FULL = (errno.ENOSPC, errno.EDQUOT)  # the file system (or the user's quota) has no room left


def output_target(path: str | os.PathLike) -> Path:
    """Where a write to ``path`` lands: the file a symlink points to, which must be regular or new.

    A rename replaces whatever is at the target, so a device (``/dev/null``), a FIFO, a socket or a
    folder there would be destroyed or hidden: such a target is refused.  A symlink is followed, so the
    link stays and its target is written.
    """
    target = Path(os.path.realpath(os.fspath(path)))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target  # a new file
    except NotADirectoryError:
        raise ExtrapError(f"{path}: a folder on its path is a file") from None
    if stat.S_ISDIR(mode):
        raise ExtrapError(f"{path} is a directory; give a file name to write to")
    if not stat.S_ISREG(mode):
        raise ExtrapError(
            f"{path}{'' if str(target) == os.fspath(path) else f' (-> {target})'} is {_kind(mode)}, not a regular "
            "file: results are written only to regular files or new paths"
        )
    return target


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"))
    return next((name for test, name in kinds if test(mode)), "a socket" if stat.S_ISSOCK(mode) else "special")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, then rename.

    A reader never sees a half-written file, and a crash or a full disk leaves the old file intact.
    ``path`` must be a regular file or new (:func:`output_target`); a symlink's target is written.
    """
    path = output_target(path)
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
    atomic_write_text(path, json_text(obj) + "\n")


def finite_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinity replaced by null, each replacement named in its object's ``error``.

    An object that already carries an ``error`` keeps it; otherwise ``error`` is ``not finite: KEY, ...``,
    naming the keys whose value (or list of values) held a non-finite number.
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out, bad = {}, []
    for key, value in obj.items():
        out[key] = finite_json(value)
        if not isinstance(value, dict) and _has_non_finite(value):
            bad.append(str(key))
    if bad and not out.get("error"):
        out["error"] = f"not finite: {', '.join(bad)}"
    return out


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, (list, tuple)) and any(_has_non_finite(v) for v in value)


def json_text(obj: Any, indent: int | None = 2, **kw) -> str:
    """Strict JSON (RFC 8259: no NaN or Infinity) of ``obj``, non-finite numbers as null (:func:`finite_json`)."""
    return json.dumps(finite_json(obj), indent=indent, allow_nan=False, **kw)


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
