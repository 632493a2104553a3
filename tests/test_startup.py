"""Quick commands do not import the heavy libraries that only other commands need.

Each command runs in a fresh interpreter, and the heavy top-level packages in ``sys.modules``
afterwards are what it imported (directly or through extrap's own modules).
"""

import json
import subprocess
import sys

import pytest

HEAVY = {"torch", "sympy", "matplotlib", "transformers", "scipy", "jinja2", "datasets", "tensorboard"}

PROBE = f"""
import json, sys
from extrap.cli import main
code = main(sys.argv[1:])
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({sorted(HEAVY)!r}))
print(json.dumps({{"code": code, "loaded": loaded}}), file=sys.stderr)
"""


def _loaded(*argv: str) -> set[str]:
    """The heavy top-level packages in sys.modules after ``extrap ARGV`` ran in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    result = json.loads(proc.stderr.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr
    return set(result["loaded"])


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"]])
def test_help_imports_no_heavy_library_not_even_torch(argv):
    assert _loaded(*argv) == set()


@pytest.mark.parametrize("argv", [["pe", "list"], ["pe", "list", "--json"]])
def test_pe_list_imports_no_symbolic_plotting_or_hf_library(argv):
    assert _loaded(*argv) <= {"torch"}


@pytest.mark.parametrize("argv", [["pe", "list"], ["pe", "list", "--json"], ["pe", "list", "--options"]])
def test_pe_list_imports_no_torch(argv):
    assert "torch" not in _loaded(*argv)


def test_pe_list_csv_imports_no_torch(tmp_path):
    out = tmp_path / "schemes.csv"
    assert "torch" not in _loaded("pe", "list", "--csv", str(out))
    assert "alibi" in out.read_text()


@pytest.mark.parametrize("argv", [["theory", "alibi"], ["theory", "kerple-log", "t5", "--json"]])
def test_theory_of_built_ins_needs_the_symbolic_engine_and_no_plotting_or_hf(argv):
    assert _loaded(*argv) - {"torch"} == {"sympy"}  # sympy is the engine; torch builds the bias tables
