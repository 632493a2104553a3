"""The theory engine against a recorded reference: every verdict, TRF integer and series sum.

``tests/data/theory_reference.json`` holds the full per-head results of
``analyse(spec, H, eps=(1e-2, 1e-3, 1e-6, 1e-12))`` for every built-in bias RPE (and a
few variants and trained-looking parameter values), recorded from an earlier, slower
implementation of the engine (000 Theorem 0.4 and Eq. 22).  Any later change to the
engine must reproduce it: integers and strings exactly, floats to 1e-12 relative, and B
to within the error bounds both implementations state.  1e-12 holds on any CPU: the engine
runs in float64 (u = 1.1e-16) on one thread, so another CPU changes at most the last ulp of
libm's or SLEEF's exp and log (tests/golden.py uses the same bound for ``theory``).

Regenerate (only when a change of results is intended and explained):

    python tests/test_theory_reference.py --write
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import mpmath
import pytest
import torch

from extrap import positional
from extrap.positional.base import BiasRPE
from extrap.theory import analyse, clear_cache

FIXTURE = Path(__file__).parent / "data" / "theory_reference.json"
EPS = (1e-2, 1e-3, 1e-6, 1e-12)
HEADS = (1, 4, 8, 12)
VARIANTS = ("alibi:shift=2", "alibi:h=0.5", "kerple-power:r2=0.5", "kerple-log:r2=0.3", "window:W=7")
# parameter values as training might leave them (H, ...) as plain lists
CUSTOM = {
    "alibi": {"slope": [1e-6, 1e-3, 0.0625, 0.3, 1.0, 2.5, 50.0, 700.0]},
    "kerple-log": {"r1": [1.01, 1.5, 2.0, 3.7, 5.0, 1.2], "r2": [0.01, 1.0, 10.0, 0.5, 3.0, 1e-3]},
    "kerple-power": {"r1": [0.5, 0.01, 2.0, 1e-4], "r2": [1.0, 0.5, 2.0, 1.5]},
    "t5": {"table": [[-0.05 * k for k in range(32)], [0.1 * ((k * 7) % 5) - 0.3 for k in range(32)]]},
}


def cases() -> list[tuple[str, int, dict | None]]:
    builtin = [n for n, cls in positional.REGISTRY.items() if issubclass(cls, BiasRPE)]
    out = [(name, h, None) for name in builtin for h in HEADS]
    out += [(spec, 8, None) for spec in VARIANTS]
    out += [(spec, len(next(iter(v.values()))), v) for spec, v in CUSTOM.items()]
    return out


def record(spec: str, heads: int, values: dict | None) -> list[dict]:
    """One case as JSON: HeadResult.to_json plus B to 30 digits and its error bound."""
    tensors = None if values is None else {k: torch.tensor(v, dtype=torch.float64) for k, v in values.items()}
    rows = []
    for r in analyse(spec, heads, tensors, eps=EPS):
        d = r.to_json()
        if r.series_sum is not None:
            d["series_sum_30"] = mpmath.nstr(r.series_sum, 30)
            d["series_sum_error_30"] = mpmath.nstr(r.series_sum_error or 0, 5)
        rows.append(d)
    return rows


def key(spec: str, heads: int, values: dict | None) -> str:
    return f"{spec}|H={heads}|{'custom' if values else 'init'}"


def close(old, new, path: str) -> None:
    """``new`` equals the recorded ``old``: ints/strings exactly, floats to 1e-12 relative."""
    assert type(old) is type(new) or {type(old), type(new)} <= {int, float}, f"{path}: {old!r} vs {new!r}"
    if isinstance(old, dict):
        assert sorted(old) == sorted(new), f"{path}: keys {sorted(old)} vs {sorted(new)}"
        for k in old:
            if k == "series_sum_digits":
                same_b(old[k], new[k], path)
            elif k in ("series_sum_30", "series_sum_error_30"):
                continue  # compared through the error bounds below
            else:
                close(old[k], new[k], f"{path}.{k}")
        if "series_sum_30" in old:
            same_b_bounds(old, new, path)
    elif isinstance(old, list):
        assert len(old) == len(new), f"{path}: {len(old)} vs {len(new)} items"
        for i, (a, b) in enumerate(zip(old, new)):
            close(a, b, f"{path}[{i}]")
    elif isinstance(old, float) or isinstance(new, float):
        assert math.isclose(old, new, rel_tol=1e-12, abs_tol=1e-300), f"{path}: {old!r} vs {new!r}"
    else:
        assert old == new, f"{path}: {old!r} vs {new!r}"


def same_b(old: str, new: str, path: str) -> None:
    """B agrees to every digit the recorded value claims (a value with more digits is fine)."""
    digits = len(old.replace("-", "").replace(".", "").split("e")[0].lstrip("0")) or 1
    with mpmath.workdps(40):
        a, b = mpmath.mpf(old), mpmath.mpf(new)
        assert abs(a - b) <= abs(a) * mpmath.mpf(10) ** (1 - digits), f"{path}: B {old} vs {new}"


def same_b_bounds(old: dict, new: dict, path: str) -> None:
    with mpmath.workdps(40):
        a, b = mpmath.mpf(old["series_sum_30"]), mpmath.mpf(new["series_sum_30"])
        bound = 2 * (mpmath.mpf(old["series_sum_error_30"]) + mpmath.mpf(new["series_sum_error_30"]))
        assert abs(a - b) <= bound + abs(a) * mpmath.mpf(10) ** -28, f"{path}: B {a} vs {b} (bound {bound})"


def write() -> None:
    clear_cache()
    data = {key(*c): {"spec": c[0], "heads": c[1], "values": c[2], "results": record(*c)} for c in cases()}
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(FIXTURE.read_text())


def test_reference_covers_every_builtin_bias(reference):
    assert sorted(reference) == sorted(key(*c) for c in cases())


@pytest.mark.parametrize("case", cases(), ids=lambda c: key(*c))
def test_engine_matches_reference(reference, case):
    clear_cache()
    old = reference[key(*case)]
    new = json.loads(json.dumps({"spec": case[0], "heads": case[1], "values": case[2], "results": record(*case)}))
    close(old, new, key(*case))


def test_cached_and_warm_results_match_reference(reference):
    """A second pass (warm caches, heads shared between schemes) gives the same numbers."""
    for case in cases()[::5]:
        record(*case)
    for case in cases():
        old = reference[key(*case)]
        close(old["results"], json.loads(json.dumps(record(*case))), key(*case))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
        print(f"wrote {FIXTURE}")
    else:
        print(__doc__)
