"""``results.json``: the one record that ``extrap study`` writes and its report reads."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extrap.errors import ExtrapError
from extrap.io import atomic_write_json
from extrap.results.evaluation import EvalReport
from extrap.results.records import Record, listed, mapped, one, plain
from extrap.results.sections import Claim, LearningGate, RunSummary

RESULTS_FILE = "results.json"


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class StudyHost:
    """The machine a study ran on, so that its wall time (``StudyResults.seconds``) can be judged.

    ``resumed``: the folder already held the study, so the wall time covers only what was left.
    """

    cpu_count: int | None  # os.cpu_count()
    torch_threads: int | None  # torch threads per job
    jobs: int | None  # jobs run side by side
    device: str | None = None  # where the jobs ran (None: training on cuda when available, measuring on cpu)
    resumed: bool = False

    def to_json(self) -> dict:
        return {
            "cpu_count": self.cpu_count,
            "torch_threads": self.torch_threads,
            "jobs": self.jobs,
            "device": self.device,
            "resumed": self.resumed,
        }

    @classmethod
    def from_json(cls, d: Mapping) -> StudyHost:
        return cls(
            cpu_count=_int(d.get("cpu_count")),
            torch_threads=_int(d.get("torch_threads")),
            jobs=_int(d.get("jobs")),
            device=d.get("device") if isinstance(d.get("device"), str) else None,
            resumed=d.get("resumed") is True,
        )


@dataclass(frozen=True)
class StudyTraining:
    """The models a study trained and how, as its first run's configuration records them."""

    n_layer: int | None
    d_model: int | None
    n_head: int | None
    steps: int | None
    batch_size: int | None
    train_length: int | None
    tokenizer: str | None = None  # bytes, bpe:V
    corpus: str | None = None

    def to_json(self) -> dict:
        return {
            "n_layer": self.n_layer,
            "d_model": self.d_model,
            "n_head": self.n_head,
            "steps": self.steps,
            "batch_size": self.batch_size,
            "train_length": self.train_length,
            "tokenizer": self.tokenizer,
            "corpus": self.corpus,
        }

    @classmethod
    def from_json(cls, d: Mapping) -> StudyTraining:
        text = {k: v if isinstance(v := d.get(k), str) else None for k in ("tokenizer", "corpus")}
        return cls(
            **{k: _int(d.get(k)) for k in ("n_layer", "d_model", "n_head", "steps", "batch_size", "train_length")},
            **text,
        )


@dataclass
class StudyResults(Record):
    """Everything a study measured, with its settings and provenance.

    Its fields are the sections every experiment may fill (``runs``, ``eval``, ``failures``, the learning gate,
    the claims, ...); a study of several tasks fills ``tasks``, and its ``train_length`` may be {task: L_tr}.
    Each experiment keeps its own block as raw JSON in ``extra`` under the keys its
    :class:`~extrap.results.blocks.ResultsBlock` declares, which alone reads it (``RESULTS.of(results)``), so
    this module needs no experiment.  Keys this class does not declare are written back where the file held
    them; keys set by code stand where their block places them (:meth:`place`; none: before ``claims``, where
    blocks have always stood), so every results.json written so far re-serialises byte for byte, and a file
    written now keeps the order of the files before it (the extrapolation experiment's ``theory`` before
    ``runs``, its ``timing`` after ``failures``).  Any section may be empty: a study that failed part way, or
    an older file.
    """

    preset: str | None = None
    experiment: str | None = None
    pes: list = plain(factory=list)
    tasks: list | None = plain(omit=True)
    train_length: int | dict | None = None
    n_head: int | None = None
    lengths: list = plain(factory=list)
    delta: float | None = plain(omit=True)  # 000 Definition 0.1
    seed: int | None = None
    corpus_hash: str | None = None
    extrap_version: str | None = None
    command: str | None = None
    corpus: str | None = None
    created: str | None = None
    settings: dict = plain(factory=dict)  # the study preset, as run
    runs: dict[str, RunSummary] = mapped(RunSummary)
    eval: dict[str, dict[str, EvalReport]] = mapped(EvalReport, depth=2, omit=True)  # {pe: {protocol: report}}
    failures: dict = plain(factory=dict)  # {job: why it failed}
    learning: LearningGate | None = one(LearningGate, omit=True)  # did the models learn (None: not recorded)
    claims: list[Claim] = listed(Claim)
    seconds: float | None = plain(omit=True)  # the study's wall time (this invocation's, see host.resumed)
    host: StudyHost | None = one(StudyHost, omit=True)  # None: an earlier extrap did not record it
    training: StudyTraining | None = one(StudyTraining, omit=True)

    @classmethod
    def from_json(cls, d) -> StudyResults:
        results = super().from_json(d)
        keys = list(d) if isinstance(d, dict) else []
        results._after = {k: (keys[i - 1] if i else None,) for i, k in enumerate(keys) if k in results.extra}
        return results

    def place(self, after: Mapping[str, tuple[str | None, ...]]) -> None:
        """Where keys of ``extra`` stand in the file: each after the first key of its tuple that the file holds
        (None: first of all); a key not placed stands before ``claims``."""
        self._after = {**getattr(self, "_after", {}), **after}

    def to_json(self) -> dict:
        out = super().to_json()  # the undeclared keys last; each goes back after the key it followed
        order = [k for k in out if k not in self.extra]
        after = getattr(self, "_after", {})
        for key in self.extra:
            order.insert(_position(order, after.get(key, ())), key)
        return {k: out[k] for k in order}

    def all_pes(self) -> list[str]:
        """Every PE the shared sections mention, the study's order first."""
        seen = list(self.pes)
        for section in (self.runs, self.eval):
            seen += list(section)
        return list(dict.fromkeys(seen))

    def learned(self, pe: str) -> bool | None:
        """Whether ``pe``'s model learned (:class:`LearningGate`); None when that is not recorded."""
        return self.learning.learned(pe) if self.learning is not None else None

    def run_path(self, pe: str, study_dir: str | os.PathLike | None) -> Path | None:
        """The run folder of ``pe`` under ``study_dir``, if it exists."""
        run = self.runs.get(pe)
        if study_dir is None or run is None or not run.run_dir:
            return None
        path = Path(study_dir) / run.run_dir
        return path if path.is_dir() else None


def _position(order: list[str], candidates: tuple[str | None, ...]) -> int:
    """Where a key goes in ``order``: after the first of ``candidates`` there (None: at 0), else before claims."""
    for before in candidates:
        if before is None:
            return 0
        if before in order:
            return order.index(before) + 1
    return order.index("claims") if "claims" in order else len(order)


def load_results(path: str | os.PathLike) -> StudyResults:
    """``results.json`` (the file, or the study folder holding it), as written by this or an earlier version."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ExtrapError(f"cannot read {path}: {e.strerror}") from None
    except ValueError:
        raise ExtrapError(f"{path} is corrupt (not JSON)") from None
    if not isinstance(data, dict):
        raise ExtrapError(f"{path} does not hold a JSON object")
    return StudyResults.from_json(data)


def save_results(results: StudyResults, study_dir: str | os.PathLike) -> Path:
    """Write ``study_dir/results.json`` atomically; returns its path."""
    path = Path(study_dir) / RESULTS_FILE
    atomic_write_json(path, results.to_json())
    return path
