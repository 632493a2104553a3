"""An experiment's own block of ``results.json``: which keys hold it and which record reads and writes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResultsBlock:
    """An experiment's own block of ``results.json``: one ``record`` under ``key``, after the learning gate.

    :class:`~extrap.results.StudyResults` keeps it as raw JSON (in ``extra``, written back unchanged and in
    place) and knows no experiment; an experiment's spec declares its block (its ``results``), which alone
    reads it (:meth:`of`) and writes it (:meth:`entry`, or :meth:`put`, which also places its keys); ``read``
    and ``write`` convert it (override them for a block of another shape).
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

    def put(self, results: Any, block: Any) -> None:
        """Store ``block`` in ``results`` (a StudyResults), its keys where a file written now holds them."""
        results.extra.update(self.entry(block))
        results.place(self.places())

    def places(self) -> dict[str, tuple[str, ...]]:
        """{key: the keys it may follow in a file written now, the first one present}; none: before claims."""
        return {}

    def read(self, value: Any, whole: Mapping) -> Any:
        """The block from its JSON ``value`` (``whole``: the file, for a block that needs its other keys)."""
        return self.record.from_json(value) if isinstance(value, dict) else None

    def write(self, block: Any) -> Any:
        return block.to_json()

    def rows(self, block: Any) -> list[dict]:
        """Its rows of the study's ``results.csv`` (each with its ``section``), after the evaluation rows; none
        unless overridden."""
        return []

    def first_rows(self, block: Any) -> list[dict]:
        """Its rows of ``results.csv`` listed before the evaluation rows (after the runs); none unless overridden."""
        return []

    def errors(self, block: Any) -> list[str]:
        """The errors its block recorded in place of a result, one line each (the page lists them); none unless
        overridden."""
        return []


@dataclass(frozen=True)
class SpreadBlock(ResultsBlock):
    """A block spread over several top-level keys of ``results.json`` (the file's layout before experiments had
    blocks): its record's JSON is those keys, each of which stands, in a file written now, after the first of
    the keys ``after`` lists for it that the file holds (so such a file keeps its order).  ``key`` names it.
    """

    after: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # {key: keys it may follow}, file order

    def of(self, results: Any) -> Any:
        value = {k: results.extra[k] for k in self.after if k in results.extra}
        return self.read(value, results.extra) if value else None

    def entry(self, block: Any) -> dict:
        return {} if block is None else {k: v for k, v in self.write(block).items() if k in self.after}

    def places(self) -> dict[str, tuple[str, ...]]:
        return dict(self.after)


def own_part(block: ResultsBlock | None, results: Any, part: str) -> list:
    """``block``'s ``part`` (``rows``, ``first_rows`` or ``errors``) of ``results``: none without a block, or
    when the results hold none."""
    found = block.of(results) if block is not None else None
    return getattr(block, part)(found) if found is not None else []
