"""extrap tunes only its own process: the console script's, never a caller's (the API, this test runner)."""

from __future__ import annotations

import gc
import subprocess
import sys

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
