"""An experiment's own block of ``results.json``: which key holds it and which record reads and writes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ResultsBlock:
    """An experiment's own block of ``results.json``: one ``record`` under ``key``, after the learning gate.

    :class:`~extrap.results.StudyResults` holds it as ``block``; an experiment's spec declares it (its
    ``results``); ``read`` and ``write`` convert it (override them for a block of another shape).
    """

    key: str
    record: type  # has from_json(dict) and to_json() -> dict

    def read(self, value: Any, whole: Mapping) -> Any:
        """The block from its JSON ``value`` (``whole``: the file, for a block that needs its other keys)."""
        return self.record.from_json(value) if isinstance(value, dict) else None

    def write(self, block: Any) -> Any:
        return block.to_json()

    def rows(self, block: Any) -> list[dict]:
        """Its rows of the study's ``results.csv`` (each with its ``section``); none unless overridden."""
        return []
