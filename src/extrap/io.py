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


STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
DESCRIPTOR = re.compile(r"/(?:dev/fd|proc/(self|\d+)/fd)/(\d+)")
LINK = (
    "is a symbolic link: extrap writes only regular files or new paths, never through a link "
    "(it could point at a run's own file); remove the link or name another file"
)


def own_descriptor(path: str | os.PathLike) -> int | None:
    """The descriptor that ``path`` names if it is one of this process's open streams, else None.

    ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` and ``/proc/self/fd/N`` (a shell's ``>(...)`` too):
    what the shell opened for us, a pipe, a terminal or a file; it is written in place, as ``--json`` prints.
    """
    text = os.path.normpath(os.path.abspath(os.fspath(path)))
    if text in STREAMS:
        return STREAMS[text]
    m = DESCRIPTOR.fullmatch(text)
    return int(m[2]) if m and m[1] in (None, "self", str(os.getpid())) else None


def _lmode(path: str | os.PathLike) -> int | None:
    """The mode of ``path`` itself (None: new); a symbolic link, or a file where a folder should be, is refused."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise ExtrapError(f"{path}: a folder on its path is a file") from None
    if stat.S_ISLNK(mode):
        raise ExtrapError(f"{path} {LINK}")
    return mode


def _not_writable(path, mode: int) -> ExtrapError:
    if stat.S_ISDIR(mode):
        return ExtrapError(f"{path} is a directory; give a file name to write to")
    return ExtrapError(f"{path} is {_kind(mode)}, not a regular file: extrap writes only regular files or new paths")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"))
    return next((name for test, name in kinds if test(mode)), "a socket" if stat.S_ISSOCK(mode) else "special")


def check_file_target(path: str | os.PathLike) -> Path:
    """``path`` as :func:`atomic_write_bytes` will write it: a regular file or new, not a symbolic link.

    A rename replaces what is at ``path``: a device, a FIFO or a folder there would be destroyed, and a
    link's target (a run's ``config.json``) written.  Folders on the path may be links: the user chose them.
    """
    mode = _lmode(path)
    if mode is not None and not stat.S_ISREG(mode):
        raise _not_writable(path, mode)
    return Path(path)


def output_target(path: str | os.PathLike) -> Path:
    """Where an output the user names (``--out``, ``--csv``) lands: its real path, checked before any work.

    One of this process's streams (:func:`own_descriptor`), a FIFO or a character device (a terminal,
    ``/dev/null``) is written directly, as ``--json`` prints; a regular file or a new path atomically.
    A symbolic link, a folder, a block device or a socket is refused.  The real path lets callers
    compare two outputs, or an output and a run's files (``--csv /dev/stdout > RUN/config.json``).
    """
    fd = own_descriptor(path)
    if fd is not None:
        _check_descriptor(path, fd)
    else:
        mode = _lmode(path)
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
            raise _not_writable(path, mode)
    return Path(os.path.realpath(os.fspath(path)))


def _check_descriptor(path, fd: int) -> None:
    import fcntl

    try:
        mode, flags = os.fstat(fd).st_mode, fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        raise ExtrapError(f"{path}: descriptor {fd} is not open") from None
    if stat.S_ISDIR(mode) or flags & os.O_ACCMODE == os.O_RDONLY:
        raise ExtrapError(f"{path}: descriptor {fd} is not open for writing")


def write_output(path: str | os.PathLike, data: bytes | str) -> None:
    """Write an output the user named (``--out``, ``--csv``): a stream directly, a file atomically.

    A pipe, a terminal or a FIFO cannot take a temp file and a rename; it is written in place, the way
    ``--json`` prints (a FIFO waits for its reader, as a shell's ``>`` does).  See :func:`output_target`.
    """
    data = data.encode("utf-8") if isinstance(data, str) else data
    fd = own_descriptor(path)
    if fd is not None:
        _check_descriptor(path, fd)
        for stream in (sys.stdout, sys.stderr):  # what was printed before comes first
            if stream is not None:
                stream.flush()
        return _write_all(fd, data, path)
    mode = _lmode(path)
    if mode is None or not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        return atomic_write_bytes(path, data)
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        _write_all(fd, data, path)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes, path) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as e:
        if e.errno in FULL:
            raise DiskFullError(f"no space left on device while writing {path}") from None
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same folder, then rename.

    A reader never sees a half-written file, and a crash or a full disk leaves the old file intact.
    ``path`` must be a regular file or new, never a symbolic link (:func:`check_file_target`); the
    rename replaces the entry at ``path`` itself, so a link put there meanwhile is replaced, not followed.
    """
    path = check_file_target(path)
    make_folder(path.parent)
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


def make_folder(path: str | os.PathLike) -> Path:
    """Create folder ``path`` and its parents if missing (a folder that is a symbolic link is used as is)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ExtrapError(f"{path} is not a folder") from None
    except NotADirectoryError:
        raise ExtrapError(f"{path}: a folder on its path is a file") from None
    return path


def replace_folder(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Rename folder ``tmp`` to ``final`` (absent, or an empty folder), never onto a symbolic link."""
    if os.path.islink(final):
        raise ExtrapError(f"{final} {LINK}")
    os.replace(tmp, final)


def append_line(path: str | os.PathLike, line: str) -> None:
    """Append one line and sync it; a full disk raises :class:`DiskFullError` naming the file.

    An append cut short by a kill can leave a partial last line: readers of such logs drop it.
    A symbolic link at ``path`` is refused (``O_NOFOLLOW``), as by :func:`check_file_target`.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ExtrapError(f"{path} {LINK}") from None
        raise
    try:
        _write_all(fd, (line.rstrip("\n") + "\n").encode("utf-8"), path)
        os.fsync(fd)
    finally:
        os.close(fd)


def open_lock_file(path: str | os.PathLike) -> int:
    """A read-write descriptor of lock file ``path``, created if missing; a symbolic link there is refused."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ExtrapError(f"{path} {LINK}") from None
        raise


def rewrite_descriptor(fd: int, text: str) -> None:
    """Replace the whole content of the open file ``fd`` (a lock file's holder) by ``text``."""
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    _write_all(fd, text.encode("utf-8"), f"descriptor {fd}")


def bind_closed_streams() -> None:
    """A closed stdout or stderr (``>&-``) leaves ``sys.stdout`` None: what is printed goes nowhere, as before.

    The null device is bound to the closed descriptor, so that the next file extrap opens (a result,
    a checkpoint) cannot take descriptor 1 or 2 and receive text meant for the terminal.
    """
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, "w", closefd=False))


def silence_stdout() -> None:
    """Point descriptor 1 at the null device (the reader of a pipe went away: nothing more is shown)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)


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
