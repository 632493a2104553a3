"""The ``--json`` output of every producer, for a fixed smoke run, equals the golden file key by key.

The golden file (``tests/data/golden.json``, written by ``python tests/golden.py``) holds eval under three
protocols with a window, with τ search and on a file, erf, align (extrap and T5), task score (extrap and T5),
theory and ``theory --checkpoint``. Refactors must leave every key and value as it was; a key added on
purpose is listed in ``golden.ADDED``.
"""

import json

import pytest

pytest.importorskip("transformers")
import golden  # noqa: E402


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXTRAP_CACHE", str(tmp_path_factory.mktemp("cache")))
        return golden.capture(tmp_path_factory.mktemp("golden"))


def test_every_command_is_covered(captured):
    assert set(json.loads(golden.GOLDEN.read_text())) == set(captured)


@pytest.mark.parametrize("name", ["train", *golden.COMMANDS])
def test_output_equals_the_golden_file(captured, name):
    old = json.loads(golden.GOLDEN.read_text())[name]
    assert golden.differences(old, captured[name]) == []


def test_differences_sees_a_changed_value_a_missing_key_and_an_added_one():
    old = {"a": 1.0, "b": [1, {"c": "x"}], "d": True}
    new = {"a": 1.0 + 1e-9, "b": [1, {"c": "y"}], "e": 0}
    assert golden.differences(old, new) == [".d: missing", ".e: added", ".b[1].c: 'x' -> 'y'"]
    assert golden.differences({"a": 1.0}, {"a": 1.001}) == [".a: 1.0 -> 1.001"]
