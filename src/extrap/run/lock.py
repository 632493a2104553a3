"""An exclusive lock on a directory that one process writes: a run, or a study.

``fcntl.flock`` on ``DIR/.lock``: the kernel drops the lock when its holder dies, even by
``kill -9``, so a crash never leaves a stale lock behind.  The holder writes its PID into the
file so that a second writer can say who is in the way.  Readers (eval, erf, theory) take no lock.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from extrap.errors import ExtrapError, RunInUseError
from extrap.io import make_folder, open_lock_file, rewrite_descriptor

LOCK_FILE = ".lock"


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        pid = ""
    return f"process {pid}" if pid.isdigit() else "another process"


@contextmanager
def exclusive(directory: str | os.PathLike, what: str = "run directory", marker: str = "config.json"):
    """Hold ``directory``'s lock for the block, creating the directory if needed; refuse at once if taken.

    If the block did not leave ``marker`` (what makes the directory ours), the lock file goes
    again, and so does a directory the block created: a command that fails before writing
    anything leaves no trace, not even in a folder the user owns.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ExtrapError(f"{directory} is a file, not a {what}")
    created = not directory.exists()
    try:
        make_folder(directory)
    except ExtrapError as e:  # a parent is a file
        raise ExtrapError(f"cannot create {what} {directory}: {e}") from None
    except OSError as e:  # not writable
        raise ExtrapError(f"cannot create {what} {directory}: {e.strerror}") from None
    path = directory / LOCK_FILE
    fd = open_lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunInUseError(f"{what} {directory} is in use by {_holder(path)}") from None
        rewrite_descriptor(fd, f"{os.getpid()}\n")
        try:
            yield
        finally:
            if not (directory / marker).exists():
                path.unlink(missing_ok=True)
                if created and not any(directory.iterdir()):
                    directory.rmdir()
    finally:
        os.close(fd)  # closing the descriptor releases the lock
