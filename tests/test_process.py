"""extrap tunes only its own process: the console script's, never a caller's (the API, this test runner)."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys

import pytest

from extrap.cli import main


def test_a_caller_of_main_keeps_its_collector(capsys):
    before = gc.get_freeze_count()
    assert main(["theory", "alibi", "--heads", "2", "--json"]) == 0
    assert '"verdict": "converges"' in capsys.readouterr().out
    assert gc.get_freeze_count() == before  # nothing of this process was frozen


def test_the_command_freezes_what_its_imports_made():
    script = (
        "import gc, io, contextlib\n"
        "from extrap import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = cli.entry(['theory', 'alibi', '--heads', '2', '--json'])\n"
        "print(code, gc.get_freeze_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    code, frozen = map(int, out.stdout.split())
    assert code == 0
    assert frozen > 100_000  # torch's and sympy's objects: out of every later full collection's scan


IN_HEAP = """
import sys, torch
from extrap import process
if sys.argv[1] == "own":
    process.own()
    process.imports_done()
x = torch.empty(24 << 20, dtype=torch.uint8)  # 24 MB: more than any block freed during the imports
start, end = next(
    (int(a, 16), int(b, 16))
    for a, b, *rest in (line.replace("-", " ", 1).split() for line in open("/proc/self/maps"))
    if rest[-1] == "[heap]"
)
print(start <= x.data_ptr() < end)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_the_command_takes_its_temporaries_from_the_heap():
    """By default glibc maps a block above 128 KB on its own and unmaps it when freed, so the next one is paged in
    afresh (thousands of faults per analysis); the command's process takes blocks below 32 MB from the heap,
    whose freed memory is kept for the next allocation."""

    def in_heap(mode: str) -> bool:
        out = subprocess.run([sys.executable, "-c", IN_HEAP, mode], capture_output=True, text=True, check=True)
        return out.stdout.strip() == "True"

    assert not in_heap("plain")
    assert in_heap("own")
