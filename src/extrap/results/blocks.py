"""An experiment's own block of ``results.json``: which key holds it and which record reads and writes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ResultsBlock:
    """An experiment's own block of ``results.json``: one ``record`` under ``key``, after the learning gate.

    :class:`~extrap.results.StudyResults` keeps it as raw JSON (in ``extra``, written back unchanged and in
    place) and knows no experiment; an experiment's spec declares its block (its ``results``), which alone
    reads it (:meth:`of`) and writes it (:meth:`entry`); ``read`` and ``write`` convert it (override them
    for a block of another shape).
    """

    key: str
    record: type  # has from_json(dict) and to_json() -> dict

    def of(self, results: Any) -> Any:
        """The block of ``results`` (a StudyResults) as its record; None when the results hold none."""
        value = results.extra.get(self.key)
        return None if value is None else self.read(value, results.to_json())

    def entry(self, block: Any) -> dict:
        """``block`` as the ``extra`` of a StudyResults: {key: its JSON} (empty for None)."""
        return {} if block is None else {self.key: self.write(block)}

    def read(self, value: Any, whole: Mapping) -> Any:
        """The block from its JSON ``value`` (``whole``: the file, for a block that needs its other keys)."""
        return self.record.from_json(value) if isinstance(value, dict) else None

    def write(self, block: Any) -> Any:
        return block.to_json()

    def rows(self, block: Any) -> list[dict]:
        """Its rows of the study's ``results.csv`` (each with its ``section``); none unless overridden."""
        return []
