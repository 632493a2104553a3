"""Quick commands do not import the heavy libraries that only other commands need."""

import json
import subprocess
import sys

import pytest

HEAVY = {"sympy", "matplotlib", "transformers", "scipy", "jinja2", "datasets"}

PROBE = f"""
import json, sys
from extrap.cli import main
code = main(sys.argv[1:])
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({sorted(HEAVY)!r}))
print(json.dumps({{"code": code, "loaded": loaded}}), file=sys.stderr)
"""


def _loaded(*argv: str) -> list[str]:
    """The heavy top-level packages in sys.modules after ``extrap ARGV`` ran in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr
    return result["loaded"]


@pytest.mark.parametrize("argv", [["--help"], ["pe", "list"], ["pe", "list", "--json"], ["train", "--help"]])
def test_quick_commands_import_no_heavy_library(argv):
    assert _loaded(*argv) == []


def test_theory_of_a_built_in_needs_sympy_alone():
    assert _loaded("theory", "alibi", "--heads", "1") == ["sympy"]  # the symbolic engine; no plotting, no HF
