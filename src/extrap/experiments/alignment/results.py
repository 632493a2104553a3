"""The block of ``extrap study --experiment alignment`` (004 §5.2): per task, per model, τ and accuracy by length.

results.json's ``"alignment"`` is {task: :class:`AlignmentBlock`}, held as :class:`AlignmentTasks` by
``RESULTS`` (raw JSON in StudyResults) and read with :func:`blocks`.  Per-length tables are keyed by the
length as a string (JSON object keys): :func:`length_key`.  The closed forms per length are typed
(:class:`extrap.align.records.ClosedForms`, or only the log-length rule beyond the probe cap:
:class:`extrap.align.records.LogLengthForm`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extrap.experiments.protocol import ResultsBlock
from extrap.results import StudyResults
from extrap.results.records import Record, mapped, one, plain

if TYPE_CHECKING:  # extrap.align needs torch; the results and the report do not, until closed forms are read
    from extrap.align.records import ClosedForms, LogLengthForm

MODES = ("pmax", "entropy", "pmax-layer")  # Algorithm 1 settings (004 Table 4's "w/ P_max", "w/ H"; §8 per layer)
SETTINGS = ("none",) + MODES  # "none": τ = 1, the unaligned model


def length_key(L: int) -> str:
    return str(int(L))


def mean_tau(t):
    """One τ, or the mean of a per-layer list."""
    return sum(t) / len(t) if isinstance(t, list) else t


def mean_beyond(acc_by_len: dict | None, train_length: int) -> float | None:
    """Mean of {L: accuracy} over L > L_tr (None entries skipped; None if nothing is left)."""
    vals = [v for k, v in (acc_by_len or {}).items() if int(k) > train_length and isinstance(v, (int, float))]
    return sum(vals) / len(vals) if vals else None


def _load_closed_forms(v) -> dict:
    if not isinstance(v, dict) or not v:
        return {}
    from extrap.align.records import read_closed_forms

    read = {str(k): read_closed_forms(x) for k, x in v.items()}
    return {k: cf for k, cf in read.items() if cf is not None}


def closed_forms_field():
    """{L: closed forms}, typed in memory and JSON objects in results.json."""
    return field(
        default_factory=dict,
        metadata={"load": _load_closed_forms, "dump": lambda v: {k: cf.to_json() for k, cf in v.items()}},
    )


def best_setting(acc: dict, train_length: int) -> str | None:
    """The aligned setting with the highest mean accuracy over L > L_tr (ties: MODES order)."""
    scored = [(mean_beyond(acc.get(m), train_length), -i, m) for i, m in enumerate(MODES)]
    scored = [s for s in scored if s[0] is not None]
    return max(scored)[2] if scored else None


@dataclass
class DepthSummary(Record):
    """004 Table 9 analogue: accuracy per answer-depth bucket, per length and pooled over L > L_tr."""

    best_setting: str | None = None  # the aligned setting shown beside "none"
    buckets: list = plain(factory=list)  # [[lo, hi]] depth ranges
    by_length: dict = plain(factory=dict)  # {setting: {L: [accuracy per bucket]}}
    pooled_beyond: dict = plain(factory=dict)  # {setting: [accuracy per bucket]}


@dataclass
class AlignmentModel(Record):
    """One PE's results on one task: {setting or mode: {L: value}} tables."""

    accuracy: dict = plain(factory=dict)  # greedy exact match, {setting: {L: accuracy or None}}
    tau: dict = plain(factory=dict)  # {mode: {L: τ, or a list per layer}}
    tau_source: dict = plain(factory=dict)  # {mode: {L: "L_tr" | "algorithm1" | "log-length (...)"}}
    at_grid_edge: dict = plain(factory=dict)  # {mode: {L: bool}}
    closed_forms: dict[str, ClosedForms | LogLengthForm] = closed_forms_field()  # {L: extrap.align.closed_forms(...)}
    depth: DepthSummary = one(DepthSummary)
    errors: dict = plain(factory=dict)  # {"L=.. setting/method": message}
    rank_accuracy: dict | None = plain(omit=True)  # as accuracy, scored by ranking the candidates

    def __post_init__(self):
        if self.depth is None:
            self.depth = DepthSummary()


@dataclass
class AlignmentBlock(Record):
    """One retrieval task: its L_tr, the lengths, how it was scored and probed, and every model."""

    task: str | None = None
    train_length: int | None = None
    lengths: list = plain(factory=list)
    n: int | None = None  # scored examples per length
    buckets: int | None = None
    rank: bool | None = None
    probe_prompts: int | None = None
    probe_tokens: int | None = None
    probe_cap: int | None = None
    settings: list = plain(factory=lambda: list(SETTINGS))
    modes: list = plain(factory=lambda: list(MODES))
    models: dict[str, AlignmentModel] = mapped(AlignmentModel)


def alignment_blocks(section, tasks: list | None) -> dict[str, AlignmentBlock]:
    """{task: block} from results.json's "alignment"; a file with one block (no task level) is read as well."""
    if not isinstance(section, dict):
        return {}
    if "models" in section:
        section = {section.get("task") or "passkey": section}
    order = list(tasks) if tasks else list(section)
    return {t: AlignmentBlock.from_json(section[t]) for t in order if isinstance(section.get(t), dict)}


@dataclass(frozen=True)
class AlignmentTasks:
    """The experiment's block of results.json: every task's :class:`AlignmentBlock`, in the study's task order."""

    tasks: Mapping[str, AlignmentBlock] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {task: b.to_json() for task, b in self.tasks.items()}


def csv_rows(block: AlignmentTasks) -> list[dict]:
    """results.csv: one row per task, model, setting (none or an alignment mode) and length."""
    rows = []
    for task, b in block.tasks.items():
        for pe, m in b.models.items():
            for setting in dict.fromkeys([*m.accuracy, *m.tau]):
                for L in dict.fromkeys([*m.accuracy.get(setting, {}), *m.tau.get(setting, {})]):
                    values = {
                        "accuracy": m.accuracy.get(setting, {}).get(L),
                        "rank_accuracy": (m.rank_accuracy or {}).get(setting, {}).get(L),
                        "tau": m.tau.get(setting, {}).get(L),
                        "tau_source": m.tau_source.get(setting, {}).get(L),
                        "at_grid_edge": m.at_grid_edge.get(setting, {}).get(L),
                    }
                    key = {"section": "alignment", "task": task, "pe": pe, "setting": setting, "length": int(L)}
                    rows.append({**key, "train_length": b.train_length, **values})
    return rows


@dataclass(frozen=True)
class AlignmentResults(ResultsBlock):
    """``"alignment"``: {task: block} in the order of results.json's ``tasks`` (a file of one untasked block too)."""

    def read(self, value: Any, whole: Mapping) -> AlignmentTasks | None:
        if whole.get("experiment") != "alignment":  # another experiment's file holds no alignment block
            return None
        found = alignment_blocks(value, whole.get("tasks"))
        return AlignmentTasks(found) if found else None  # none: the key is left out, as before

    def rows(self, block: Any) -> list[dict]:
        return csv_rows(block)


RESULTS = AlignmentResults("alignment", AlignmentTasks)


def blocks(results: StudyResults) -> Mapping[str, AlignmentBlock]:
    """Every task's block of ``results`` (empty when the results hold none)."""
    found = RESULTS.of(results)
    return found.tasks if isinstance(found, AlignmentTasks) else {}
