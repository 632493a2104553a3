"""An experiment's block of results.json: read and written by its ResultsBlock alone, every committed file byte for
byte, and a file written now in the order of the files before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extrap.experiments.extrapolation.results import (
    RESULTS,
    ErfEntry,
    ExtrapolationBlock,
    Slopes,
    SlopeVariant,
    block,
)
from extrap.report.page import missing_summary
from extrap.results import StudyResults, load_results, save_results
from extrap.results.blocks import SpreadBlock
from extrap.results.tables import study_table

DOCS = Path(__file__).resolve().parents[1] / "docs"
COMMITTED = sorted(DOCS.glob("study_*/results.json"))
OWN = ("theory", "erf", "spearman", "slopes", "timing")


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name)
def test_every_committed_results_json_re_serialises_byte_for_byte(path, tmp_path):
    assert path.read_bytes() == save_results(load_results(path), tmp_path).read_bytes()


def test_the_committed_extrapolation_study_is_read_through_its_block():
    res = load_results(DOCS / "study_cpu")
    own, raw = block(res), json.loads((DOCS / "study_cpu" / "results.json").read_text())
    assert not any(hasattr(res, k) for k in OWN)  # StudyResults knows none of the five
    assert [r.to_json() for r in own.theory] == raw["theory"] and list(own.erf) == list(raw["erf"])
    assert own.spearman.to_json() == raw["spearman"] and own.timing.to_json() == raw["timing"]


def test_a_file_written_now_puts_the_block_where_the_files_before_it_held_it():
    """The shared sections alone, then the block put in: the same bytes as the committed file."""
    raw = json.loads((DOCS / "study_cpu" / "results.json").read_text())
    fresh = StudyResults.from_json({k: v for k, v in raw.items() if k not in OWN})
    RESULTS.put(fresh, block(StudyResults.from_json(raw)))
    assert json.dumps(fresh.to_json()) == json.dumps(raw)


def test_the_slope_variants_stand_after_the_failures_and_erf_after_the_runs_without_an_evaluation():
    res = StudyResults(experiment="alibi-slopes", failures={"alibi": "boom"})
    own = ExtrapolationBlock(erf={"alibi": ErfEntry(error="no gradient")}, slopes=Slopes([SlopeVariant("alibi")]))
    RESULTS.put(res, own)
    keys = list(res.to_json())
    assert keys.index("erf") == keys.index("runs") + 1  # eval is empty, so left out: erf follows the runs
    assert keys.index("slopes") == keys.index("failures") + 1 and "theory" not in keys and "timing" not in keys
    assert block(StudyResults.from_json(res.to_json())).slopes.variants[0].pe == "alibi"


def test_a_spread_block_reads_only_its_keys_and_none_when_the_file_holds_none():
    spread = SpreadBlock("toy", _Toy, after={"a": ("settings",), "b": ("a", "settings")})
    res = StudyResults.from_json({"settings": {}, "runs": {}, "c": 3, "claims": []})
    assert spread.of(res) is None
    spread.put(res, _Toy({"a": 1, "b": 2, "z": 9}))
    keys = list(res.to_json())
    assert keys[keys.index("settings") :][:4] == ["settings", "a", "b", "runs"]  # "z" is not the block's
    assert keys.index("c") == keys.index("runs") + 1  # a key the file held stays where it stood
    assert spread.of(res).d == {"a": 1, "b": 2} and "z" not in res.to_json()


class _Toy:
    def __init__(self, d):
        self.d = d

    @classmethod
    def from_json(cls, d):
        return cls(dict(d))

    def to_json(self):
        return self.d


def test_results_csv_lists_the_theory_rows_before_the_evaluation():
    res = load_results(DOCS / "study_cpu")
    sections = [r["section"] for r in study_table(res, RESULTS).rows]
    assert list(dict.fromkeys(sections)) == ["run", "theory", "eval", "erf", "spearman", "timing", "claim"]
    assert "theory" not in {r["section"] for r in study_table(res).rows}  # without its block: the shared rows only


def test_the_page_lists_the_errors_the_block_recorded_between_the_runs_and_the_evaluation():
    d = {
        "experiment": "extrapolation",
        "runs": {"alibi": {"error": "no run"}},
        "erf": {"alibi": {"error": "no gradient"}},
        "eval": {"alibi": {"last-token": {"error": "no eval"}}},
    }
    lines = missing_summary(StudyResults.from_json(d))
    errors = [x for x in lines if x.startswith(("runs ", "erf ", "eval "))]
    assert errors == ["runs alibi: no run", "erf alibi: no gradient", "eval alibi (last-token): no eval"]
