"""The theory engine's numbers do not depend on the integer backend under mpmath and sympy.

gmpy2 is a dependency for speed only: mpmath and sympy then do their integer arithmetic with GMP. Exact
(rational, correctly rounded) arithmetic gives the same bits either way; this checks it on the schemes whose
series use each closed tail and the general Euler-Maclaurin path, by running the CLI with gmpy2 and without.
"""

from __future__ import annotations

import os
import subprocess
import sys

SPECS = ["alibi", "kerple-log", "type1", "type2", "sandwich:dbar=16", "tisa"]  # geometric, Hurwitz, EM, oscillating
SCRIPT = (
    "import sys, mpmath.libmp, sympy.external.gmpy as g\n"
    "print(mpmath.libmp.BACKEND, g.GROUND_TYPES)\n"
    "from extrap.cli import main\n"
    "main(['theory', *sys.argv[1:], '--eps', '1e-3,1e-12', '--json'])\n"
)


def _theory(env: dict) -> tuple[str, str]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, *SPECS], env=env, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    backends, _, rest = out.partition("\n")
    return backends, rest


def test_gmpy2_and_pure_python_integers_give_the_same_json():
    env = dict(os.environ)
    env.pop("MPMATH_NOGMPY", None)
    env.pop("SYMPY_GROUND_TYPES", None)
    fast_backends, fast = _theory(env)
    slow_backends, slow = _theory({**env, "MPMATH_NOGMPY": "1", "SYMPY_GROUND_TYPES": "python"})
    assert fast_backends == "gmpy gmpy"  # the dependency is installed and used
    assert slow_backends == "python python"
    assert '"verdict": "converges"' in fast  # real output, not an error line
    assert fast == slow
