"""Generated formulas and PE specs: `extrap theory` answers with strict JSON (status 0) or one error line (2).

Never a traceback, never a hang, never a bare NaN or Infinity in the JSON.
"""

from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extrap import positional as P
from extrap.cli import main

SECONDS = 5.0  # per example: the theory engine's own time limits must keep every answer this quick

# numbers over the whole range: zero, tiny, huge, beyond float64, and towers that must not be folded
NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=10**6).map(str),
    st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0", "0.0", "1", "2", "0.5", "1e-300", "1e308", "1e400", "10**400", "2**10**10", "9**9**9"]),
)
LEAVES = st.one_of(st.sampled_from(["t", "n", "t", "n", "pi", "e"]), NUMBERS)


def _extend(inner):
    return st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "**", "^"]), inner).map(
            lambda x: f"({x[0]}){x[1]}({x[2]})"
        ),
        st.tuples(st.sampled_from(["log", "exp", "sqrt", "cos", "sin", "abs"]), inner).map(lambda x: f"{x[0]}({x[1]})"),
        st.tuples(st.sampled_from(["min", "max"]), inner, inner).map(lambda x: f"{x[0]}({x[1]}, {x[2]})"),
        inner.map(lambda x: f"-({x})"),
    )


FORMULAS = st.recursive(LEAVES, _extend, max_leaves=6)
JUNK = st.text(alphabet="tn0123456789.+-*/^()elogxpsqrtcinmab,_ ", min_size=1, max_size=24)

# integers up to model sizes (Sandwich's cost grows with dbar); extreme values come as text
OPTION_VALUES = st.one_of(
    st.integers(min_value=-5, max_value=1024).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "0", "1", "-1", "0.5", "1e-300", "1e300", "1e400", "true", "no", "abc", "nan", "inf"]),
)
SCHEMES = sorted(P.REGISTRY)


@st.composite
def builtin_specs(draw) -> str:
    """A registry name with 0-2 options, each a real option name (or not) set to any value."""
    name = draw(st.sampled_from(SCHEMES))
    options = [o.name for o in P.REGISTRY[name].OPTIONS] + ["bogus"]
    pairs = draw(st.lists(st.tuples(st.sampled_from(options), OPTION_VALUES), max_size=2))
    return name + (":" + ",".join(f"{k}={v}" for k, v in pairs) if pairs else "")


SPECS = st.one_of(FORMULAS, FORMULAS.map(lambda f: "formula:" + f), builtin_specs(), JUNK)


def _strict(text: str):
    def refuse(constant):
        raise AssertionError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def theory(spec: str) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["theory", spec, "--json", "--heads", "1", "--eps", "1e-3"])
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - start


def check(spec: str) -> None:
    code, out, err, seconds = theory(spec)
    assert code in (0, 2), (spec, code, err)
    if code == 0:
        data = _strict(out)
        json.dumps(data, allow_nan=False)
        assert data["results"] and all(r["verdict"] for r in data["results"]), (spec, out)
    else:
        assert err.startswith("extrap: error:") and err.count("\n") == 1, (spec, err)
    assert seconds < SECONDS, (spec, seconds)


FUZZ = settings(
    max_examples=60,
    deadline=timedelta(seconds=SECONDS),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@FUZZ
@given(FORMULAS)
def test_generated_formulas_give_strict_json_or_one_error_line(formula):
    check("formula:" + formula)


@FUZZ
@given(SPECS)
def test_generated_pe_specs_give_strict_json_or_one_error_line(spec):
    check(spec)
